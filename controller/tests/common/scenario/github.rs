//! What a scenario does on fakehub beyond one thread: raw REST calls (the
//! handles in `handles.rs` are built on them), checks reported by an
//! external CI, and people's git pushes.

use std::path::Path;
use std::process::Command;

use reqwest::Method;
use serde_json::{Value, json};

use super::handles::Thread;
use super::{OWNER, Person, REPO, Running};

impl Running {
    /// `GET /repos/octo/widgets{path}` as the owner: the raw JSON, for
    /// what no handle reads.
    pub async fn get(&self, path: &str) -> Value {
        let path = format!("/repos/{OWNER}/{REPO}{path}");
        self.world
            .rest_as(&self.owner, Method::GET, &path, Value::Null)
            .await
    }

    /// `POST /repos/octo/widgets{path}` as the owner.
    pub async fn post(&self, path: &str, body: Value) -> Value {
        let path = format!("/repos/{OWNER}/{REPO}{path}");
        self.world
            .rest_as(&self.owner, Method::POST, &path, body)
            .await
    }

    /// `person` submits a review of `pr` (`event`: `REQUEST_CHANGES`,
    /// `COMMENT`, `APPROVE`) with `body` and inline comments given as
    /// `(path, line, text)`; the review id.
    pub async fn review_as(
        &self,
        person: &Person,
        pr: impl Thread,
        event: &str,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> u64 {
        let path = format!("/repos/{OWNER}/{REPO}/pulls/{}/reviews", pr.number());
        let comments: Vec<Value> = comments
            .iter()
            .map(|(path, line, text)| json!({"path": path, "line": line, "body": text}))
            .collect();
        let body = json!({"event": event, "body": body, "comments": comments});
        let review = self.world.rest_as(person, Method::POST, &path, body).await;
        review["id"].as_u64().expect("review id")
    }

    /// An external CI reports a completed check on `sha`.
    pub fn add_check(&self, sha: &str, name: &str, conclusion: &str) {
        self.world.add_check(sha, name, conclusion);
    }

    /// An external service reports a commit status on `sha`, linking to
    /// `target_url`.
    pub fn add_status(&self, sha: &str, context: &str, state: &str, target_url: &str) {
        self.world
            .hub
            .add_status(&fakehub::control::StatusSpec {
                owner: OWNER.into(),
                repo: REPO.into(),
                sha: sha.into(),
                context: context.into(),
                state: state.into(),
                description: Some(format!("{context} reported {state}")),
                target_url: Some(target_url.into()),
            })
            .expect("fakehub records the status");
    }

    /// How many ref updates git pushes made on GitHub, on any branch
    /// (fakehub's record of pushes; its request log covers the REST API only).
    pub fn git_pushes(&self) -> usize {
        self.world.hub.ref_updates().len()
    }

    /// A person clones the repository, commits `file` on top of `branch`
    /// and pushes it there with git; the new head.
    pub fn human_push(&self, person: &Person, branch: &str, file: &str) -> String {
        let files = [(file.to_owned(), "a person's change\n".to_owned())];
        self.human_commit(person, branch, &files, "A person's change")
    }

    /// A person clones the repository, writes `files` (path, content) on top
    /// of `branch`, commits them as one commit and pushes it there with git;
    /// the new head.
    pub fn human_commit(
        &self,
        person: &Person,
        branch: &str,
        files: &[(String, String)],
        message: &str,
    ) -> String {
        let checkout = tempfile::tempdir().expect("a checkout folder");
        let url = self.world.hub.git_url(OWNER, REPO);
        let header = format!("http.extraHeader=Authorization: token {}", person.token);
        let dir = checkout.path();
        git(
            dir,
            &["-c", &header, "clone", "-q", "--branch", branch, &url, "."],
        );
        for (file, content) in files {
            if let Some(parent) = dir.join(file).parent() {
                std::fs::create_dir_all(parent).expect("the file's folder");
            }
            std::fs::write(dir.join(file), content).expect("write the file");
        }
        git(dir, &["add", "-A"]);
        git(
            dir,
            &[
                "-c",
                "user.name=person",
                "-c",
                "user.email=person@example.invalid",
                "commit",
                "-q",
                "-m",
                message,
            ],
        );
        git(dir, &["-c", &header, "push", "-q", "origin", branch]);
        let out = Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(dir)
            .output()
            .expect("git rev-parse");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }
}

impl Running {
    /// A person starts `branch` from the default branch with one commit
    /// adding `file`, pushed with git; the branch's head.
    pub fn human_branch(&self, person: &Person, branch: &str, file: &str) -> String {
        let checkout = tempfile::tempdir().expect("a checkout folder");
        let url = self.world.hub.git_url(OWNER, REPO);
        let header = format!("http.extraHeader=Authorization: token {}", person.token);
        let dir = checkout.path();
        git(dir, &["-c", &header, "clone", "-q", &url, "."]);
        git(dir, &["checkout", "-q", "-b", branch]);
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("the file's folder");
        std::fs::write(&path, "a person's change\n").expect("write the file");
        git(dir, &["add", file]);
        git(
            dir,
            &[
                "-c",
                "user.name=person",
                "-c",
                "user.email=person@example.invalid",
                "commit",
                "-q",
                "-m",
                "A person's earlier work",
            ],
        );
        git(dir, &["-c", &header, "push", "-q", "origin", branch]);
        let out = Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(dir)
            .output()
            .expect("git rev-parse");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// The head of `branch` as fakehub serves it over git, `None` when the
    /// branch does not exist.
    pub fn branch_head(&self, branch: &str) -> Option<String> {
        let url = self.world.hub.git_url(OWNER, REPO);
        let header = format!("http.extraHeader=Authorization: token {}", self.owner.token);
        let wanted = format!("refs/heads/{branch}");
        let out = Command::new("git")
            .args(["-c", &header, "ls-remote", &url, &wanted])
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .expect("git ls-remote");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .find_map(|line| {
                let (sha, name) = line.split_once('\t')?;
                (name == wanted).then(|| sha.to_owned())
            })
    }

    /// How many times a git push created or moved `branch` (fakehub's
    /// record of ref updates; its request log covers the REST API only).
    pub fn pushes_to(&self, branch: &str) -> usize {
        let name = format!("refs/heads/{branch}");
        self.world
            .hub
            .ref_updates()
            .iter()
            .filter(|update| update.name == name)
            .count()
    }

    /// The owner removes the trigger label.
    pub async fn operator_unlabels(&self, issue: impl Thread) {
        let issue = issue.number();
        let path = format!("/repos/{OWNER}/{REPO}/issues/{issue}/labels/autoforge");
        self.world
            .rest_as(&self.owner, Method::DELETE, &path, Value::Null)
            .await;
    }

    /// `person` (operator or not) adds the trigger label.
    pub async fn labels_as(&self, person: &Person, issue: impl Thread) {
        self.world
            .add_label(person, issue.number(), "autoforge")
            .await;
    }

    /// `person` (operator or not) removes the trigger label.
    pub async fn unlabels_as(&self, person: &Person, issue: impl Thread) {
        let issue = issue.number();
        let path = format!("/repos/{OWNER}/{REPO}/issues/{issue}/labels/autoforge");
        self.world
            .rest_as(person, Method::DELETE, &path, Value::Null)
            .await;
    }
}

/// Runs git in `dir`; panics with its output unless it succeeds.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {:?}: {}",
        args.first(),
        String::from_utf8_lossy(&out.stderr)
    );
}
