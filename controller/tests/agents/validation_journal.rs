//! Candidate validation with its records in the journal (real Postgres,
//! real git): results are final per commit, recorded as they happen, and a
//! validation interrupted after some commands resumes where it stopped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use autoforge::redact::Redactor;
use autoforge::validation::{
    Candidate, CandidateError, CandidateVerdict, ValidationCommand, ValidationLimits,
    ValidationOutcome, validate_candidate,
};
use autoforge::workspace::{CommitSha, Mirror, Workspaces};
use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{Lease, NewRun, ValidationOutcome as Recorded};

use crate::common;
use common::Upstream;

struct Fixture {
    db: TestDatabase,
    lease: Lease,
    upstream: Upstream,
    state: tempfile::TempDir,
    mirror: Mirror,
}

impl Fixture {
    async fn new() -> Self {
        let db = TestDatabase::fresh().await;
        let run = db
            .journal()
            .create_run(&NewRun {
                repository: "o/r".into(),
                epic: None,
                issue: autoforge_journal::testing::issue(7),
                phase: "IMPLEMENT".into(),
                state: serde_json::json!({}),
            })
            .await
            .unwrap();
        let lease = db
            .journal()
            .acquire_lease_for(run.id, "test", Duration::from_secs(60))
            .await
            .unwrap()
            .expect("lease");
        let upstream = Upstream::bare();
        let state = tempfile::tempdir().unwrap();
        let ws = Workspaces::open(state.path()).unwrap();
        let mirror = ws.mirror("o", "r", &upstream.url()).await.unwrap();
        Self {
            db,
            lease,
            upstream,
            state,
            mirror,
        }
    }

    async fn commit(&self, file: &str, content: &str) -> CommitSha {
        let sha = self.upstream.commit(file, content, "candidate");
        self.mirror
            .fetch_shas(std::slice::from_ref(&sha), None)
            .await
            .unwrap();
        sha
    }

    async fn validate(
        &self,
        sha: &CommitSha,
        commands: &[ValidationCommand],
    ) -> Result<CandidateVerdict, CandidateError> {
        validate_candidate(Candidate {
            journal: self.db.journal(),
            lease: &self.lease,
            mirror: &self.mirror,
            sha,
            commands,
            limits: ValidationLimits {
                // The counting commands leave their marks in the state
                // directory, which the sandbox hides from validation by
                // design: these tests are about the journal, not the view.
                sandbox: autoforge::sandbox::SandboxPolicy::isolated(
                    autoforge::sandbox::SandboxMode::Off,
                ),
                ..ValidationLimits::new(Duration::from_secs(30))
            },
            redactor: &Redactor::new(),
        })
        .await
    }
}

fn shell(line: &str) -> ValidationCommand {
    ValidationCommand::Shell(line.to_owned())
}

#[tokio::test]
async fn every_command_is_recorded_and_a_pass_is_reported() {
    let f = Fixture::new().await;
    let sha = f.commit("ok.txt", "fine\n").await;
    let commands = [shell("test -f ok.txt"), shell("echo second")];

    assert_eq!(
        f.validate(&sha, &commands).await.unwrap(),
        CandidateVerdict::Passed
    );

    let records =
        f.db.journal()
            .list_validations(f.lease.run_id, Some(sha.as_str()))
            .await
            .unwrap();
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r.outcome == Recorded::Pass));
    assert_eq!(records[1].command, "echo second");
    assert!(records[1].output_tail.contains("second"));
}

#[tokio::test]
async fn a_failure_is_final_for_the_commit_and_is_never_run_again() {
    let f = Fixture::new().await;
    let sha = f.commit("a.txt", "a\n").await;
    let marker = f.state.path().join("ran-count");
    let counting_failure = shell(&format!("echo x >> {}; exit 3", marker.display()));
    let commands = [shell("true"), counting_failure, shell("echo never")];

    let first = f.validate(&sha, &commands).await.unwrap();
    assert_eq!(
        first,
        CandidateVerdict::Failed {
            index: 1,
            outcome: ValidationOutcome::Fail
        }
    );
    let again = f.validate(&sha, &commands).await.unwrap();
    assert_eq!(again, first, "the journal answers the second time");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().lines().count(),
        1,
        "the failing command ran exactly once"
    );
    let records =
        f.db.journal()
            .list_validations(f.lease.run_id, Some(sha.as_str()))
            .await
            .unwrap();
    assert_eq!(records.len(), 2, "the command after the failure never ran");
}

#[tokio::test]
async fn an_interrupted_validation_resumes_after_the_last_recorded_command() {
    let f = Fixture::new().await;
    let sha = f.commit("a.txt", "a\n").await;
    let marker = f.state.path().join("first-ran");
    let commands = [
        shell(&format!("echo x >> {}", marker.display())),
        shell("true"),
    ];
    // As if the controller died after recording only the first command.
    f.validate(&sha, &commands[..1]).await.unwrap();

    assert_eq!(
        f.validate(&sha, &commands).await.unwrap(),
        CandidateVerdict::Passed
    );
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().lines().count(),
        1,
        "the recorded command is not run again"
    );
}

#[tokio::test]
async fn records_of_another_command_list_are_refused_not_reused() {
    let f = Fixture::new().await;
    let sha = f.commit("a.txt", "a\n").await;
    f.validate(&sha, &[shell("true")]).await.unwrap();
    let changed = [shell("make test")];
    assert!(matches!(
        f.validate(&sha, &changed).await,
        Err(CandidateError::CommandsChanged { index: 0, .. })
    ));
}

#[tokio::test]
async fn a_stale_lease_cannot_record_validation() {
    let f = Fixture::new().await;
    let sha = f.commit("a.txt", "a\n").await;
    // Someone else takes the run over: our fencing token is now stale.
    f.db.journal().release_lease(&f.lease).await.unwrap();
    f.db.journal()
        .acquire_lease_for(f.lease.run_id, "other", Duration::from_secs(60))
        .await
        .unwrap()
        .expect("takeover");
    assert!(matches!(
        f.validate(&sha, &[shell("true")]).await,
        Err(CandidateError::Journal(_))
    ));
}
