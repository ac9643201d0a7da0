//! Every real GitHub webhook example in `tests/fixtures/github/webhooks`
//! classifies without error, the handled ones into the expected run events,
//! and a signature computed by `openssl` (not by our code) verifies.
#![allow(clippy::unwrap_used)]

use autoforge::commands::{Actor, ActorKind};
use autoforge::webhook::{
    Classified, ClassifyContext, DeliveryMeta, IgnoreReason, RepoIssue, RepoPull, SignatureError,
    classify, verify_signature,
};
use autoforge_journal::testing;
use secrecy::SecretString;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const CONTEXT: ClassifyContext<'static> = ClassifyContext {
    trigger_label: "bug",
    app_slug: "autoforge",
    own_login: "autoforge[bot]",
    is_app: true,
};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/github/webhooks")
}

fn fixture(name: &str) -> Value {
    let bytes = std::fs::read(fixture_dir().join(name)).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn classify_value(event: &str, payload: &Value) -> Classified {
    classify(event, &serde_json::to_vec(payload).unwrap(), &CONTEXT).unwrap()
}

fn hello_world(number: u64) -> RepoIssue {
    RepoIssue {
        repository: "Codertocat/Hello-World".to_owned(),
        number: testing::issue(number),
    }
}

fn hello_world_pull(number: u64) -> RepoPull {
    RepoPull {
        repository: "Codertocat/Hello-World".to_owned(),
        number: testing::pull(number),
    }
}

fn codertocat() -> Actor {
    Actor {
        login: "Codertocat".to_owned(),
        kind: ActorKind::User,
    }
}

#[test]
fn every_fixture_classifies_or_is_cleanly_ignored() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 100, "fixtures missing: {}", files.len());
    let mut handled = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let event = name.split('.').next().unwrap();
        let body = std::fs::read(path).unwrap();
        DeliveryMeta::from_body(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
        let observation =
            classify(event, &body, &CONTEXT).unwrap_or_else(|e| panic!("{name}: {e}"));
        if !matches!(observation, Classified::Ignored { .. }) {
            handled += 1;
        }
    }
    // labeled/unlabeled (bug), comments, PR events, checks, installations.
    assert!(handled >= 30, "only {handled} fixtures produced run events");
}

#[test]
fn delivery_meta_reads_the_inbox_columns_from_a_real_payload() {
    let body = std::fs::read(fixture_dir().join("pull_request.closed.3.json")).unwrap();
    let meta = DeliveryMeta::from_body(&body).unwrap();
    assert_eq!(meta.action.as_deref(), Some("closed"));
    assert_eq!(meta.repository.as_deref(), Some("Codertocat/Hello-World"));
    assert_eq!(meta.installation_id, Some(1));
}

#[test]
fn trigger_label_added_names_issue_and_sender() {
    assert_eq!(
        classify_value("issues", &fixture("issues.labeled.9.json")),
        Classified::TriggerLabelAdded {
            issue: hello_world(1),
            issue_open: true,
            sender: codertocat(),
        }
    );
}

#[test]
fn trigger_label_matches_case_insensitively_and_other_labels_are_ignored() {
    let mut payload = fixture("issues.labeled.9.json");
    payload["label"]["name"] = json!("BUG");
    assert!(matches!(
        classify_value("issues", &payload),
        Classified::TriggerLabelAdded { .. }
    ));
    payload["label"]["name"] = json!("enhancement");
    assert_eq!(
        classify_value("issues", &payload),
        Classified::Ignored {
            why: IgnoreReason::OtherLabel
        }
    );
}

#[test]
fn trigger_label_from_a_bot_keeps_the_bot_kind_for_the_operator_check() {
    let mut payload = fixture("issues.labeled.9.json");
    payload["sender"]["login"] = json!("renovate[bot]");
    payload["sender"]["type"] = json!("Bot");
    let Classified::TriggerLabelAdded { sender, .. } = classify_value("issues", &payload) else {
        panic!("label event expected");
    };
    assert_eq!(sender.kind, ActorKind::Bot);
}

#[test]
fn trigger_label_removed_is_reported() {
    assert_eq!(
        classify_value("issues", &fixture("issues.unlabeled.24.json")),
        Classified::TriggerLabelRemoved {
            issue: hello_world(1),
            sender: codertocat(),
        }
    );
}

#[test]
fn issue_closed_reopened_and_edited_are_reported() {
    let mut payload = fixture("issues.reopened.20.json");
    assert_eq!(
        classify_value("issues", &payload),
        Classified::IssueReopened {
            issue: hello_world(payload["issue"]["number"].as_u64().unwrap())
        }
    );
    payload["action"] = json!("closed");
    assert!(matches!(
        classify_value("issues", &payload),
        Classified::IssueClosed { .. }
    ));
    let mut edited = fixture("issues.edited.0.json");
    edited["changes"] = json!({"body": {"from": "old"}});
    assert_eq!(
        classify_value("issues", &edited),
        Classified::IssueEdited {
            issue: hello_world(1),
            title_changed: false,
            body_changed: true,
            editor: codertocat(),
        }
    );
}

#[test]
fn comment_created_carries_id_body_and_author() {
    let payload = fixture("issue_comment.created.0.json");
    assert_eq!(
        classify_value("issue_comment", &payload),
        Classified::CommentCreated {
            issue: hello_world(1),
            on_pull_request: false,
            comment_id: 492_700_400,
            body: payload["comment"]["body"].as_str().unwrap().to_owned(),
            author: codertocat(),
        }
    );
}

#[test]
fn comment_on_a_pull_request_is_marked_as_such() {
    let mut payload = fixture("issue_comment.created.0.json");
    payload["issue"]["pull_request"] = json!({"url": "https://api.github.com/repos/o/r/pulls/1"});
    assert!(matches!(
        classify_value("issue_comment", &payload),
        Classified::CommentCreated {
            on_pull_request: true,
            ..
        }
    ));
}

#[test]
fn comment_edited_carries_old_and_new_body() {
    assert_eq!(
        classify_value("issue_comment", &fixture("issue_comment.edited.7.json")),
        Classified::CommentEdited {
            issue: hello_world(1),
            on_pull_request: false,
            comment_id: 492_700_400,
            old_body: "You are totally right! I'll get this fixed right away.".to_owned(),
            new_body: "You are totally right! I'll get this fixed today.".to_owned(),
            author: codertocat(),
            editor: codertocat(),
        }
    );
}

#[test]
fn comment_edited_by_someone_else_names_the_editor() {
    let mut payload = fixture("issue_comment.edited.7.json");
    payload["sender"]["login"] = json!("maintainer");
    let Classified::CommentEdited { author, editor, .. } =
        classify_value("issue_comment", &payload)
    else {
        panic!("edit expected");
    };
    assert_eq!(author, codertocat());
    assert_eq!(editor.login, "maintainer");
}

#[test]
fn comment_edited_by_a_bot_or_the_app_is_ignored() {
    let mut payload = fixture("issue_comment.edited.7.json");
    payload["sender"]["login"] = json!("autoforge[bot]");
    payload["sender"]["type"] = json!("Bot");
    assert_eq!(
        classify_value("issue_comment", &payload),
        Classified::Ignored {
            why: IgnoreReason::CommentByTheApp
        }
    );
    payload["sender"]["login"] = json!("linter");
    assert_eq!(
        classify_value("issue_comment", &payload),
        Classified::Ignored {
            why: IgnoreReason::CommentByBot {
                login: "linter".to_owned()
            }
        }
    );
}

#[test]
fn comment_edit_without_body_change_is_ignored() {
    let mut payload = fixture("issue_comment.edited.7.json");
    payload["changes"] = json!({});
    assert_eq!(
        classify_value("issue_comment", &payload),
        Classified::Ignored {
            why: IgnoreReason::CommentBodyUnchanged
        }
    );
}

#[test]
fn comments_by_bots_and_by_the_app_are_ignored() {
    let mut payload = fixture("issue_comment.created.0.json");
    payload["comment"]["user"]["login"] = json!("autoforge[bot]");
    payload["comment"]["user"]["type"] = json!("Bot");
    assert_eq!(
        classify_value("issue_comment", &payload),
        Classified::Ignored {
            why: IgnoreReason::CommentByTheApp
        }
    );
    payload["comment"]["user"]["login"] = json!("dependabot[bot]");
    assert_eq!(
        classify_value("issue_comment", &payload),
        Classified::Ignored {
            why: IgnoreReason::CommentByBot {
                login: "dependabot[bot]".to_owned()
            }
        }
    );
    let mut via_app = fixture("issue_comment.created.0.json");
    via_app["comment"]["performed_via_github_app"] = json!({"slug": "autoforge", "id": 1});
    assert_eq!(
        classify_value("issue_comment", &via_app),
        Classified::Ignored {
            why: IgnoreReason::CommentByTheApp
        }
    );
}

#[test]
fn with_a_personal_token_the_tokens_own_comments_are_never_commands() {
    let token_context = ClassifyContext {
        trigger_label: "bug",
        app_slug: "",
        own_login: "ops-robot",
        is_app: false,
    };
    let mut payload = fixture("issue_comment.created.0.json");
    payload["comment"]["user"]["login"] = json!("Ops-Robot");
    payload["comment"]["user"]["type"] = json!("User");
    payload["comment"]["body"] = json!("Finding F1\n/autoforge merge\n");
    let body = serde_json::to_vec(&payload).unwrap();
    assert_eq!(
        classify("issue_comment", &body, &token_context).unwrap(),
        Classified::Ignored {
            why: IgnoreReason::CommentByTheApp
        }
    );
    payload["comment"]["user"]["login"] = json!("a-person");
    let body = serde_json::to_vec(&payload).unwrap();
    assert!(matches!(
        classify("issue_comment", &body, &token_context).unwrap(),
        Classified::CommentCreated { .. }
    ));
}

#[test]
fn pull_request_synchronize_reports_the_new_head() {
    let payload = fixture("pull_request.synchronize.22.json");
    assert_eq!(
        classify_value("pull_request", &payload),
        Classified::PrSynchronize {
            pr: hello_world_pull(2),
            head_sha: payload["pull_request"]["head"]["sha"]
                .as_str()
                .unwrap()
                .to_owned(),
            head_ref: "changes".to_owned(),
        }
    );
}

#[test]
fn pull_request_closed_unmerged_drops_the_test_merge_sha() {
    assert_eq!(
        classify_value("pull_request", &fixture("pull_request.closed.3.json")),
        Classified::PrClosed {
            pr: hello_world_pull(2),
            merged: false,
            merge_commit_sha: None,
            head_ref: "changes".to_owned(),
        }
    );
}

#[test]
fn pull_request_closed_merged_reports_the_merge_commit() {
    let mut payload = fixture("pull_request.closed.3.json");
    payload["pull_request"]["merged"] = json!(true);
    assert_eq!(
        classify_value("pull_request", &payload),
        Classified::PrClosed {
            pr: hello_world_pull(2),
            merged: true,
            merge_commit_sha: Some("c4295bd74fb0f4fda03689c3df3f2803b658fd85".to_owned()),
            head_ref: "changes".to_owned(),
        }
    );
}

#[test]
fn pull_request_reopened_and_base_change_are_reported() {
    assert_eq!(
        classify_value("pull_request", &fixture("pull_request.reopened.18.json")),
        Classified::PrReopened {
            pr: hello_world_pull(2)
        }
    );
    let mut edited = fixture("pull_request.reopened.18.json");
    edited["action"] = json!("edited");
    edited["changes"] = json!({"title": {"from": "x"}});
    assert_eq!(
        classify_value("pull_request", &edited),
        Classified::Ignored {
            why: IgnoreReason::PrEditWithoutBaseChange
        }
    );
    edited["changes"] = json!({"base": {"ref": {"from": "develop"}, "sha": {"from": "abc"}}});
    assert_eq!(
        classify_value("pull_request", &edited),
        Classified::PrBaseChanged {
            pr: hello_world_pull(2),
            old_base: "develop".to_owned(),
            new_base: "master".to_owned(),
        }
    );
}

#[test]
fn completed_check_run_and_suite_name_head_and_prs() {
    for (event, name) in [
        ("check_run", "check_run.completed.1.json"),
        ("check_suite", "check_suite.completed.0.json"),
    ] {
        // GitHub's examples come from repository hooks; an App's own
        // delivery names its installation.
        let mut payload = fixture(name);
        payload["installation"] = json!({"id": 7, "node_id": "x"});
        assert_eq!(
            classify_value(event, &payload),
            Classified::CheckCompleted {
                repository: "Codertocat/Hello-World".to_owned(),
                head_sha: "ec26c3e57ca3a959ca5aad62de7213c562f8c821".to_owned(),
                pull_requests: vec![autoforge_journal::testing::pull(2)],
            },
            "{name}"
        );
    }
}

#[test]
fn a_finished_check_or_suite_of_our_own_app_is_ignored() {
    for (event, name, key) in [
        ("check_run", "check_run.completed.1.json", "check_run"),
        ("check_suite", "check_suite.completed.0.json", "check_suite"),
    ] {
        let mut payload = fixture(name);
        payload["installation"] = json!({"id": 7, "node_id": "x"});
        payload[key]["app"]["slug"] = json!(CONTEXT.app_slug);
        assert_eq!(
            classify_value(event, &payload),
            Classified::Ignored {
                why: IgnoreReason::OwnCheck
            },
            "{name}"
        );
    }
}

#[test]
fn with_an_app_a_finished_check_naming_no_installation_is_ignored() {
    for (event, name) in [
        ("check_run", "check_run.completed.1.json"),
        ("check_suite", "check_suite.completed.0.json"),
    ] {
        assert_eq!(
            classify_value(event, &fixture(name)),
            Classified::Ignored {
                why: IgnoreReason::NoInstallation {
                    event: event.to_owned()
                }
            },
            "{name}"
        );
    }
}

#[test]
fn with_a_token_a_finished_check_from_a_repository_hook_is_used() {
    let token_context = ClassifyContext {
        is_app: false,
        ..CONTEXT
    };
    let body = std::fs::read(fixture_dir().join("check_suite.completed.0.json")).unwrap();
    assert!(matches!(
        classify("check_suite", &body, &token_context).unwrap(),
        Classified::CheckCompleted { .. }
    ));
}

#[test]
fn a_finished_check_of_no_pull_request_is_ignored() {
    // GitHub's example of a suite on a commit no pull request has.
    let mut payload = fixture("check_suite.completed.1.json");
    assert_eq!(payload["check_suite"]["pull_requests"], json!([]));
    payload["installation"] = json!({"id": 7, "node_id": "x"});
    assert_eq!(
        classify_value("check_suite", &payload),
        Classified::Ignored {
            why: IgnoreReason::CheckWithoutPullRequest
        }
    );
}

#[test]
fn installation_changes_list_repositories() {
    assert_eq!(
        classify_value("installation", &fixture("installation.created.1.json")),
        Classified::InstallationChanged {
            installation_id: 957_387,
            action: "created".to_owned(),
            repositories_added: vec!["Codertocat/Hello-World".to_owned()],
            repositories_removed: vec![],
        }
    );
    assert_eq!(
        classify_value(
            "installation_repositories",
            &fixture("installation_repositories.removed.2.json")
        ),
        Classified::InstallationChanged {
            installation_id: 2,
            action: "removed".to_owned(),
            repositories_added: vec![],
            repositories_removed: vec!["octocat/Hello-World".to_owned()],
        }
    );
}

#[test]
fn unused_events_and_actions_are_ignored_with_a_reason() {
    assert_eq!(
        classify_value("push", &fixture("push.event.0.json")),
        Classified::Ignored {
            why: IgnoreReason::UnhandledEvent {
                event: "push".to_owned()
            }
        }
    );
    assert_eq!(
        classify_value("issues", &fixture("issues.opened.15.json")),
        Classified::Ignored {
            why: IgnoreReason::UnhandledAction {
                event: "issues".to_owned(),
                action: "opened".to_owned()
            }
        }
    );
    assert_eq!(
        classify_value("ping", &fixture("ping.event.0.json")),
        Classified::Ignored {
            why: IgnoreReason::Ping
        }
    );
}

#[test]
fn handled_action_with_a_missing_field_is_a_clear_error() {
    let mut payload = fixture("issue_comment.created.0.json");
    payload["comment"].as_object_mut().unwrap().remove("id");
    let error = classify(
        "issue_comment",
        &serde_json::to_vec(&payload).unwrap(),
        &CONTEXT,
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("issue_comment.created"), "{message}");
    assert!(message.contains("missing field `id`"), "{message}");
}

#[test]
fn body_that_is_not_json_is_an_error_not_a_panic() {
    assert!(classify("issues", b"\xff not json", &CONTEXT).is_err());
}

/// The signature comes from the `openssl` binary, independent of our HMAC code.
fn openssl_signature(secret: &str, body_path: &Path) -> String {
    let output = Command::new("openssl")
        .args(["dgst", "-sha256", "-hmac", secret, "-r"])
        .arg(body_path)
        .output()
        .expect("openssl must be installed to run this test");
    assert!(output.status.success(), "openssl failed: {output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let digest = stdout.split_whitespace().next().unwrap();
    format!("sha256={digest}")
}

#[test]
fn signature_computed_by_openssl_over_a_real_payload_is_accepted() {
    let path = fixture_dir().join("issue_comment.created.0.json");
    let body = std::fs::read(&path).unwrap();
    let header = openssl_signature("it's a secret", &path);
    let secret = SecretString::from("it's a secret".to_owned());
    assert_eq!(verify_signature(&secret, &body, Some(&header)), Ok(()));

    let mut tampered = body.clone();
    tampered.push(b'\n');
    assert_eq!(
        verify_signature(&secret, &tampered, Some(&header)),
        Err(SignatureError::Mismatch)
    );
    let wrong = SecretString::from("another secret".to_owned());
    assert_eq!(
        verify_signature(&wrong, &body, Some(&header)),
        Err(SignatureError::Mismatch)
    );
}

#[test]
fn a_submitted_or_dismissed_review_names_its_pull_request_and_head() {
    for name in [
        "pull_request_review.submitted.0.json",
        "pull_request_review.dismissed.1.json",
    ] {
        let payload = fixture(name);
        let head = payload["pull_request"]["head"]["sha"].as_str().unwrap();
        let number = payload["pull_request"]["number"].as_u64().unwrap();
        let repository = payload["repository"]["full_name"].as_str().unwrap();
        assert_eq!(
            classify_value("pull_request_review", &payload),
            Classified::PrReviewed {
                pr: RepoPull {
                    repository: repository.to_owned(),
                    number: testing::pull(number),
                },
                head_sha: head.to_owned(),
                changes_requested: None,
            },
            "{name}"
        );
    }
}
