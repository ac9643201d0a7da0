//! The readable timeline the demo prints while it runs: phase changes,
//! agent launches with their durations, validation results and GitHub
//! writes, each once, as the journal records them.
//!
//! It polls the journal rather than hooking into the driver, so it shows
//! exactly what an operator's dashboard would, and it can never change
//! what the controller does.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use anyhow::Context;
use autoforge_journal::{AgentLaunch, Effect, Journal, Run, RunFilter, Stage, ValidationRecord};

/// What has been printed so far.
pub struct Timeline {
    started: Instant,
    phases: HashMap<String, (i64, String)>,
    launches_started: HashSet<String>,
    launches_ended: HashSet<String>,
    effects: HashMap<String, Stage>,
    validations: HashSet<i64>,
}

impl Timeline {
    pub fn new(started: Instant) -> Timeline {
        Timeline {
            started,
            phases: HashMap::new(),
            launches_started: HashSet::new(),
            launches_ended: HashSet::new(),
            effects: HashMap::new(),
            validations: HashSet::new(),
        }
    }

    /// Prints a line of the demo's own, on the same clock.
    pub fn say(&self, text: &str) {
        println!("{} {text}", stamp(self.started.elapsed().as_secs_f64()));
    }

    /// Reads the journal, prints what is new, and returns every run.
    pub async fn poll(&mut self, journal: &Journal) -> anyhow::Result<Vec<Run>> {
        let runs = journal
            .list_runs(RunFilter::All, 1000)
            .await
            .context("cannot list the runs")?;
        for run in &runs {
            let key = run.id.to_string();
            let now = (run.current_issue, run.phase.clone());
            match self.phases.get(&key) {
                None => self.say(&format!(
                    "run started on #{} in {}",
                    run.current_issue, run.phase
                )),
                Some(before) if *before != now => self.say(&phase_line(before, run)),
                Some(_) => {}
            }
            self.phases.insert(key, now);
            for launch in journal
                .list_launches(run.id)
                .await
                .context("cannot list a run's launches")?
            {
                self.launch(&launch);
            }
            for validation in journal
                .list_validations(run.id, None)
                .await
                .context("cannot list a run's validations")?
            {
                if self.validations.insert(validation.id) {
                    self.say(&validation_line(&validation));
                }
            }
            for effect in journal
                .list_effects(run.id)
                .await
                .context("cannot list a run's effects")?
            {
                let id = effect.id.to_string();
                if self.effects.get(&id) != Some(&effect.stage) {
                    if let Some(line) = effect_line(&effect) {
                        self.say(&line);
                    }
                    self.effects.insert(id, effect.stage);
                }
            }
        }
        Ok(runs)
    }

    fn launch(&mut self, launch: &AgentLaunch) {
        let id = launch.id.to_string();
        if self.launches_started.insert(id.clone()) && launch.ended_at.is_none() {
            self.say(&format!(
                "launch  {} agent `{}` (attempt {})",
                launch.phase, launch.profile, launch.attempt
            ));
        }
        if launch.ended_at.is_some() && self.launches_ended.insert(id) {
            self.say(&launch_end_line(launch));
        }
    }
}

/// `[  12.3s]`: seconds since the demo started.
fn stamp(seconds: f64) -> String {
    format!("[{seconds:>7.1}s]")
}

fn phase_line(before: &(i64, String), run: &Run) -> String {
    let (issue, phase) = before;
    let now = super::working_issue(run);
    if *issue == now {
        format!("phase   {phase} → {} on #{now}", run.phase)
    } else {
        format!("phase   {phase} on #{issue} → {} on #{now}", run.phase)
    }
}

fn launch_end_line(launch: &AgentLaunch) -> String {
    let seconds = launch.duration_ms.unwrap_or_default() as f64 / 1000.0;
    let exit = launch.exit_status.map_or_else(
        || "no exit status".to_owned(),
        |code| format!("exit {code}"),
    );
    format!(
        "agent   {} `{}` finished in {seconds:.1}s ({exit}, {})",
        launch.phase,
        launch.profile,
        launch.outcome.as_deref().unwrap_or("no outcome")
    )
}

fn validation_line(validation: &ValidationRecord) -> String {
    let seconds = validation.duration_ms as f64 / 1000.0;
    let sha: String = validation.sha.chars().take(8).collect();
    format!(
        "check   `{}` on {sha}: {} in {seconds:.1}s",
        validation.command,
        validation.outcome.as_str()
    )
}

/// A line for an effect that reached a stage worth telling: observed (the
/// write is on GitHub) or conflict. Intents and attempts are not news.
fn effect_line(effect: &Effect) -> Option<String> {
    let verb = match effect.stage {
        Stage::Observed => "GitHub ",
        Stage::Conflict => "CONFLICT",
        Stage::Intended | Stage::Attempted => return None,
    };
    let mut line = format!("{verb} {} {}", effect.kind.as_str(), effect.target);
    if let Some(reason) = effect
        .reason
        .as_deref()
        .filter(|_| effect.stage == Stage::Conflict)
    {
        line.push_str(&format!(": {reason}"));
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_is_right_aligned_seconds_with_one_decimal() {
        assert_eq!(stamp(3.04), "[    3.0s]");
        assert_eq!(stamp(125.26), "[  125.3s]");
    }
}
