//! The scripted agents a scenario runs, one per role, rendered as the
//! `[agents]` part of `autoforge.toml`. Each one is a `tests/agents/phase_*`
//! script wrapped by `recorded.sh`, which records its prompts and can hold
//! chosen launches until the test releases them.

/// Which scripted agent plays each role, and which launches wait.
#[derive(Debug, Clone)]
pub struct Agents {
    implement: Vec<String>,
    /// One review mode per round; the last one serves every later round.
    review: Vec<String>,
    fix: Option<Vec<String>>,
    update_epic: Option<Vec<String>>,
    /// `phase_plan.sh` arguments, when a planner plays the plan role.
    plan: Option<Vec<String>>,
    /// Per role, the launch numbers (1-based) that wait for a release.
    held: Vec<(Role, Vec<u32>)>,
    /// The whole `[agents]` part as given (real agent CLIs), instead of
    /// the scripted agents.
    given: Option<String>,
}

use super::handles::{AsRole, Role};
use crate::common::git::agent_script as script;

impl Agents {
    /// A good implementer for issue #1 and a clean reviewer; no fixer and
    /// no EPIC updater until a scenario names them.
    pub fn scripted() -> Self {
        Self {
            implement: vec!["good".into(), "{hub}/octo/widgets/issues/1".into()],
            review: vec!["clean".into()],
            fix: None,
            update_epic: None,
            plan: None,
            held: Vec::new(),
            given: None,
        }
    }

    /// The `[agents]` tables exactly as `toml` spells them: profiles of
    /// real CLIs, which no `recorded.sh` wraps (no prompts recorded, no
    /// launch held).
    pub fn given_toml(toml: String) -> Self {
        Self {
            given: Some(toml),
            ..Self::scripted()
        }
    }

    /// `phase_implement.sh ARGS...`.
    pub fn implement<const N: usize>(mut self, args: [&str; N]) -> Self {
        self.implement = args.iter().map(|a| (*a).to_owned()).collect();
        self
    }

    /// `phase_review.sh MODE auto` with round N's mode at index N-1.
    pub fn review<const N: usize>(mut self, modes: [&str; N]) -> Self {
        assert!(N > 0, "at least one review mode");
        self.review = modes.iter().map(|m| (*m).to_owned()).collect();
        self
    }

    /// `phase_fix.sh ARGS...`.
    pub fn fix<const N: usize>(mut self, args: [&str; N]) -> Self {
        self.fix = Some(args.iter().map(|a| (*a).to_owned()).collect());
        self
    }

    /// `phase_update_epic.sh ARGS...`; `{evidence}` in an argument becomes
    /// the scenario's evidence folder (e.g. for a `sequence` counter).
    pub fn update_epic<const N: usize>(mut self, args: [&str; N]) -> Self {
        self.update_epic = Some(args.iter().map(|a| (*a).to_owned()).collect());
        self
    }

    /// `phase_plan.sh ARGS...` as the planner.
    pub fn plan<const N: usize>(mut self, args: [&str; N]) -> Self {
        self.plan = Some(args.iter().map(|a| (*a).to_owned()).collect());
        self
    }

    /// Launches `launches` of `role` wait until the test releases them.
    pub fn hold<const N: usize>(mut self, role: impl AsRole, launches: [u32; N]) -> Self {
        self.held.push((role.role(), launches.to_vec()));
        self
    }

    fn held(&self, role: Role) -> String {
        let numbers: Vec<String> = self
            .held
            .iter()
            .filter(|(r, _)| *r == role)
            .flat_map(|(_, n)| n.iter().map(u32::to_string))
            .collect();
        if numbers.is_empty() {
            "none".to_owned()
        } else {
            numbers.join(",")
        }
    }

    /// One profile: `recorded.sh EVIDENCE ROLE HOLD SCRIPT ARGS...`.
    fn profile(
        &self,
        evidence: &std::path::Path,
        name: &str,
        role: Role,
        agent: &str,
        args: &[String],
    ) -> String {
        let evidence = evidence.display().to_string();
        let mut argv = vec![
            script("recorded.sh"),
            evidence.clone(),
            role.role_name().to_owned(),
            self.held(role),
            script(agent),
        ];
        argv.extend(args.iter().map(|a| a.replace("{evidence}", &evidence)));
        let quoted: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
        // The evidence directory is where `recorded.sh` leaves prompts and
        // waits for releases: bound into the sandbox read-write.
        format!(
            "[agents.profiles.{name}]\ncommand = [{}]\nidle_timeout_seconds = 120\nmax_runtime_seconds = 180\n\n\
             [agents.profiles.{name}.sandbox]\nread_write = [{evidence:?}]\n\n",
            quoted.join(", ")
        )
    }

    /// The `[agents.profiles.*]` and `[agents.roles]` tables.
    pub(crate) fn toml(&self, evidence: &std::path::Path) -> String {
        if let Some(given) = &self.given {
            return given.clone();
        }
        let mut toml = self.profile(
            evidence,
            "implementer",
            Role::Implement,
            "phase_implement.sh",
            &self.implement,
        );
        let mut rounds = Vec::new();
        for (index, mode) in self.review.iter().enumerate() {
            let round = index + 1;
            let name = format!("reviewer_{round}");
            toml.push_str(&self.profile(
                evidence,
                &name,
                Role::Review,
                "phase_review.sh",
                &[mode.clone(), "auto".to_owned()],
            ));
            let range = if round == self.review.len() {
                format!("{round}+")
            } else {
                round.to_string()
            };
            rounds.push(format!("{{ rounds = \"{range}\", profile = \"{name}\" }}"));
        }
        if let Some(args) = &self.fix {
            toml.push_str(&self.profile(evidence, "fixer", Role::Fix, "phase_fix.sh", args));
        }
        if let Some(args) = &self.update_epic {
            toml.push_str(&self.profile(
                evidence,
                "epic",
                Role::UpdateEpic,
                "phase_update_epic.sh",
                args,
            ));
        }
        if let Some(args) = &self.plan {
            toml.push_str(&self.profile(evidence, "planner", Role::Plan, "phase_plan.sh", args));
        }
        toml.push_str("[agents.roles]\nimplement = \"implementer\"\n");
        if self.plan.is_some() {
            toml.push_str("plan = \"planner\"\n");
        }
        toml.push_str(&format!("review = [{}]\n", rounds.join(", ")));
        if self.fix.is_some() {
            toml.push_str("fix = \"fixer\"\n");
        }
        if self.update_epic.is_some() {
            toml.push_str("update_epic = \"epic\"\n");
        }
        toml
    }
}
