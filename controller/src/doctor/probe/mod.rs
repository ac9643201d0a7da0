//! `autoforge doctor --probe`: one real launch per configured profile, to
//! learn before a run whether the agent can work at all. Each probe costs
//! a model call on the operator's account, which the command says first.
//!
//! A profile that implements or fixes gets a write probe: create a file
//! holding a random marker and commit it, checked with git afterwards.
//! Any other (reviewers, the EPIC update, unrouted ones) gets a read probe:
//! answer with the marker it reads from a file, changing nothing. Each
//! probe runs in its own throw-away repository ([`repo`]) through the same
//! launch path as a run (the supervisor, inside the agent sandbox, with a
//! fresh HOME and TMPDIR), and everything it made is removed afterwards.
//! [`verdict`] turns what happened into OK or a reason.

pub mod repo;
pub mod verdict;

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::Check;
use crate::agents::profile::{AgentCatalog, LaunchProfile};
use crate::agents::supervisor::{self, LaunchSpec};
use crate::config::Config;
use crate::machine::AgentPhase;
use crate::redact::Redactor;

pub use repo::{MARKER_FILE, ProbeRepo};
pub use verdict::ProbeFailure;

/// The first line of a read probe's prompt (test model servers key on it).
pub const READ_PROBE_TITLE: &str = "AUTOFORGE DOCTOR READ PROBE";
/// The first line of a write probe's prompt.
pub const WRITE_PROBE_TITLE: &str = "AUTOFORGE DOCTOR WRITE PROBE";
/// The word the agent's answer line starts with, before the marker.
pub const ANSWER_WORD: &str = "PROBE_ANSWER";
/// Where probe directories go, under the state directory.
const PROBES_DIR: &str = "doctor-probes";
/// A probe is a minute's work at most; a CLI silent for this long is
/// retrying something (a refused key, an unreachable API), and waiting out
/// a run's usual limits would only delay the answer.
const PROBE_IDLE_LIMIT: Duration = Duration::from_secs(120);
const PROBE_WALL_LIMIT: Duration = Duration::from_secs(600);

/// What a probe asks of its agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    Read,
    Write,
}

impl ProbeKind {
    /// The role the launch plays: the reviewer's read-only view of the
    /// repository for a read probe, the implementer's for a write probe.
    fn role(self) -> AgentPhase {
        match self {
            ProbeKind::Read => AgentPhase::Review,
            ProbeKind::Write => AgentPhase::Implement,
        }
    }
}

/// What one probe measured, shown in `--json` beside its status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeFacts {
    pub profile: String,
    pub kind: ProbeKind,
    pub duration_ms: u64,
    /// As the profile's usage reading found them; `None` when it reports none.
    pub tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<ProbeFailure>,
}

/// Each profile once, with the probe its roles call for: a write probe
/// when it implements or fixes, else (reviewers, the EPIC update, which
/// only reads and answers, unrouted profiles) a read probe.
pub fn planned(catalog: &AgentCatalog) -> Vec<(String, ProbeKind)> {
    catalog
        .profiles()
        .keys()
        .map(|name| {
            let writes = [AgentPhase::Implement, AgentPhase::Fix]
                .into_iter()
                .any(|role| catalog.routing().profile_for(role, 1) == Some(name.as_str()));
            let kind = if writes {
                ProbeKind::Write
            } else {
                ProbeKind::Read
            };
            (name.clone(), kind)
        })
        .collect()
}

/// The line shown before any probe starts, because each one is billed.
pub fn billing_notice(plan: &[(String, ProbeKind)]) -> String {
    let names: Vec<String> = plan
        .iter()
        .map(|(name, kind)| format!("{name} ({})", kind_word(*kind)))
        .collect();
    format!(
        "--probe: {} real agent launch(es), one per profile: {}. Each calls its model \
         and is billed to the account behind that profile's key.",
        plan.len(),
        names.join(", ")
    )
}

fn kind_word(kind: ProbeKind) -> &'static str {
    match kind {
        ProbeKind::Read => "read",
        ProbeKind::Write => "write",
    }
}

/// Runs every planned probe in turn, one check line each.
pub async fn run_probes(config: &Config) -> Vec<Check> {
    let settings = &config.settings;
    let catalog = match settings.agents.catalog(settings.limits.review_rounds) {
        Ok(catalog) => catalog,
        Err(_) => {
            return vec![Check::skipped(
                "probe",
                "the agent configuration is invalid (see the config line)",
            )];
        }
    };
    let parent = config.state_dir.join(PROBES_DIR);
    let mut checks = Vec::new();
    for (name, kind) in planned(&catalog) {
        let Some(profile) = catalog.profiles().get(&name) else {
            continue;
        };
        let redactor = probe_redactor(config, profile);
        checks.push(probe_check(profile, kind, &parent, &redactor).await);
    }
    // Each probe removed its own directory; the parent goes too once empty
    // (a failure to remove one is already a failed probe line).
    let _ = std::fs::remove_dir(&parent);
    checks
}

/// The controller's secrets plus the values this profile hands its agent.
fn probe_redactor(config: &Config, profile: &LaunchProfile) -> Redactor {
    crate::agents::pipeline::launch_redactor(&crate::driver::controller_redactor(config), profile)
}

/// One probe of `profile` in a throw-away repository under `parent`.
pub async fn probe_check(
    profile: &LaunchProfile,
    kind: ProbeKind,
    parent: &Path,
    redactor: &Redactor,
) -> Check {
    let name = format!("probe:{}", profile.name);
    let repo = match ProbeRepo::create(parent).await {
        Ok(repo) => repo,
        Err(error) => {
            let failure = ProbeFailure::Setup {
                detail: format!("{error:#}"),
            };
            return probe_line(name, profile, kind, Duration::ZERO, None, Some(failure));
        }
    };
    let (duration, tokens, failure) = launch_and_judge(profile, kind, &repo, redactor).await;
    let removed = repo.remove();
    let failure = failure.or_else(|| {
        removed.err().map(|error| ProbeFailure::Setup {
            detail: format!("{error:#}"),
        })
    });
    probe_line(name, profile, kind, duration, tokens, failure)
}

async fn launch_and_judge(
    profile: &LaunchProfile,
    kind: ProbeKind,
    repo: &ProbeRepo,
    redactor: &Redactor,
) -> (Duration, Option<u64>, Option<ProbeFailure>) {
    let mut profile = profile.clone();
    profile.idle_timeout = profile.idle_timeout.min(PROBE_IDLE_LIMIT);
    profile.max_runtime = profile.max_runtime.min(PROBE_WALL_LIMIT);
    let workdir = repo.repo();
    let prompt = prompt(kind, &workdir, repo);
    let before = match repo.fingerprint().await {
        Ok(before) => before,
        Err(error) => {
            let detail = format!("{error:#}");
            return (Duration::ZERO, None, Some(ProbeFailure::Setup { detail }));
        }
    };
    let spec = LaunchSpec::new(
        &profile,
        kind.role(),
        &prompt,
        &workdir,
        repo.launch_dir(),
        redactor,
    );
    let outcome = match supervisor::launch(spec).await {
        Ok(outcome) => outcome,
        Err(error) => return (Duration::ZERO, None, Some(verdict::launch_error(&error))),
    };
    let duration = outcome.record.duration;
    let tokens = outcome.record.tokens;
    let failure = verdict::judge(kind, &outcome, repo, &before).await;
    (duration, tokens, failure)
}

fn probe_line(
    name: String,
    profile: &LaunchProfile,
    kind: ProbeKind,
    duration: Duration,
    tokens: Option<u64>,
    failure: Option<ProbeFailure>,
) -> Check {
    let measured = format!(
        "{} probe, {:.1} s, {}",
        kind_word(kind),
        duration.as_secs_f64(),
        tokens.map_or_else(
            || "tokens not reported".to_owned(),
            |t| format!("{t} tokens")
        )
    );
    let mut check = match &failure {
        None => Check::ok(name, measured),
        Some(failure) => Check::fail(name, format!("{measured}: {failure}"), failure.fix()),
    };
    check.probe = Some(ProbeFacts {
        profile: profile.name.clone(),
        kind,
        duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        tokens,
        failure,
    });
    check
}

/// The probe's instructions: short, explicit, and naming absolute paths
/// (some CLIs' file tools want them).
pub fn prompt(kind: ProbeKind, workdir: &Path, repo: &ProbeRepo) -> String {
    let dir = workdir.display();
    match kind {
        ProbeKind::Read => format!(
            "{READ_PROBE_TITLE}\n\
             This is a short health check of the agent setup, not a coding task.\n\
             The repository is at {dir}.\n\
             Read the file {dir}/{MARKER_FILE} and change nothing.\n\
             Then reply with exactly one line: {ANSWER_WORD} followed by a space and the \
             file's contents.\n"
        ),
        ProbeKind::Write => format!(
            "{WRITE_PROBE_TITLE}\n\
             This is a short health check of the agent setup, not a coding task.\n\
             The repository is at {dir}.\n\
             Create the file {dir}/{file} holding the single line {marker}\n\
             Then commit it: git add {file} && git commit -m 'Probe commit'\n\
             Then reply with exactly one line: {ANSWER_WORD} {marker}\n",
            file = repo.written_file(),
            marker = repo.marker,
        ),
    }
}
