//! The chaos workload on the real `autoforge serve`: in `octo/widgets` an
//! EPIC (#1) of three issues, each implemented, given a review round with
//! two findings (one on a changed line, one outside the diff), fixed (one
//! finding fixed, one deferred to a new follow-up issue), reviewed clean,
//! merged automatically and reported on the EPIC (progress comment and
//! roadmap section); in `octo/gadgets` one issue taken through the same
//! rounds and merged on an operator's `/autoforge merge`. Scripted agents.
//!
//! `merge.mode` is frozen into a run when it starts, so the workload
//! starts serve with `on-command`, lets the gadgets run start, and
//! restarts serve with `auto` before the EPIC is labelled — an operator
//! changing the configuration between two runs.
//!
//! With a [`Killer`] the same steps run while it kills serve and agents
//! (and Postgres, when it asks to: the workload then runs on a durable
//! cluster of its own, so the kills touch no other test).

use std::path::Path;
use std::time::{Duration, Instant};

use autoforge_journal::{Run, RunFilter, RunId, Stage};
use serde_json::{Value, json};

use super::killer::Killer;
use crate::common::cluster::TestCluster;
use crate::common::git::agent_script;
use crate::common::{OWNER, Person, World, WorldOptions};

/// The second repository, with one issue merged on command.
pub const GADGETS: &str = "gadgets";
/// The EPIC's children in `octo/widgets`, in order.
pub const CHILDREN: [u64; 3] = [2, 3, 4];

/// Extra settings of a workload (the secrets scan plants its secrets here).
#[derive(Debug, Clone, Default)]
pub struct WorkloadOptions {
    /// Environment of every serve process.
    pub env: Vec<(String, String)>,
    pub webhook_secret: Option<String>,
    /// Added to serve's `DATABASE_URL` when it has no password.
    pub database_password: Option<String>,
    /// Appended to every agent profile (e.g. `env_inherit`).
    pub profile_extra: String,
    /// Every agent launch first sleeps this many seconds (a slower agent,
    /// as real ones are): the workload then lasts long enough for a chaos
    /// run's kills to land all through it, agents' included.
    pub agent_pace_seconds: u32,
}

/// One profile: `recorded.sh EVIDENCE ROLE none SCRIPT ARGS...`, behind
/// `sh -c 'sleep PACE && exec "$@"'` when the options pace the agents.
fn profile(
    evidence: &Path,
    options: &WorkloadOptions,
    [name, role, script]: [&str; 3],
    args: &[&str],
) -> String {
    let evidence = evidence.display().to_string();
    // Behind `sh` the sandbox shows only the scripts' folder, not the
    // crate folder that `agent_script`'s `..` passes through.
    let scripts = std::fs::canonicalize(agent_script(""))
        .expect("the scripted agents' folder")
        .display()
        .to_string();
    let script_path = |name: &str| format!("{scripts}/{name}");
    let mut argv = Vec::new();
    if options.agent_pace_seconds > 0 {
        argv.extend([
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            format!("sleep {} && exec \"$@\"", options.agent_pace_seconds),
            "paced".to_owned(),
        ]);
    }
    argv.extend([
        script_path("recorded.sh"),
        evidence.clone(),
        role.to_owned(),
        "none".to_owned(),
        script_path(script),
    ]);
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let quoted: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
    // The sandbox shows an agent its own program's folder; behind `sh` the
    // scripts' folder has to be named.
    format!(
        "[agents.profiles.{name}]\ncommand = [{}]\nidle_timeout_seconds = 120\nmax_runtime_seconds = 180\n\
         {}\n[agents.profiles.{name}.sandbox]\nread_write = [{evidence:?}]\nread_only = [{scripts:?}]\n\n",
        quoted.join(", "),
        options.profile_extra
    )
}

/// The whole `autoforge.toml` with merge mode `mode`.
pub fn config(evidence: &Path, mode: &str, options: &WorkloadOptions) -> String {
    let children: Vec<String> = CHILDREN
        .iter()
        .map(|n| format!("{{hub}}/{OWNER}/widgets/issues/{n}"))
        .collect();
    let mut epic_args = vec!["after"];
    epic_args.extend(children.iter().map(String::as_str));
    let profile = |which: [&str; 3], args: &[&str]| profile(evidence, options, which, args);
    let profiles = [
        profile(
            ["implementer", "implement", "phase_implement.sh"],
            &["per_issue", "-"],
        ),
        profile(
            ["first_reviewer", "review", "phase_review.sh"],
            &["inline", "1"],
        ),
        profile(
            ["later_reviewer", "review", "phase_review.sh"],
            &["clean", "auto"],
        ),
        profile(
            ["fixer", "fix", "phase_fix.sh"],
            &["fix_and_defer", "R1-F1", "R1-F2"],
        ),
        profile(["epic", "update_epic", "phase_update_epic.sh"], &epic_args),
    ]
    .concat();
    format!(
        r#"[driver]
lease_seconds = 5

[merge]
mode = "{mode}"

[validation]
commands = ["true"]
timeout_seconds = 60

{profiles}[agents.roles]
implement = "implementer"
review = [{{ rounds = "1", profile = "first_reviewer" }}, {{ rounds = "2+", profile = "later_reviewer" }}]
fix = "fixer"
update_epic = "epic"
"#
    )
}

/// A started workload: the world, where its agents leave evidence, and
/// the kills when it is a chaos run.
pub struct Workload {
    pub world: World,
    pub evidence: tempfile::TempDir,
    pub killer: Option<Killer>,
    pub options: WorkloadOptions,
    /// The workload's own Postgres, when the killer kills it. Declared
    /// after `world`, whose database lives on it.
    cluster: Option<TestCluster>,
    began: Instant,
}

/// Longest a workload waits for one step, before any kill is counted:
/// far above a passing run's time on two shared cores.
const PATIENCE: Duration = Duration::from_secs(300);
/// Each kill gives every wait this much more time (lease expiry, restart).
const PER_KILL: Duration = Duration::from_secs(20);

impl Workload {
    pub async fn start(killer: Option<Killer>, options: WorkloadOptions) -> Workload {
        let evidence = tempfile::tempdir().expect("an evidence folder");
        let log_file = evidence.path().join("serve.log");
        let cluster = match &killer {
            Some(killer) if killer.kills_postgres() => Some(TestCluster::start_durable().await),
            _ => None,
        };
        let world = World::start_with(WorldOptions {
            config_toml: Some(config(evidence.path(), "on-command", &options)),
            env: options.env.clone(),
            log_file: Some(log_file),
            webhook_secret: options.webhook_secret.clone(),
            database_password: options.database_password.clone(),
            database_server: cluster.as_ref().map(|c| c.url().clone()),
            ..WorldOptions::default()
        })
        .await;
        let killer = killer.map(|k| k.with_env(options.env.clone()));
        Workload {
            world,
            evidence,
            killer,
            options,
            cluster,
            began: Instant::now(),
        }
    }

    /// serve's stdout and stderr, every process appended.
    pub fn serve_log(&self) -> std::path::PathBuf {
        self.evidence.path().join("serve.log")
    }

    /// Every step of the workload, until both runs are DONE with every
    /// effect observed. Returns the two runs (EPIC, gadgets).
    pub async fn drive(&mut self) -> (RunId, RunId) {
        let owner = self.world.owner();
        self.world.add_repository_to_installation(GADGETS).await;
        let gadget = self.open_issue(&owner, GADGETS, "A gadget", "please").await;
        assert_eq!(gadget, 1);
        self.label(&owner, GADGETS, gadget).await;
        let gadgets_run = self
            .until("the gadgets run started", |runs| {
                find(runs, GADGETS).filter(|r| r.state.get("settings").is_some())
            })
            .await
            .id;

        // The operator switches to automatic merges and restarts serve.
        let auto = config(self.evidence.path(), "auto", &self.options);
        self.world.rewrite_config(&auto);
        let stopped = self.world.terminate();
        eprintln!("chaos: serve stopped for the configuration change ({stopped})");
        let env: Vec<(&str, &str)> = self
            .options
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.world.restart_serve(&env).await;

        let epic = self
            .open_issue(&owner, "widgets", "The widgets EPIC", "please")
            .await;
        assert_eq!(epic, 1);
        for (index, child) in CHILDREN.iter().enumerate() {
            let title = format!("Widget part {}", index + 1);
            let number = self.open_issue(&owner, "widgets", &title, "please").await;
            assert_eq!(number, *child);
            let read = self
                .world
                .rest_as(
                    &owner,
                    reqwest::Method::GET,
                    &format!("/repos/{OWNER}/widgets/issues/{number}"),
                    Value::Null,
                )
                .await;
            self.world
                .rest_as(
                    &owner,
                    reqwest::Method::POST,
                    &format!("/repos/{OWNER}/widgets/issues/{epic}/sub_issues"),
                    json!({ "sub_issue_id": read["id"] }),
                )
                .await;
        }
        self.label(&owner, "widgets", epic).await;

        self.settled(gadgets_run, "READY_FOR_MERGE").await;
        self.comment(&owner, GADGETS, gadget, "/autoforge merge")
            .await;
        let epic_run = self
            .until("the EPIC's run started", |runs| find(runs, "widgets"))
            .await
            .id;
        self.settled(gadgets_run, "DONE").await;
        self.settled(epic_run, "DONE").await;
        (epic_run, gadgets_run)
    }

    /// Waits (killing on schedule) until `check` finds something in the
    /// journal's runs.
    async fn until<F>(&mut self, what: &str, check: F) -> Run
    where
        F: Fn(&[Run]) -> Option<Run>,
    {
        loop {
            // A read fails while a killed Postgres is down or just back.
            let runs = self.world.db.journal().list_runs(RunFilter::All, 100).await;
            if let Some(run) = runs.ok().and_then(|runs| check(&runs)) {
                return run;
            }
            self.pause(what).await;
        }
    }

    /// Waits until `run` is in `phase` with every effect observed.
    async fn settled(&mut self, run: RunId, phase: &str) {
        let what = format!("run {run:?} in {phase}, every effect observed");
        loop {
            let journal = self.world.db.journal();
            // A read fails while a killed Postgres is down or just back.
            if let (Ok(Some(current)), Ok(effects)) =
                (journal.get_run(run).await, journal.list_effects(run).await)
                && current.phase == phase
                && effects.iter().all(|e| e.stage == Stage::Observed)
            {
                return;
            }
            self.pause(&what).await;
        }
    }

    /// One poll interval of a wait: a kill when one is due, a deadline.
    async fn pause(&mut self, what: &str) {
        let kills = self.killer.as_ref().map_or(0, |k| k.kills.len());
        let patience = PATIENCE + PER_KILL * u32::try_from(kills).unwrap_or(u32::MAX);
        if self.began.elapsed() > patience {
            let kills = self.killer.as_ref().map(Killer::describe);
            let log = std::fs::read_to_string(self.serve_log()).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(80)..].join("\n");
            panic!(
                "timed out after {:.0} s waiting for {what}; {kills:?}; serve's log ends:\n{tail}",
                self.began.elapsed().as_secs_f64()
            );
        }
        if self.killer.is_some() {
            let safe = self.no_run_retrying().await;
            if let Some(killer) = self.killer.as_mut() {
                killer
                    .tick(&mut self.world, self.cluster.as_mut(), safe)
                    .await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    /// No run counts a retry of a failed step (its state's
    /// `counters.retries` is 0); false when the journal cannot say.
    async fn no_run_retrying(&self) -> bool {
        let runs = self.world.db.journal().list_runs(RunFilter::All, 100).await;
        runs.is_ok_and(|runs| {
            runs.iter()
                .all(|run| run.state["counters"]["retries"].as_u64().unwrap_or(0) == 0)
        })
    }

    async fn open_issue(&self, person: &Person, repo: &str, title: &str, body: &str) -> u64 {
        let issue = self
            .world
            .rest_as(
                person,
                reqwest::Method::POST,
                &format!("/repos/{OWNER}/{repo}/issues"),
                json!({"title": title, "body": body}),
            )
            .await;
        issue["number"].as_u64().expect("issue number")
    }

    async fn label(&self, person: &Person, repo: &str, issue: u64) {
        self.world
            .rest_as(
                person,
                reqwest::Method::POST,
                &format!("/repos/{OWNER}/{repo}/issues/{issue}/labels"),
                json!({"labels": ["autoforge"]}),
            )
            .await;
    }

    async fn comment(&self, person: &Person, repo: &str, issue: u64, body: &str) {
        self.world
            .rest_as(
                person,
                reqwest::Method::POST,
                &format!("/repos/{OWNER}/{repo}/issues/{issue}/comments"),
                json!({"body": body}),
            )
            .await;
    }
}

/// The run of repository `octo/<repo>`.
fn find(runs: &[Run], repo: &str) -> Option<Run> {
    let full = format!("{OWNER}/{repo}");
    runs.iter().find(|r| r.repository == full).cloned()
}
