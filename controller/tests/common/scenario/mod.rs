//! A small scenario language over the real `autoforge serve`.
//!
//! A scenario names its agents and settings, starts the world (fakehub, a
//! fresh journal, the serve child with signed webhooks), acts as people
//! through fakehub's API and git, and asserts on what GitHub shows and
//! what the journal recorded:
//!
//! ```ignore
//! let s = Scenario::new()
//!     .agents(Agents::scripted().review(["findings", "clean"]).fix(["good", "R1-F1"]))
//!     .merge_mode("auto")
//!     .start()
//!     .await;
//! let issue = s.new_issue("a widget").await;
//! s.operator_labels(issue).await;
//! s.run_of(issue).await.reaches(Phase::Done).await;
//! s.pull().await.assert_merged_once().await;
//! assert_eq!(s.launches(Role::Fix), 1);
//! ```
//!
//! What a scenario holds are typed handles (`handles.rs`): an [`Issue`] or
//! a [`Pull`] that reads fakehub when asked, a [`Comment`], and the
//! controller's own [`Phase`], [`Role`] and [`Marker`].
//!
//! Every agent is wrapped by `tests/agents/recorded.sh`, so each launch
//! leaves its prompt in the scenario's evidence folder and a scenario can
//! hold a launch until it has changed GitHub under it.
//!
//! Used as `crate::common::scenario` by the `scenario_*` tests.

#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

mod agents;
mod budget;
mod github;
mod handles;

use std::path::PathBuf;
use std::time::Duration;

pub use super::{OWNER, POLL_SECONDS, Person, REPO, World, WorldOptions, eventually};
pub use agents::Agents;
pub use autoforge::machine::RunState;
use autoforge_journal::{IssueNumber, RunFilter, RunId, Stage};
pub use budget::Spent;
pub use fakehub::{FaultKind, FaultRule};
pub use handles::{AsRole, Comment, Issue, Marker, Phase, Pull, Role, Thread};
use serde_json::Value;

/// How long a scenario waits for any one thing before it fails; generous
/// for two shared cores, far above what a passing scenario takes.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// What a scenario configures before the serve process starts.
#[derive(Debug, Clone)]
pub struct Scenario {
    agents: Agents,
    merge_mode: &'static str,
    merge_method: Option<&'static str>,
    roadmap_every: Option<u32>,
    review_cap: Option<u32>,
    validation_cap: Option<u32>,
    validation: Vec<String>,
    faults: Vec<FaultRule>,
    backstop_max_seconds: Option<u64>,
    tokens_per_run: Option<u64>,
    /// `agents.heartbeat_seconds`.
    heartbeat_seconds: Option<u64>,
    /// `agents.relaunch_backoff_seconds` and `…_max_seconds`.
    relaunch_backoff: Option<(u64, u64)>,
    /// `agents.status_refresh_seconds`.
    status_refresh_seconds: Option<u64>,
    /// Extra environment of the serve process (vendor keys, PATH).
    env: Vec<(String, String)>,
    /// `plan.mode` (unset: off).
    plan_mode: Option<&'static str>,
}

impl Default for Scenario {
    fn default() -> Self {
        Self::new()
    }
}

impl Scenario {
    /// The default agents (good implementer, clean reviewer), validation
    /// `true`, `merge.mode = "never"`.
    pub fn new() -> Self {
        Self {
            agents: Agents::scripted(),
            merge_mode: "never",
            merge_method: None,
            roadmap_every: None,
            review_cap: None,
            validation_cap: None,
            validation: vec!["true".to_owned()],
            faults: Vec::new(),
            backstop_max_seconds: None,
            tokens_per_run: None,
            heartbeat_seconds: None,
            relaunch_backoff: None,
            status_refresh_seconds: None,
            env: Vec::new(),
            plan_mode: None,
        }
    }

    pub fn agents(mut self, agents: Agents) -> Self {
        self.agents = agents;
        self
    }

    /// `merge.mode`: `never`, `on-command` or `auto`.
    pub fn merge_mode(mut self, mode: &'static str) -> Self {
        self.merge_mode = mode;
        self
    }

    /// `merge.method`: `merge`, `squash` or `rebase` (unset by default).
    pub fn merge_method(mut self, method: &'static str) -> Self {
        self.merge_method = Some(method);
        self
    }

    /// `epic.update_every`: a roadmap update every `merges` merges.
    pub fn roadmap_every(mut self, merges: u32) -> Self {
        self.roadmap_every = Some(merges);
        self
    }

    /// `limits.review_rounds`.
    pub fn review_cap(mut self, rounds: u32) -> Self {
        self.review_cap = Some(rounds);
        self
    }

    /// `limits.validation_failures_per_phase`.
    pub fn validation_cap(mut self, failures: u32) -> Self {
        self.validation_cap = Some(failures);
        self
    }

    /// `validation.commands`, each a shell string.
    pub fn validation<const N: usize>(mut self, commands: [&str; N]) -> Self {
        self.validation = commands.iter().map(|c| (*c).to_owned()).collect();
        self
    }

    /// fakehub faults active from before the first event.
    pub fn faults(mut self, rules: Vec<FaultRule>) -> Self {
        self.faults = rules;
        self
    }

    /// `poll.backstop_max_seconds`: the longest pause before a waiting run
    /// re-reads GitHub without a webhook.
    pub fn backstop_max_seconds(mut self, seconds: u64) -> Self {
        self.backstop_max_seconds = Some(seconds);
        self
    }

    /// `limits.tokens_per_run`.
    pub fn tokens_per_run(mut self, tokens: u64) -> Self {
        self.tokens_per_run = Some(tokens);
        self
    }

    /// `agents.heartbeat_seconds`: how often a running launch's row is
    /// refreshed.
    pub fn heartbeat_seconds(mut self, seconds: u64) -> Self {
        self.heartbeat_seconds = Some(seconds);
        self
    }

    /// `plan.mode`: `off`, `post` or `approve`.
    pub fn plan_mode(mut self, mode: &'static str) -> Self {
        self.plan_mode = Some(mode);
        self
    }

    /// `agents.relaunch_backoff_seconds` and `agents.relaunch_backoff_max_seconds`:
    /// the pause before an automatic relaunch after a failed launch.
    pub fn relaunch_backoff(mut self, first_seconds: u64, max_seconds: u64) -> Self {
        self.relaunch_backoff = Some((first_seconds, max_seconds));
        self
    }

    /// `agents.status_refresh_seconds`: the shortest time between two
    /// status-comment edits showing a running launch.
    pub fn status_refresh_seconds(mut self, seconds: u64) -> Self {
        self.status_refresh_seconds = Some(seconds);
        self
    }

    /// A variable in the serve process's environment.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The whole `autoforge.toml` for an evidence folder.
    fn config(&self, evidence: &std::path::Path) -> String {
        let method = self
            .merge_method
            .map(|m| format!("method = \"{m}\"\n"))
            .unwrap_or_default();
        let mut toml = format!(
            "[driver]\nlease_seconds = 5\n\n[merge]\nmode = \"{}\"\n{method}\n",
            self.merge_mode
        );
        if let Some(seconds) = self.backstop_max_seconds {
            toml.push_str(&format!("[poll]\nbackstop_max_seconds = {seconds}\n\n"));
        }
        if let Some(mode) = self.plan_mode {
            toml.push_str(&format!("[plan]\nmode = \"{mode}\"\n\n"));
        }
        if let Some(every) = self.roadmap_every {
            toml.push_str(&format!("[epic]\nupdate_every = {every}\n\n"));
        }
        let mut limits = String::new();
        if let Some(rounds) = self.review_cap {
            limits.push_str(&format!("review_rounds = {rounds}\n"));
        }
        if let Some(failures) = self.validation_cap {
            limits.push_str(&format!("validation_failures_per_phase = {failures}\n"));
        }
        if let Some(tokens) = self.tokens_per_run {
            limits.push_str(&format!("tokens_per_run = {tokens}\n"));
        }
        if !limits.is_empty() {
            toml.push_str(&format!("[limits]\n{limits}\n"));
        }
        let commands: Vec<String> = self.validation.iter().map(|c| format!("{c:?}")).collect();
        toml.push_str(&format!(
            "[validation]\ncommands = [{}]\ntimeout_seconds = 60\n\n",
            commands.join(", ")
        ));
        let mut agents = String::new();
        if let Some(seconds) = self.heartbeat_seconds {
            agents.push_str(&format!("heartbeat_seconds = {seconds}\n"));
        }
        if let Some((first, max)) = self.relaunch_backoff {
            agents.push_str(&format!(
                "relaunch_backoff_seconds = {first}\nrelaunch_backoff_max_seconds = {max}\n"
            ));
        }
        if let Some(seconds) = self.status_refresh_seconds {
            agents.push_str(&format!("status_refresh_seconds = {seconds}\n"));
        }
        if !agents.is_empty() {
            toml.push_str(&format!("[agents]\n{agents}\n"));
        }
        toml.push_str(&self.agents.toml(evidence));
        toml
    }

    /// Starts fakehub, the journal and `autoforge serve`.
    pub async fn start(self) -> Running {
        let evidence = tempfile::tempdir().expect("an evidence folder");
        let world = World::start_with(WorldOptions {
            config_toml: Some(self.config(evidence.path())),
            env: self.env.clone(),
            ..WorldOptions::default()
        })
        .await;
        if !self.faults.is_empty() {
            world.hub.set_faults(self.faults.clone());
        }
        let owner = world.owner();
        Running {
            world,
            owner,
            evidence,
        }
    }
}

/// A started scenario.
pub struct Running {
    pub world: World,
    /// The repository owner, an operator.
    pub owner: Person,
    /// Where the wrapped agents leave their prompts and wait for release.
    evidence: tempfile::TempDir,
}

/// A run the scenario follows.
pub struct RunRef<'a> {
    s: &'a Running,
    pub id: RunId,
}

/// The run document at one moment, to prove nothing changed since.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSnapshot {
    pub phase: Phase,
    pub version: i64,
    /// The state document as JSON text: compared byte for byte, and
    /// readable when an assertion fails.
    pub state_json: String,
}

impl RunSnapshot {
    /// The state document the snapshot holds.
    pub fn state(&self) -> RunState {
        serde_json::from_str(&self.state_json).expect("a run state document")
    }
}

impl Running {
    /// A person with `permission` on the repository.
    pub fn person(&self, login: &str, permission: &str) -> Person {
        self.world.person(login, permission)
    }

    /// A new open issue written by the owner.
    pub async fn new_issue(&self, title: &str) -> Issue<'_> {
        let number = self.world.open_issue(&self.owner, title).await;
        self.issue(autoforge_journal::testing::issue(number))
    }

    /// An EPIC (issue #1) with `children` sub-issues, in order.
    pub async fn new_epic(&self, children: usize) -> (Issue<'_>, Vec<Issue<'_>>) {
        let epic = self.new_issue("The widgets EPIC").await;
        assert_eq!(
            epic.number,
            autoforge_journal::testing::issue(1),
            "the EPIC is the repository's first issue"
        );
        let mut opened = Vec::new();
        for index in 1..=children {
            let child = self.new_issue(&format!("Widget part {index}")).await;
            let read = self.get(&format!("/issues/{}", child.number)).await;
            self.post(
                &format!("/issues/{}/sub_issues", epic.number),
                serde_json::json!({ "sub_issue_id": read["id"] }),
            )
            .await;
            opened.push(child);
        }
        (epic, opened)
    }

    /// The owner (an operator) adds the trigger label.
    pub async fn operator_labels(&self, issue: impl Thread) {
        let number = issue.number();
        self.world.add_label(&self.owner, number, "autoforge").await;
    }

    /// `person` comments `body` on an issue or PR thread; the comment id.
    pub async fn comment_as(&self, person: &Person, thread: impl Thread, body: &str) -> u64 {
        self.world.comment(person, thread.number(), body).await
    }

    /// The run working on `issue`: started for it, or an EPIC's run that
    /// moved to it (waits for one to exist).
    pub async fn run_of(&self, issue: impl Thread) -> RunRef<'_> {
        let issue = issue.number();
        let journal = self.world.db.journal();
        let id = eventually(PATIENCE, &format!("a run for #{issue}"), || async move {
            let runs = journal.list_runs(RunFilter::All, 100).await.unwrap();
            runs.into_iter()
                .find(|run| {
                    run.state["issue"].as_u64() == Some(issue)
                        || (run.current_issue.get() == issue && run.state["epic"].is_null())
                })
                .map(|run| run.id)
        })
        .await;
        RunRef { s: self, id }
    }

    /// A run for `issue` other than `previous` (started after it was
    /// stopped, say); waits for one to exist.
    pub async fn run_after(&self, issue: IssueNumber, previous: RunId) -> RunRef<'_> {
        let journal = self.world.db.journal();
        let id = eventually(
            PATIENCE,
            &format!("another run for #{issue}"),
            || async move {
                let runs = journal.list_runs(RunFilter::All, 100).await.unwrap();
                runs.into_iter()
                    .find(|run| {
                        run.id != previous && run.state["issue"].as_u64() == Some(issue.get())
                    })
                    .map(|run| run.id)
            },
        )
        .await;
        RunRef { s: self, id }
    }

    /// The evidence file `NAME.N.SUFFIX` of launch `n` of a role.
    fn evidence(&self, role: Role, n: u32, suffix: &str) -> PathBuf {
        let role = role.role_name();
        self.evidence.path().join(format!("{role}.{n}.{suffix}"))
    }

    /// Waits until launch `n` of `role` has started (and, when held, is
    /// waiting).
    pub async fn launch_started(&self, role: impl AsRole, n: u32) {
        let role = role.role();
        let path = self.evidence(role, n, "started");
        let what = format!("{} launch {n}", role.role_name());
        eventually(PATIENCE, &what, || {
            let exists = path.exists();
            async move { exists.then_some(()) }
        })
        .await;
    }

    /// Lets a held launch go on.
    pub fn release(&self, role: impl AsRole, n: u32) {
        let path = self.evidence(role.role(), n, "release");
        std::fs::write(path, b"go").expect("release the agent");
    }

    /// The prompt launch `n` of `role` received.
    pub fn prompt(&self, role: impl AsRole, n: u32) -> String {
        let path = self.evidence(role.role(), n, "prompt");
        std::fs::read_to_string(path).expect("a recorded prompt")
    }

    /// The file `name` of the read-context folder launch `n` of `role` saw
    /// (copied by `recorded.sh` before the agent ran).
    pub fn context_file(&self, role: impl AsRole, n: u32, name: &str) -> String {
        let path = self.evidence(role.role(), n, "context").join(name);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("no context file {}: {e}", path.display()))
    }

    /// How many times `role` was launched.
    pub fn launches(&self, role: impl AsRole) -> u32 {
        let role = role.role().role_name();
        // `recorded.sh` claims launch N by creating `ROLE.N.claimed`.
        let claimed = |entry: std::io::Result<std::fs::DirEntry>| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let n = name.strip_prefix(role)?.strip_prefix('.')?;
            n.strip_suffix(".claimed")?.parse::<u32>().ok()
        };
        std::fs::read_dir(self.evidence.path())
            .expect("the evidence folder")
            .filter_map(claimed)
            .count()
            .try_into()
            .expect("a launch count")
    }

    /// A path inside the evidence folder, for agents that keep a counter.
    pub fn evidence_path(&self, name: &str) -> PathBuf {
        self.evidence.path().join(name)
    }
}

impl RunRef<'_> {
    /// The run's state document as the journal holds it now.
    pub async fn state(&self) -> RunState {
        let run = self.s.world.db.journal().get_run(self.id).await.unwrap();
        serde_json::from_value(run.expect("the run exists").state).expect("a run state document")
    }

    /// Waits until the run is in `phase` with every effect settled.
    pub async fn reaches(&self, phase: Phase) -> RunState {
        self.reaches_within(phase, PATIENCE).await
    }

    /// `reaches` with its own patience, for a run that must settle soon.
    pub async fn reaches_within(&self, phase: Phase, patience: Duration) -> RunState {
        let journal = self.s.world.db.journal();
        let run = self.id;
        let what = format!("the run in {} with every effect settled", phase.as_str());
        let reached = tokio::time::timeout(patience, async {
            loop {
                let current = journal.get_run(run).await.unwrap().expect("the run");
                let effects = journal.list_effects(run).await.unwrap();
                if current.phase == phase.as_str() && effects.iter().all(|e| settled(e, &effects)) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        if reached.is_err() {
            let state = self.state().await;
            let effects_now = journal.list_effects(run).await.unwrap();
            let unsettled: Vec<String> = effects_now
                .iter()
                .filter(|e| !settled(e, &effects_now))
                .map(|e| format!("{:?} {:?}: {:?}", e.kind, e.stage, e.reason))
                .collect();
            panic!(
                "timed out waiting for {what}; it is in {} (blocked: {:?}, failure: {:?}) after {:?}; unsettled effects {unsettled:?}",
                state.phase.as_str(),
                state.blocked,
                state.failure,
                self.phase_history().await
            );
        }
        self.state().await
    }

    /// The phases the run went through, in order (from its transitions).
    pub async fn phase_history(&self) -> Vec<Phase> {
        let events = self
            .s
            .world
            .db
            .journal()
            .list_audit_events(self.id)
            .await
            .unwrap();
        let mut phases: Vec<Phase> = Vec::new();
        for event in events.iter().filter(|e| e.kind == "transition") {
            let to: Phase = serde_json::from_value(event.detail["to"].clone())
                .unwrap_or_else(|e| panic!("a transition to a phase: {e}: {}", event.detail));
            if phases.last() != Some(&to) {
                phases.push(to);
            }
        }
        phases
    }

    /// The run document now, for `assert_run_state_unchanged_since`.
    pub async fn snapshot(&self) -> RunSnapshot {
        let run = self
            .s
            .world
            .db
            .journal()
            .get_run(self.id)
            .await
            .unwrap()
            .expect("the run");
        RunSnapshot {
            phase: serde_json::from_value(Value::String(run.phase)).expect("a run phase"),
            version: run.version,
            state_json: serde_json::to_string(&run.state).unwrap(),
        }
    }

    /// The run's phase and state document are byte-identical. (Its row
    /// version may move: a reply to a refused command is an effect, and
    /// an effect's intent commits with a transition that changes nothing.)
    pub async fn assert_run_state_unchanged_since(&self, snapshot: &RunSnapshot) {
        let now = self.snapshot().await;
        assert_eq!(now.phase, snapshot.phase, "the run's phase changed");
        assert_eq!(
            now.state_json, snapshot.state_json,
            "the run's state document changed"
        );
    }

    /// The journalled decision about the command in comment `comment`, if
    /// one was made.
    pub async fn decision_on(&self, comment: u64) -> Option<autoforge_journal::CommandDecision> {
        let id = i64::try_from(comment).expect("a comment id the journal can hold");
        let decisions = self.command_decisions().await;
        decisions.into_iter().find(|d| d.comment_id == id)
    }

    /// The journalled decisions about operator commands on this run.
    pub async fn command_decisions(&self) -> Vec<autoforge_journal::CommandDecision> {
        self.s
            .world
            .db
            .journal()
            .list_command_decisions(self.id)
            .await
            .unwrap()
    }

    /// How many effects of `kind` the journal planned for the run.
    pub async fn effect_count(&self, kind: autoforge_journal::EffectKind) -> usize {
        let effects = self
            .s
            .world
            .db
            .journal()
            .list_effects(self.id)
            .await
            .unwrap();
        effects.iter().filter(|e| e.kind == kind).count()
    }
}

/// Whether an effect is done being driven: observed, or a conflict (a
/// voided splice stays one after its re-request, by design).
/// Observed or in conflict, or left alone for good because an effect of
/// its own transition ended in conflict (the driver never drives the rest
/// of such a transition: it was planned on the conflicted write landing).
fn settled(effect: &autoforge_journal::Effect, all: &[autoforge_journal::Effect]) -> bool {
    matches!(effect.stage, Stage::Observed | Stage::Conflict)
        || all
            .iter()
            .any(|e| e.phase_entry == effect.phase_entry && e.stage == Stage::Conflict)
}

impl Running {
    /// Waits until serve has processed the webhook delivery of the `issues`
    /// event `action` (`labeled`, `unlabeled`…) on `issue`.
    pub async fn issue_delivery_processed(&self, issue: IssueNumber, action: &str) {
        let hub = &self.world.hub;
        let journal = self.world.db.journal();
        eventually(
            PATIENCE,
            &format!("delivery of issues.{action} on #{issue} processed"),
            || async move {
                let guids: Vec<String> = hub
                    .deliveries()
                    .into_iter()
                    .filter(|d| {
                        d.event == "issues"
                            && d.action.as_deref() == Some(action)
                            && d.payload["issue"]["number"].as_u64() == Some(issue.get())
                    })
                    .map(|d| d.guid)
                    .collect();
                for guid in guids {
                    let stored = journal.get_delivery(&guid).await.unwrap();
                    if stored.is_some_and(|d| d.processed_at.is_some()) {
                        return Some(());
                    }
                }
                None
            },
        )
        .await;
    }

    /// Waits until serve has processed the webhook delivery of comment
    /// `comment` (it reached the journal and the dispatcher finished it).
    pub async fn comment_delivery_processed(&self, comment: u64) {
        let hub = &self.world.hub;
        let journal = self.world.db.journal();
        eventually(
            PATIENCE,
            &format!("delivery of comment {comment} processed"),
            || async move {
                let guids: Vec<String> = hub
                    .deliveries()
                    .into_iter()
                    .filter(|d| d.payload["comment"]["id"].as_u64() == Some(comment))
                    .map(|d| d.guid)
                    .collect();
                for guid in guids {
                    let stored = journal.get_delivery(&guid).await.unwrap();
                    if stored.is_some_and(|d| d.processed_at.is_some()) {
                        return Some(());
                    }
                }
                None
            },
        )
        .await;
    }

    /// Waits until serve has processed the webhook delivery of review
    /// `review` (submitted or dismissed).
    pub async fn review_delivery_processed(&self, review: u64) {
        let hub = &self.world.hub;
        let journal = self.world.db.journal();
        eventually(
            PATIENCE,
            &format!("delivery of review {review} processed"),
            || async move {
                let guids: Vec<String> = hub
                    .deliveries()
                    .into_iter()
                    .filter(|d| d.payload["review"]["id"].as_u64() == Some(review))
                    .map(|d| d.guid)
                    .collect();
                for guid in guids {
                    let stored = journal.get_delivery(&guid).await.unwrap();
                    if stored.is_some_and(|d| d.processed_at.is_some()) {
                        return Some(());
                    }
                }
                None
            },
        )
        .await;
    }
}
