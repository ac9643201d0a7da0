//! The dispatcher and the poller in-process, against fakehub and a real
//! Postgres: deliveries are the payloads fakehub generated for real actions,
//! stored into the inbox as ingress would store them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use autoforge::commands::OperatorPolicy;
use autoforge::github::{GitHubAuth, GitHubClient, RepoName, writes};
use autoforge::intake::{Dispatcher, GitHubAccess, MAX_ATTEMPTS, Poller};
use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{
    Delivery, InsertOutcome, IssueNumber, Journal, NewDelivery, RunFilter, RunId,
};
use fakehub::{FaultKind, FaultRule};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

const OWNER: &str = "octo";
const NAME: &str = "widgets";
const SLUG: &str = "autoforge-dispatch";

struct Setup {
    hub: fakehub::Handle,
    db: TestDatabase,
    access: GitHubAccess,
    owner: GitHubClient,
    installation: u64,
}

impl Setup {
    async fn start() -> Setup {
        let db = TestDatabase::fresh().await;
        let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
        let owner = hub
            .create_user(OWNER, fakehub::world::UserKind::User)
            .unwrap();
        hub.create_repo(&fakehub::RepoSpec {
            owner: OWNER.into(),
            name: NAME.into(),
            default_branch: "main".into(),
            private: true,
            files: Default::default(),
            required_checks: vec![],
        })
        .await
        .unwrap();
        // Nobody listens on the discard port: every delivery is recorded as
        // failed, with its payload, which is all these tests need.
        let app = hub
            .create_app(&fakehub::NewApp {
                slug: SLUG.into(),
                owner: Some(OWNER.into()),
                webhook_url: Some("http://127.0.0.1:9/webhook".into()),
                webhook_secret: Some("s".into()),
                permissions: [("issues".to_owned(), "write".to_owned())].into(),
                events: vec![],
            })
            .await
            .unwrap();
        let installation = hub
            .install(
                app.id,
                &fakehub::NewInstallation {
                    account: OWNER.into(),
                    repositories: vec![NAME.into()],
                },
            )
            .unwrap();
        let auth = GitHubAuth::App {
            app_id: app.id,
            private_key_pem: SecretString::from(app.private_key_pem.expose_secret().to_owned()),
        };
        let client = GitHubClient::new(hub.base_url(), auth).unwrap();
        let access = GitHubAccess::from_parts(
            client,
            SLUG.into(),
            OperatorPolicy::default(),
            "autoforge".into(),
            vec![],
            true,
        );
        let owner_client = GitHubClient::new(
            hub.base_url(),
            GitHubAuth::Token(SecretString::from(owner.token.expose_secret().to_owned())),
        )
        .unwrap();
        Setup {
            hub,
            db,
            access,
            owner: owner_client,
            installation,
        }
    }

    fn journal(&self) -> &Journal {
        self.db.journal()
    }

    fn dispatcher(&self) -> Dispatcher {
        Dispatcher {
            journal: self.journal().clone(),
            access: self.access.clone(),
            worker: "test-worker".into(),
            wakeup: std::sync::Arc::new(tokio::sync::Notify::new()),
            notifier: std::sync::Arc::new(autoforge::driver::RunNotifier::default()),
        }
    }

    fn as_user(&self, login: &str, permission: &str) -> autoforge::github::GitHubApi {
        let user = self
            .hub
            .create_user(login, fakehub::world::UserKind::User)
            .unwrap();
        self.hub
            .set_collaborator(OWNER, NAME, login, permission)
            .unwrap();
        GitHubClient::new(
            self.hub.base_url(),
            GitHubAuth::Token(SecretString::from(user.token.expose_secret().to_owned())),
        )
        .unwrap()
        .installation(0)
        .unwrap()
    }

    fn owner_api(&self) -> autoforge::github::GitHubApi {
        self.owner.installation(0).unwrap()
    }

    /// Copies every fakehub delivery of `event.action` not yet in the inbox
    /// into it, as ingress would, and returns the stored rows.
    async fn ingest(&self, event: &str, action: &str) -> Vec<Delivery> {
        let mut stored = Vec::new();
        for delivery in self.hub.deliveries() {
            if delivery.event != event || delivery.action.as_deref() != Some(action) {
                continue;
            }
            let row = NewDelivery {
                delivery_id: delivery.guid.clone(),
                event: delivery.event.clone(),
                action: delivery.action.clone(),
                repository: Some(format!("{OWNER}/{NAME}")),
                installation_id: Some(i64::try_from(self.installation).unwrap()),
                payload: serde_json::to_vec(&delivery.payload).unwrap(),
            };
            if let InsertOutcome::Inserted(_) = self.journal().insert_delivery(&row).await.unwrap()
            {
                stored.push(
                    self.journal()
                        .get_delivery(&delivery.guid)
                        .await
                        .unwrap()
                        .unwrap(),
                );
            }
        }
        stored
    }

    /// Claims due deliveries and dispatches each once.
    async fn dispatch_due(&self) -> Vec<Delivery> {
        let claimed = self
            .journal()
            .claim_deliveries("test-worker", 100, Duration::from_secs(60))
            .await
            .unwrap();
        for delivery in &claimed {
            self.dispatcher().dispatch_one(delivery).await;
        }
        claimed
    }

    async fn run_for(&self, issue: IssueNumber) -> Option<RunId> {
        self.journal()
            .active_run_for_issue(&format!("{OWNER}/{NAME}"), issue)
            .await
            .unwrap()
            .map(|run| run.id)
    }

    async fn labelled_issue_with_run(&self) -> (IssueNumber, RunId) {
        let api = self.owner_api();
        let issue = writes::create_issue(&api, &repo(), "work", "please", &[])
            .await
            .unwrap()
            .number;
        writes::add_labels(&api, &repo(), issue, &["autoforge".to_owned()])
            .await
            .unwrap();
        self.ingest("issues", "labeled").await;
        self.dispatch_due().await;
        let run = self.run_for(issue).await.expect("a run");
        (issue, run)
    }
}

fn repo() -> RepoName {
    RepoName::new(OWNER, NAME).unwrap()
}

fn kinds(events: &[autoforge_journal::RunEvent]) -> Vec<Value> {
    events.iter().map(|e| e.event["kind"].clone()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn dispatching_a_delivery_twice_and_polling_the_same_change_act_once() {
    let setup = Setup::start().await;
    let (_issue, run_id) = setup.labelled_issue_with_run().await;
    let delivery = setup.journal().list_runs(RunFilter::All, 10).await.unwrap();
    assert_eq!(delivery.len(), 1);

    // The same stored delivery handled again (a worker that lost its claim).
    let labeled: Vec<_> = setup
        .hub
        .deliveries()
        .into_iter()
        .filter(|d| d.action.as_deref() == Some("labeled"))
        .collect();
    let row = setup
        .journal()
        .get_delivery(&labeled[0].guid)
        .await
        .unwrap()
        .unwrap();
    assert!(row.processed_at.is_some());
    setup.dispatcher().dispatch_one(&row).await;

    // The poller sees the same labelled issue and the run's issue.
    let mut poller = Poller::new(
        setup.journal().clone(),
        setup.access.clone(),
        Duration::from_secs(60),
    );
    let report = poller.pass().await.unwrap();
    assert_eq!(report.repositories, 1);
    assert_eq!(report.runs, 1);

    let events = setup.journal().list_run_events(run_id).await.unwrap();
    assert_eq!(kinds(&events), ["started"]);
    assert_eq!(
        setup
            .journal()
            .list_runs(RunFilter::All, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edited_comment_runs_only_the_added_commands_as_the_editor() {
    let setup = Setup::start().await;
    let (issue, run_id) = setup.labelled_issue_with_run().await;
    let reader = setup.as_user("rory", "read");
    let comment = writes::create_comment(&reader, &repo(), issue, "/autoforge status")
        .await
        .unwrap();
    setup.ingest("issue_comment", "created").await;
    setup.dispatch_due().await;
    // The owner (an operator) edits the reader's comment and adds a command.
    writes::update_comment(
        &setup.owner_api(),
        &repo(),
        comment.id,
        "/autoforge status\n/autoforge retry",
    )
    .await
    .unwrap();
    setup.ingest("issue_comment", "edited").await;
    setup.dispatch_due().await;

    let decisions = setup
        .journal()
        .list_command_decisions(run_id)
        .await
        .unwrap();
    let summary: Vec<_> = decisions
        .iter()
        .map(|d| (d.actor.as_str(), d.command.as_str(), d.accepted))
        .collect();
    assert_eq!(summary, [("rory", "status", false), (OWNER, "retry", true)]);
    // The reader's refused command is queued for the run to answer; only
    // the operator's added one is a command.
    let events = setup.journal().list_run_events(run_id).await.unwrap();
    assert_eq!(kinds(&events), ["started", "command_refused", "command"]);
    assert_eq!(events[1].event["actor"], "rory");
    assert_eq!(events[2].event["verb"], "retry");
    assert_eq!(events[2].event["actor"], OWNER);
}

#[tokio::test(flavor = "multi_thread")]
async fn comments_written_by_the_app_are_not_commands() {
    let setup = Setup::start().await;
    let (issue, run_id) = setup.labelled_issue_with_run().await;
    let app_api = setup
        .access
        .client
        .installation(setup.installation)
        .unwrap();
    writes::create_comment(&app_api, &repo(), issue, "/autoforge stop")
        .await
        .unwrap();
    let stored = setup.ingest("issue_comment", "created").await;
    assert_eq!(stored.len(), 1);
    setup.dispatch_due().await;
    let row = setup
        .journal()
        .get_delivery(&stored[0].delivery_id)
        .await
        .unwrap()
        .unwrap();
    assert!(row.processed_at.is_some());
    assert!(
        setup
            .journal()
            .list_command_decisions(run_id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        setup.journal().list_run_events(run_id).await.unwrap().len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_personal_token_the_controllers_own_comments_are_not_commands() {
    let setup = Setup::start().await;
    let (issue, run_id) = setup.labelled_issue_with_run().await;
    // The controller authenticates as the owner's personal token: the
    // owner's account is the controller's own, and an admin on the repo.
    let token_access = GitHubAccess::from_parts(
        setup.owner.clone(),
        String::new(),
        OperatorPolicy::default(),
        "autoforge".into(),
        vec![format!("{OWNER}/{NAME}")],
        false,
    )
    .with_own_login(OWNER);
    // A review finding that carried a command line, posted by the controller.
    writes::create_comment(
        &setup.owner_api(),
        &repo(),
        issue,
        "Finding F1: fine.\n/autoforge stop\n",
    )
    .await
    .unwrap();
    setup.ingest("issue_comment", "created").await;
    let claimed = setup
        .journal()
        .claim_deliveries("test-worker", 100, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let dispatcher = Dispatcher {
        access: token_access.clone(),
        ..setup.dispatcher()
    };
    dispatcher.dispatch_one(&claimed[0]).await;
    // The poller reads the same comment and ignores it too.
    Poller::new(
        setup.journal().clone(),
        token_access,
        Duration::from_secs(60),
    )
    .pass()
    .await
    .unwrap();
    assert!(
        setup
            .journal()
            .list_command_decisions(run_id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        kinds(&setup.journal().list_run_events(run_id).await.unwrap()),
        ["started"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn installations_of_owners_outside_the_allow_list_are_not_served() {
    let mut setup = Setup::start().await;
    setup.access = setup
        .access
        .clone()
        .with_allowed_owners(vec!["someone-else".into()]);
    let api = setup.owner_api();
    let issue = writes::create_issue(&api, &repo(), "work", "please", &[])
        .await
        .unwrap()
        .number;
    writes::add_labels(&api, &repo(), issue, &["autoforge".to_owned()])
        .await
        .unwrap();
    let stored = setup.ingest("issues", "labeled").await;
    setup.dispatch_due().await;
    let row = setup
        .journal()
        .get_delivery(&stored[0].delivery_id)
        .await
        .unwrap()
        .unwrap();
    assert!(
        row.processed_at.is_some(),
        "the delivery is settled, not retried"
    );
    assert_eq!(setup.run_for(issue).await, None);
    let mut poller = Poller::new(
        setup.journal().clone(),
        setup.access.clone(),
        Duration::from_secs(60),
    );
    assert_eq!(poller.pass().await.unwrap().repositories, 0);
    assert_eq!(setup.run_for(issue).await, None);

    // Listed (in any case), the owner's labelled issue is served.
    setup.access = setup
        .access
        .clone()
        .with_allowed_owners(vec!["OCTO".into()]);
    let mut poller = Poller::new(
        setup.journal().clone(),
        setup.access.clone(),
        Duration::from_secs(60),
    );
    assert_eq!(poller.pass().await.unwrap().repositories, 1);
    assert!(setup.run_for(issue).await.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_github_outage_is_retried_with_backoff_then_given_up_with_its_error() {
    let setup = Setup::start().await;
    let api = setup.owner_api();
    let issue = writes::create_issue(&api, &repo(), "outage", "", &[])
        .await
        .unwrap()
        .number;
    writes::add_labels(&api, &repo(), issue, &["autoforge".to_owned()])
        .await
        .unwrap();
    setup.hub.set_faults(vec![FaultRule::on(
        "GET",
        "/repos/{owner}/{repo}/issues/{number}/events",
        FaultKind::Status { status: 503 },
    )]);
    let stored = setup.ingest("issues", "labeled").await;
    let guid = stored[0].delivery_id.clone();
    setup.dispatch_due().await;
    let after_first = setup.journal().get_delivery(&guid).await.unwrap().unwrap();
    assert!(after_first.failed_at.is_none());
    assert!(
        after_first.error.as_deref().unwrap().contains("503"),
        "{:?}",
        after_first.error
    );
    assert!(after_first.next_attempt_at > chrono::Utc::now());

    // Later claims of the same delivery (forced due) until the bound.
    let mut row = after_first;
    for _ in 1..MAX_ATTEMPTS {
        row.attempts += 1;
        setup.dispatcher().dispatch_one(&row).await;
    }
    let given_up = setup.journal().get_delivery(&guid).await.unwrap().unwrap();
    assert!(given_up.failed_at.is_some());
    assert!(given_up.error.as_deref().unwrap().contains("503"));
    assert!(setup.run_for(issue).await.is_none());
    let failed = setup.journal().list_failed_deliveries(10).await.unwrap();
    assert_eq!(failed.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_payload_that_cannot_be_read_is_given_up_at_once() {
    let setup = Setup::start().await;
    setup
        .journal()
        .insert_delivery(&NewDelivery {
            delivery_id: "broken-1".into(),
            event: "issues".into(),
            action: Some("labeled".into()),
            repository: None,
            installation_id: None,
            payload: br#"{"action":"labeled","issue":{}}"#.to_vec(),
        })
        .await
        .unwrap();
    setup.dispatch_due().await;
    let row = setup
        .journal()
        .get_delivery("broken-1")
        .await
        .unwrap()
        .unwrap();
    assert!(row.failed_at.is_some());
    assert!(
        row.error.as_deref().unwrap().contains("expected shape"),
        "{:?}",
        row.error
    );
    assert_eq!(row.attempts, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unchanged_labelled_listing_costs_one_conditional_request_per_pass() {
    let setup = Setup::start().await;
    let api = setup.owner_api();
    let reader_labelled = writes::create_issue(&api, &repo(), "refused", "", &[])
        .await
        .unwrap()
        .number;
    let triager = setup.as_user("tia", "triage");
    writes::add_labels(
        &triager,
        &repo(),
        reader_labelled,
        &["autoforge".to_owned()],
    )
    .await
    .unwrap();
    let mut poller = Poller::new(
        setup.journal().clone(),
        setup.access.clone(),
        Duration::from_secs(60),
    );
    poller.pass().await.unwrap();
    let refused = setup
        .journal()
        .list_audit_events_of_kind("trigger_refused", 10)
        .await
        .unwrap();
    assert_eq!(
        refused.len(),
        1,
        "the poller applies the same operator check"
    );
    assert_eq!(refused[0].detail["actor"], "tia");
    // The pass answered the refusal; that comment changed the issue, so
    // the next pass reads the listing once more before it is unchanged.
    let answers = setup
        .journal()
        .answers_on(&repo().to_string(), reader_labelled)
        .await
        .unwrap();
    assert_eq!(answers.len(), 1, "the refused labelling is answered");
    poller.pass().await.unwrap();

    let mark = setup.hub.requests().len();
    poller.pass().await.unwrap();
    let second: Vec<_> = setup.hub.requests().into_iter().skip(mark).collect();
    let listing: Vec<_> = second
        .iter()
        .filter(|r| r.route == "/repos/{owner}/{repo}/issues")
        .collect();
    assert_eq!(listing.len(), 1);
    assert!(listing[0].conditional_hit, "{:?}", listing[0]);
    assert!(
        second
            .iter()
            .all(|r| !r.route.ends_with("/events") && !r.route.ends_with("/permission")),
        "nothing new, so no per-issue reads: {second:?}"
    );
    assert_eq!(
        setup
            .journal()
            .list_audit_events_of_kind("trigger_refused", 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_removed_trigger_label_stops_the_run_once_whether_polled_or_delivered() {
    let setup = Setup::start().await;
    let (issue, run_id) = setup.labelled_issue_with_run().await;
    writes::remove_label(&setup.owner_api(), &repo(), issue, "autoforge")
        .await
        .unwrap();
    let mut poller = Poller::new(
        setup.journal().clone(),
        setup.access.clone(),
        Duration::from_secs(60),
    );
    poller.pass().await.unwrap();
    setup.ingest("issues", "unlabeled").await;
    setup.dispatch_due().await;
    let events = setup.journal().list_run_events(run_id).await.unwrap();
    assert_eq!(kinds(&events), ["started", "trigger_label_removed"]);
    assert_eq!(events[1].source, "poll");
}
