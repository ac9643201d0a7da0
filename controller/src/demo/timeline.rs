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
use autoforge_journal::{
    AgentLaunch, Effect, EffectKind, Journal, Run, RunFilter, Stage, ValidationRecord,
};
use chrono::{DateTime, Utc};

/// What has been printed so far.
pub struct Timeline {
    started: Instant,
    /// The same instant on the database's clock, to place journal times.
    started_at: DateTime<Utc>,
    /// Per run: the issue the last printed phase line was on.
    issues: HashMap<String, i64>,
    transitions: HashSet<i64>,
    launches_started: HashSet<String>,
    launches_ended: HashSet<String>,
    effects: HashMap<String, Stage>,
    validations: HashSet<i64>,
}

/// One line to print and when it happened, so that what one poll finds
/// comes out in the order it happened (an agent's end before the phase
/// change it caused, a push before the PR it opened).
type Entry = (DateTime<Utc>, String);

impl Timeline {
    pub fn new(started: Instant) -> Timeline {
        let since = chrono::Duration::from_std(started.elapsed()).unwrap_or_default();
        Timeline {
            started,
            started_at: Utc::now() - since,
            issues: HashMap::new(),
            transitions: HashSet::new(),
            launches_started: HashSet::new(),
            launches_ended: HashSet::new(),
            effects: HashMap::new(),
            validations: HashSet::new(),
        }
    }

    /// Prints a line of the demo's own, stamped now.
    pub fn say(&self, text: &str) {
        println!("{} {text}", stamp(self.started.elapsed().as_secs_f64()));
    }

    fn print(&self, mut entries: Vec<Entry>) {
        entries.sort_by_key(|(at, _)| *at);
        for (at, text) in entries {
            let seconds = (at - self.started_at).num_milliseconds() as f64 / 1000.0;
            println!("{} {text}", stamp(seconds.max(0.0)));
        }
    }

    /// Reads the journal, prints what is new, and returns every run.
    pub async fn poll(&mut self, journal: &Journal) -> anyhow::Result<Vec<Run>> {
        let runs = journal
            .list_runs(RunFilter::All, 1000)
            .await
            .context("cannot list the runs")?;
        let mut entries = Vec::new();
        for run in &runs {
            let key = run.id.to_string();
            if !self.issues.contains_key(&key) {
                let issue = super::working_issue(run);
                entries.push((run.created_at, format!("run     started on #{issue}")));
                self.issues.insert(key.clone(), issue);
            }
            let effects = journal
                .list_effects(run.id)
                .await
                .context("cannot list a run's effects")?;
            self.transitions(journal, run, &effects, &mut entries)
                .await?;
            for launch in journal
                .list_launches(run.id)
                .await
                .context("cannot list a run's launches")?
            {
                self.launch(&launch, &mut entries);
            }
            for validation in journal
                .list_validations(run.id, None)
                .await
                .context("cannot list a run's validations")?
            {
                if self.validations.insert(validation.id) {
                    entries.push((validation.recorded_at, validation_line(&validation)));
                }
            }
            for effect in effects {
                let id = effect.id.to_string();
                if self.effects.get(&id) != Some(&effect.stage) {
                    if let Some(line) = effect_line(&effect) {
                        entries.push((effect.updated_at, line));
                    }
                    self.effects.insert(id, effect.stage);
                }
            }
        }
        self.print(entries);
        Ok(runs)
    }

    /// Phase changes from the journal's transition records, so none is
    /// missed when several happen between two polls. The issue of each is
    /// the one whose status comment that transition edits.
    async fn transitions(
        &mut self,
        journal: &Journal,
        run: &Run,
        effects: &[Effect],
        entries: &mut Vec<Entry>,
    ) -> anyhow::Result<()> {
        let key = run.id.to_string();
        for event in journal
            .list_audit_events(run.id)
            .await
            .context("cannot list a run's transitions")?
        {
            if event.kind != "transition" || !self.transitions.insert(event.id) {
                continue;
            }
            let text = |name: &str| event.detail[name].as_str().unwrap_or("?").to_owned();
            let (from, to) = (text("from"), text("to"));
            if from == to {
                continue;
            }
            let version = event.detail["version"].as_i64();
            let issue = effects
                .iter()
                .filter(|effect| Some(effect.phase_entry) == version)
                .filter(|effect| effect.kind == EffectKind::EditStatusComment)
                .find_map(|effect| status_issue(&effect.target))
                .unwrap_or_else(|| super::working_issue(run));
            let before = self.issues.insert(key.clone(), issue).unwrap_or(issue);
            entries.push((event.recorded_at, phase_line(&from, before, &to, issue)));
        }
        Ok(())
    }

    fn launch(&mut self, launch: &AgentLaunch, entries: &mut Vec<Entry>) {
        let id = launch.id.to_string();
        if self.launches_started.insert(id.clone()) && launch.ended_at.is_none() {
            entries.push((
                launch.started_at,
                format!(
                    "launch  {} agent `{}` (attempt {})",
                    launch.phase, launch.profile, launch.attempt
                ),
            ));
        }
        if let Some(ended_at) = launch.ended_at
            && self.launches_ended.insert(id)
        {
            entries.push((ended_at, launch_end_line(launch)));
        }
    }
}

/// `[  12.3s]`: seconds since the demo started.
fn stamp(seconds: f64) -> String {
    format!("[{seconds:>7.1}s]")
}

/// The issue of a status comment effect's target (`issue/7`).
fn status_issue(target: &str) -> Option<i64> {
    target.strip_prefix("issue/")?.parse().ok()
}

fn phase_line(from: &str, before: i64, to: &str, issue: i64) -> String {
    if before == issue {
        format!("phase   {from} → {to} on #{issue}")
    } else {
        format!("phase   {from} on #{before} → {to} on #{issue}")
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
    fn a_phase_line_names_the_issue_and_shows_a_move_to_the_next_one() {
        assert_eq!(
            phase_line("REVIEW", 1, "FIX", 1),
            "phase   REVIEW → FIX on #1"
        );
        assert_eq!(
            phase_line("UPDATE_EPIC", 1, "IMPLEMENT", 2),
            "phase   UPDATE_EPIC on #1 → IMPLEMENT on #2"
        );
        assert_eq!(status_issue("issue/12"), Some(12));
        assert_eq!(status_issue("pull/12"), None);
    }

    #[test]
    fn the_stamp_is_right_aligned_seconds_with_one_decimal() {
        assert_eq!(stamp(3.04), "[    3.0s]");
        assert_eq!(stamp(125.26), "[  125.3s]");
    }
}
