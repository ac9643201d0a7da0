//! Workspace behaviour against real git: a bare mirror fed from a `file://`
//! upstream, detached per-issue worktrees, fingerprints and clean exports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use autoforge::agents::profile::{LaunchProfile, ProfileSpec};
use autoforge::agents::supervisor::{LaunchExit, LaunchSpec, launch};
use autoforge::machine::AgentPhase;
use autoforge::redact::Redactor;
use autoforge::workspace::{CommitSha, Mirror, WorkspaceError, Workspaces, Worktree};
use base64::Engine as _;
use secrecy::SecretString;
use tempfile::TempDir;

use crate::common;
use common::{Upstream, agent_script, git};

async fn setup() -> (Upstream, TempDir, Workspaces, Mirror) {
    let upstream = Upstream::new();
    let state = tempfile::tempdir().unwrap();
    let workspaces = Workspaces::open(state.path()).unwrap();
    let mirror = workspaces
        .mirror("octo", "widgets", &upstream.url())
        .await
        .unwrap();
    (upstream, state, workspaces, mirror)
}

/// Every file under `dir`, read as bytes.
fn all_files(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            all_files(&path, out);
        } else if meta.is_file() {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn fetching_exact_shas_brings_objects_and_creates_no_refs() {
    let (upstream, _state, _ws, mirror) = setup().await;
    let first = upstream.commit("a.txt", "one\n", "first");
    let second = upstream.commit("a.txt", "two\n", "second");
    assert!(!mirror.has_commit(&first).await.unwrap());

    mirror
        .fetch_shas(std::slice::from_ref(&first), None)
        .await
        .unwrap();
    assert!(mirror.has_commit(&first).await.unwrap());
    assert!(!mirror.has_commit(&second).await.unwrap());
    let refs = git(mirror.path(), &["for-each-ref"]);
    assert_eq!(refs, "", "a fetch created refs");

    let unknown = CommitSha::parse(&"1".repeat(40)).unwrap();
    assert!(mirror.fetch_shas(&[unknown], None).await.is_err());
}

#[tokio::test]
async fn the_token_never_lands_in_the_state_directory() {
    let (upstream, state, _ws, mirror) = setup().await;
    let sha = upstream.commit("a.txt", "one\n", "first");
    let raw = "ghs_thisIsTheInstallationToken0123456789";
    let token = SecretString::from(raw);
    mirror
        .fetch_shas(std::slice::from_ref(&sha), Some(&token))
        .await
        .unwrap();
    let worktree = Worktree::ensure(&mirror, autoforge_journal::testing::issue(7), &sha)
        .await
        .unwrap();
    worktree.fingerprint().await.unwrap();
    let _export = mirror.export(&sha).await.unwrap();

    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{raw}"));
    let mut files = Vec::new();
    all_files(state.path(), &mut files);
    assert!(files.len() > 5, "the state directory looks empty");
    for (path, bytes) in files {
        assert!(!contains(&bytes, raw.as_bytes()), "{}", path.display());
        assert!(!contains(&bytes, encoded.as_bytes()), "{}", path.display());
    }
}

#[tokio::test]
async fn urls_with_credentials_and_unsafe_names_are_refused() {
    let state = tempfile::tempdir().unwrap();
    let ws = Workspaces::open(state.path()).unwrap();
    assert!(matches!(
        ws.mirror("o", "r", "https://x-access-token:t@github.com/o/r.git")
            .await,
        Err(WorkspaceError::UrlHasCredentials)
    ));
    assert!(matches!(
        ws.mirror("..", "r", "https://github.com/o/r.git").await,
        Err(WorkspaceError::InvalidName(_))
    ));
}

#[tokio::test]
async fn the_worktree_is_detached_reused_and_reset_on_request() {
    let (upstream, state, _ws, mirror) = setup().await;
    let first = upstream.commit("a.txt", "one\n", "first");
    let second = upstream.commit("a.txt", "two\n", "second");
    mirror
        .fetch_shas(&[first.clone(), second.clone()], None)
        .await
        .unwrap();

    let wt = Worktree::ensure(&mirror, autoforge_journal::testing::issue(42), &first)
        .await
        .unwrap();
    assert_eq!(
        wt.path(),
        state.path().join("worktrees/octo/widgets/42").as_path()
    );
    assert_eq!(wt.head().await.unwrap(), first);
    let symbolic = StdCommand::new("git")
        .args(["symbolic-ref", "-q", "HEAD"])
        .current_dir(wt.path())
        .status()
        .unwrap();
    assert!(!symbolic.success(), "HEAD is on a branch");
    std::fs::write(wt.path().join("work.txt"), "in progress\n").unwrap();

    let again = Worktree::ensure(&mirror, autoforge_journal::testing::issue(42), &second)
        .await
        .unwrap();
    assert_eq!(again.head().await.unwrap(), first, "reuse moved HEAD");
    assert!(again.path().join("work.txt").exists(), "reuse lost work");

    again.reset_to(&second).await.unwrap();
    assert_eq!(again.head().await.unwrap(), second);
    assert!(!again.path().join("work.txt").exists());
    assert_eq!(
        std::fs::read_to_string(again.path().join("a.txt")).unwrap(),
        "two\n"
    );
}

#[tokio::test]
async fn a_deleted_worktree_directory_is_recreated() {
    let (upstream, _state, _ws, mirror) = setup().await;
    let sha = upstream.commit("a.txt", "one\n", "first");
    mirror
        .fetch_shas(std::slice::from_ref(&sha), None)
        .await
        .unwrap();
    let wt = Worktree::ensure(&mirror, autoforge_journal::testing::issue(1), &sha)
        .await
        .unwrap();
    std::fs::remove_dir_all(wt.path()).unwrap();
    let wt = Worktree::ensure(&mirror, autoforge_journal::testing::issue(1), &sha)
        .await
        .unwrap();
    assert_eq!(wt.head().await.unwrap(), sha);
}

#[tokio::test]
async fn the_fingerprint_moves_with_every_kind_of_change() {
    let (upstream, _state, _ws, mirror) = setup().await;
    let sha = upstream.commit("a.txt", "one\n", "first");
    mirror
        .fetch_shas(std::slice::from_ref(&sha), None)
        .await
        .unwrap();
    let wt = Worktree::ensure(&mirror, autoforge_journal::testing::issue(3), &sha)
        .await
        .unwrap();
    let path = wt.path().to_owned();

    let clean = wt.fingerprint().await.unwrap();
    assert_eq!(clean, wt.fingerprint().await.unwrap(), "reading changed it");
    assert_eq!(clean.head.as_ref(), Some(&sha));

    std::fs::write(path.join("a.txt"), "edited\n").unwrap();
    let edited = wt.fingerprint().await.unwrap();
    assert_ne!(edited, clean);

    std::fs::write(path.join("a.txt"), "edited again\n").unwrap();
    let edited_again = wt.fingerprint().await.unwrap();
    assert_ne!(
        edited_again, edited,
        "second edit of a modified file unseen"
    );

    git(&path, &["add", "a.txt"]);
    let staged = wt.fingerprint().await.unwrap();
    assert_ne!(staged, edited_again);

    git(&path, &["commit", "-q", "-m", "change"]);
    let committed = wt.fingerprint().await.unwrap();
    assert_ne!(committed.head, clean.head);

    std::fs::write(path.join("new.txt"), "untracked\n").unwrap();
    assert_ne!(wt.fingerprint().await.unwrap(), committed);
}

#[tokio::test]
async fn a_reviewer_that_edits_a_file_changes_the_fingerprint() {
    let (upstream, state, _ws, mirror) = setup().await;
    let sha = upstream.commit("README.md", "hello\n", "first");
    mirror
        .fetch_shas(std::slice::from_ref(&sha), None)
        .await
        .unwrap();
    let wt = Worktree::ensure(&mirror, autoforge_journal::testing::issue(9), &sha)
        .await
        .unwrap();
    let before = wt.fingerprint().await.unwrap();

    let script = agent_script("edits_worktree_reviewer.sh");
    let mut profile = LaunchProfile::from_spec(
        "reviewer",
        ProfileSpec {
            command: vec![script],
            idle_timeout_seconds: 60,
            max_runtime_seconds: 60,
            ..ProfileSpec::default()
        },
    )
    .unwrap();
    // The fingerprint is the second line behind the sandbox, which mounts
    // the reviewer's worktree read-only: test it without the first.
    profile.sandbox.mode = autoforge::sandbox::SandboxMode::Off;
    let redactor = Redactor::new();
    let request = LaunchSpec::new(
        &profile,
        AgentPhase::Review,
        "review, read-only",
        wt.path(),
        state.path().join("launches/1"),
        &redactor,
    );
    let outcome = launch(request).await.unwrap();
    assert_eq!(outcome.record.exit, LaunchExit::Exited(0));
    assert!(outcome.result_text().contains("CONTROL_RESULT"));

    let after = wt.fingerprint().await.unwrap();
    assert_eq!(after.head, before.head, "HEAD did not move");
    assert_ne!(after, before, "the edit went unnoticed");
}

#[tokio::test]
async fn ancestry_new_commits_and_messages_come_from_the_mirror() {
    let (upstream, _state, _ws, mirror) = setup().await;
    let base = upstream.commit("a.txt", "1\n", "base");
    let mid = upstream.commit("a.txt", "2\n", "Add two\n\nWith a body.");
    let head = upstream.commit("a.txt", "3\n", "Add three");
    mirror
        .fetch_shas(std::slice::from_ref(&head), None)
        .await
        .unwrap();

    assert!(mirror.is_ancestor(&base, &head).await.unwrap());
    assert!(!mirror.is_ancestor(&head, &base).await.unwrap());
    let unknown = CommitSha::parse(&"2".repeat(40)).unwrap();
    assert!(mirror.is_ancestor(&unknown, &head).await.is_err());

    assert_eq!(
        mirror.new_commits(&base, &head).await.unwrap(),
        vec![mid.clone(), head.clone()]
    );
    let messages = mirror.commit_messages(&base, &head).await.unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].sha, mid);
    assert_eq!(messages[0].message.trim_end(), "Add two\n\nWith a body.");
    assert_eq!(messages[1].message.trim_end(), "Add three");
}

#[tokio::test]
async fn changed_paths_are_everything_the_head_changes_since_its_merge_base_with_the_base() {
    let (upstream, _state, _ws, mirror) = setup().await;
    upstream.commit("a.txt", "1\n", "base");
    let fork = git(&upstream.path, &["rev-parse", "HEAD"]);
    upstream.commit(".github/workflows/old.yml", "on: push\n", "earlier work");
    git(
        &upstream.path,
        &["mv", ".github/workflows/old.yml", "moved.yml"],
    );
    git(&upstream.path, &["commit", "-q", "-m", "move it"]);
    let head = upstream.commit("b.txt", "2\n", "the agent's commit");
    // The default branch moves on elsewhere: its own change is not the head's.
    git(&upstream.path, &["checkout", "-q", "-b", "later", &fork]);
    let base = upstream.commit("main-only.txt", "x\n", "the default branch moved");
    mirror
        .fetch_shas(&[head.clone(), base.clone()], None)
        .await
        .unwrap();

    let mut paths = mirror.changed_paths(&base, &head).await.unwrap();
    paths.sort();

    assert_eq!(
        paths,
        ["b.txt", "moved.yml"],
        "a file added and moved away again on the branch nets out"
    );
}

#[tokio::test]
async fn a_rename_lists_its_old_and_its_new_path() {
    let (upstream, _state, _ws, mirror) = setup().await;
    let base = upstream.commit(".github/workflows/ci.yml", "on: push\n", "base");
    git(
        &upstream.path,
        &["mv", ".github/workflows/ci.yml", "ci.yml"],
    );
    git(
        &upstream.path,
        &["commit", "-q", "-m", "move the workflow out"],
    );
    let head = CommitSha::parse(&git(&upstream.path, &["rev-parse", "HEAD"])).unwrap();
    mirror
        .fetch_shas(std::slice::from_ref(&head), None)
        .await
        .unwrap();

    let mut paths = mirror.changed_paths(&base, &head).await.unwrap();
    paths.sort();

    assert_eq!(paths, [".github/workflows/ci.yml", "ci.yml"]);
}

#[tokio::test]
async fn the_export_holds_the_commit_tree_and_nothing_else() {
    let (upstream, _state, _ws, mirror) = setup().await;
    upstream.commit("src/lib.txt", "library\n", "lib");
    let sha = upstream.commit("run.sh", "#!/bin/sh\necho hi\n", "script");
    git(&upstream.path, &["update-index", "--chmod=+x", "run.sh"]);
    git(&upstream.path, &["commit", "-q", "-m", "exec"]);
    let sha_exec = CommitSha::parse(&git(&upstream.path, &["rev-parse", "HEAD"])).unwrap();
    mirror
        .fetch_shas(&[sha.clone(), sha_exec.clone()], None)
        .await
        .unwrap();
    let wt = Worktree::ensure(&mirror, autoforge_journal::testing::issue(5), &sha_exec)
        .await
        .unwrap();
    std::fs::write(wt.path().join("untracked.txt"), "local only\n").unwrap();
    std::fs::write(wt.path().join("src/lib.txt"), "uncommitted edit\n").unwrap();

    let export = mirror.export(&sha_exec).await.unwrap();
    let root = export.path();
    assert!(!root.join(".git").exists());
    assert!(!root.join("untracked.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("src/lib.txt")).unwrap(),
        "library\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o111, 0, "executable bit lost");
    let kept = export.path().to_owned();
    drop(export);
    assert!(!kept.exists(), "the export outlived its handle");
}

#[tokio::test]
async fn attributes_and_config_planted_through_a_worktree_do_not_affect_exports() {
    let (upstream, state, _ws, mirror) = setup().await;
    let sha = upstream.commit("keep.txt", "kept\n", "first");
    mirror
        .fetch_shas(std::slice::from_ref(&sha), None)
        .await
        .unwrap();
    let marker = state.path().join("filter-ran");
    let config = mirror.path().join("config");
    let mut tampered = std::fs::read_to_string(&config).unwrap();
    tampered.push_str(&format!(
        "[filter \"evil\"]\n\tsmudge = touch {}\n",
        marker.display()
    ));
    std::fs::write(&config, tampered).unwrap();
    std::fs::create_dir_all(mirror.path().join("info")).unwrap();
    std::fs::write(
        mirror.path().join("info/attributes"),
        "* export-ignore filter=evil\n",
    )
    .unwrap();

    let export = mirror.export(&sha).await.unwrap();
    assert!(
        export.path().join("keep.txt").exists(),
        "export-ignore applied"
    );
    Worktree::ensure(&mirror, autoforge_journal::testing::issue(11), &sha)
        .await
        .unwrap();
    assert!(!marker.exists(), "a planted filter ran");
    assert!(!std::fs::read_to_string(&config).unwrap().contains("evil"));
}

/// Every process's argv on this machine, as `ps` would show it.
fn all_command_lines() -> Vec<Vec<u8>> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            entry.file_name().to_str()?.parse::<u32>().ok()?;
            std::fs::read(entry.path().join("cmdline")).ok()
        })
        .collect()
}

#[tokio::test]
async fn over_http_the_token_answers_a_challenge_and_is_in_no_argv() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let raw = "ghs_httpHeaderToken0123456789abcdefXYZ";
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // A minimal server: challenge the first request as GitHub does a
    // private repository, record the retry while git is still connected,
    // look at every process's argv, then refuse.
    let server = tokio::spawn(async move {
        let answers = [
            &b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"GitHub\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"[..],
            &b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"[..],
        ]
        .into_iter();
        let mut last = (String::new(), Vec::new());
        for answer in answers {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !contains(&request, b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
            }
            let argvs = all_command_lines();
            socket.write_all(answer).await.unwrap();
            last = (String::from_utf8_lossy(&request).into_owned(), argvs);
        }
        last
    });

    let state = tempfile::tempdir().unwrap();
    let ws = Workspaces::open(state.path()).unwrap();
    let url = format!("http://127.0.0.1:{port}/octo/widgets.git");
    let mirror = ws.mirror("octo", "widgets", &url).await.unwrap();
    let sha = CommitSha::parse(&"3".repeat(40)).unwrap();
    let token = SecretString::from(raw);
    let error = mirror
        .fetch_shas(std::slice::from_ref(&sha), Some(&token))
        .await
        .unwrap_err();
    assert!(!error.to_string().contains(raw), "{error}");

    let (request, argvs) = server.await.unwrap();
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{raw}"));
    assert!(
        request.contains(&format!("Authorization: Basic {encoded}")),
        "{request}"
    );
    assert!(
        argvs.iter().any(|argv| contains(argv, b"fetch")),
        "git was not running"
    );
    for argv in argvs {
        assert!(!contains(&argv, raw.as_bytes()));
        assert!(!contains(&argv, encoded.as_bytes()));
    }
}

#[tokio::test]
async fn a_worktree_relinked_to_another_repository_is_refused() {
    let (upstream, state, _ws, mirror) = setup().await;
    let sha = upstream.commit("a.txt", "one\n", "first");
    mirror
        .fetch_shas(std::slice::from_ref(&sha), None)
        .await
        .unwrap();
    let wt = Worktree::ensure(&mirror, autoforge_journal::testing::issue(8), &sha)
        .await
        .unwrap();

    let decoy = state.path().join("decoy");
    std::fs::create_dir(&decoy).unwrap();
    git(&decoy, &["init", "-q"]);
    std::fs::write(decoy.join("x"), "x").unwrap();
    git(&decoy, &["add", "x"]);
    git(&decoy, &["commit", "-q", "-m", "decoy"]);
    std::fs::write(
        wt.path().join(".git"),
        format!("gitdir: {}\n", decoy.join(".git").display()),
    )
    .unwrap();

    assert!(matches!(
        wt.head().await,
        Err(WorkspaceError::NotOurWorktree(_))
    ));
    assert!(wt.fingerprint().await.is_err());
    // Ensuring it again replaces the hijacked directory with a real worktree.
    let wt = Worktree::ensure(&mirror, autoforge_journal::testing::issue(8), &sha)
        .await
        .unwrap();
    assert_eq!(wt.head().await.unwrap(), sha);
}

#[tokio::test]
async fn a_committed_export_ignore_does_not_hide_files_from_the_export() {
    // Validation must see the tree that is pushed: a `.gitattributes` the
    // agent commits must not drop its failing tests from the export or
    // rewrite file contents there.
    let (upstream, _state, _ws, mirror) = setup().await;
    upstream.commit("tests/failing.sh", "exit 1\n", "a failing test");
    upstream.commit("stamp.txt", "$Format:%H$\n", "a stamp");
    let sha = upstream.commit(
        ".gitattributes",
        "tests/** export-ignore\nstamp.txt export-subst\n",
        "hide the tests",
    );
    mirror
        .fetch_shas(std::slice::from_ref(&sha), None)
        .await
        .unwrap();
    let export = mirror.export(&sha).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(export.path().join("tests/failing.sh")).unwrap(),
        "exit 1\n"
    );
    assert_eq!(
        std::fs::read_to_string(export.path().join("stamp.txt")).unwrap(),
        "$Format:%H$\n"
    );
    assert!(!export.path().join(".git").exists());
}

#[tokio::test]
async fn a_graft_planted_in_the_mirror_does_not_fake_ancestry_or_hide_commits() {
    let (upstream, _state, _ws, mirror) = setup().await;
    let base = upstream.commit("a.txt", "1\n", "base");
    let hidden = upstream.commit("a.txt", "2\n", "Closes #99");
    let head = upstream.commit("a.txt", "3\n", "innocent");
    mirror
        .fetch_shas(std::slice::from_ref(&head), None)
        .await
        .unwrap();
    // An agent writes through its worktree into the common git directory:
    // `head` claims `base` as its only parent, skipping `hidden`.
    std::fs::create_dir_all(mirror.path().join("info")).unwrap();
    std::fs::write(
        mirror.path().join("info/grafts"),
        format!("{head} {base}\n"),
    )
    .unwrap();
    assert_eq!(
        mirror.new_commits(&base, &head).await.unwrap(),
        vec![hidden.clone(), head.clone()]
    );
    let messages = mirror.commit_messages(&base, &head).await.unwrap();
    assert_eq!(messages.len(), 2);
    std::fs::write(mirror.path().join("info/grafts"), format!("{hidden}\n")).unwrap();
    assert!(mirror.is_ancestor(&base, &head).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runs_of_one_repository_create_its_mirror_and_their_worktrees_at_once() {
    let upstream = Upstream::new();
    let sha = upstream.commit("a.txt", "one\n", "first");
    let state = tempfile::tempdir().unwrap();
    let workspaces = Workspaces::open(state.path()).unwrap();
    // Eight runs of one repository start together in one process: each
    // opens the (absent) mirror, fetches and adds its own worktree.
    let runs: Vec<_> = (1..=8u64)
        .map(|issue| {
            let (workspaces, url, sha) = (workspaces.clone(), upstream.url(), sha.clone());
            tokio::spawn(async move {
                let mirror = workspaces.mirror("octo", "widgets", &url).await?;
                mirror.fetch_shas(std::slice::from_ref(&sha), None).await?;
                Worktree::ensure(&mirror, autoforge_journal::testing::issue(issue), &sha).await
            })
        })
        .collect();
    for run in runs {
        let worktree = run.await.unwrap().unwrap();
        assert_eq!(
            std::fs::read(worktree.path().join("a.txt")).unwrap(),
            b"one\n"
        );
    }
}
