//! octocrab's typed models deserialise fakehub's answers: the calls the
//! controller makes, through octocrab unchanged.

use octocrab::models::reactions::ReactionContent;
use octocrab::params::repos::{Commitish, Reference};
use octocrab::params::{State, pulls::MergeMethod};

use crate::support::{clone, git, world};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn octocrab_typed_calls_deserialise_every_answer() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    clone(&w.hub, "alice", "widgets", &w.alice, &work);
    git(&work, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(work.join("f.txt"), "f\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "add f"]);
    git(&work, &["push", "-q", "origin", "feature"]);
    let head = git(&work, &["rev-parse", "HEAD"]);

    let key = jsonwebtoken::EncodingKey::from_rsa_pem(w.app_key.as_bytes()).unwrap();
    let app = octocrab::Octocrab::builder()
        .base_uri(w.hub.base_url())
        .unwrap()
        .app(w.app_id.into(), key)
        .build()
        .unwrap();
    let me = app.apps().get().await.unwrap();
    assert_eq!(me.slug.as_deref(), Some("autoforge"));
    let gh = app.installation(w.installation_id.into()).unwrap();
    let repo = gh.repos("alice", "widgets");
    let issues = gh.issues("alice", "widgets");
    let pulls = gh.pulls("alice", "widgets");

    let r = repo.get().await.unwrap();
    assert_eq!(r.default_branch.as_deref(), Some("main"));
    let label = issues
        .create_label("autoforge", "b60205", "run me")
        .await
        .unwrap();
    assert_eq!(label.name, "autoforge");
    let issue = issues
        .create("Typed")
        .body("body")
        .labels(vec!["autoforge".to_string()])
        .send()
        .await
        .unwrap();
    assert_eq!(issue.labels.len(), 1);
    let listed = issues
        .list()
        .state(State::All)
        .per_page(50)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    let comment = issues
        .create_comment(issue.number, "/autoforge status")
        .await
        .unwrap();
    let edited = issues
        .update_comment(comment.id, "/autoforge stop")
        .await
        .unwrap();
    assert_eq!(edited.body.as_deref(), Some("/autoforge stop"));
    assert_eq!(issues.get_comment(comment.id).await.unwrap().id, comment.id);
    assert_eq!(
        issues
            .list_comments(issue.number)
            .send()
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    issues
        .create_comment_reaction(comment.id, ReactionContent::Eyes)
        .await
        .unwrap();
    issues
        .create_reaction(issue.number, ReactionContent::Rocket)
        .await
        .unwrap();
    issues
        .add_labels(issue.number, &["epic".to_string()])
        .await
        .unwrap();
    issues.remove_label(issue.number, "epic").await.unwrap();
    assert_eq!(
        issues
            .list_labels_for_issue(issue.number)
            .send()
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let updated = issues
        .update(issue.number)
        .title("Typed!")
        .send()
        .await
        .unwrap();
    assert_eq!(updated.title, "Typed!");

    let branch_ref = repo
        .get_ref(&Reference::Branch("feature".into()))
        .await
        .unwrap();
    assert!(
        matches!(branch_ref.object, octocrab::models::repos::Object::Commit { ref sha, .. } if *sha == head)
    );
    let content = repo
        .get_content()
        .path("README.md")
        .r#ref("main")
        .send()
        .await
        .unwrap();
    assert_eq!(
        content.items[0].decoded_content().as_deref(),
        Some("# widgets\n")
    );
    let cmp = repo
        .compare_commits("main", "feature")
        .send()
        .await
        .unwrap();
    assert_eq!(cmp.ahead_by, 1);
    repo.combined_status_for_ref(&Reference::Branch("main".into()))
        .await
        .unwrap();

    let pr = pulls
        .create("Typed PR", "feature", "main")
        .body("Closes #1")
        .send()
        .await
        .unwrap();
    assert_eq!(pr.head.sha, head);
    let fetched = pulls.get(pr.number).await.unwrap();
    assert_eq!(fetched.number, pr.number);
    assert_eq!(
        pulls
            .list()
            .state(State::Open)
            .head("alice:feature")
            .send()
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(
        pulls.list_files(pr.number).await.unwrap().items[0].filename,
        "f.txt"
    );
    assert_eq!(
        pulls.pr_commits(pr.number).send().await.unwrap().items[0].sha,
        head
    );
    let run = gh
        .checks("alice", "widgets")
        .create_check_run("ci", head.clone())
        .send()
        .await
        .unwrap();
    gh.checks("alice", "widgets")
        .update_check_run(run.id)
        .status(octocrab::params::checks::CheckRunStatus::Completed)
        .conclusion(octocrab::params::checks::CheckRunConclusion::Success)
        .send()
        .await
        .unwrap();
    let runs = gh
        .checks("alice", "widgets")
        .list_check_runs_for_git_ref(Commitish(head.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(runs.total_count, 1);
    let mut merged = None;
    for _ in 0..100 {
        match pulls
            .merge(pr.number)
            .sha(head.clone())
            .method(MergeMethod::Squash)
            .send()
            .await
        {
            Ok(m) => {
                merged = Some(m);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    assert!(merged.unwrap().merged);
    assert!(pulls.is_merged(pr.number).await.unwrap());
    let closed = issues.get(issue.number).await.unwrap();
    assert_eq!(closed.state, octocrab::models::IssueState::Closed);
    gh.ratelimit().get().await.unwrap();
}
