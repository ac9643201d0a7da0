//! The controller's git against fakehub's real smart-HTTP git: the token
//! reaches git through a pipe, never through any process's environment or
//! argv, and whatever an agent plants in the shared mirror (a proxy, push
//! settings, hooks, a filter) does not act on the controller's next fetch,
//! push or `git status`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use autoforge::workspace::{CommitSha, Mirror, Workspaces, Worktree};
use base64::Engine as _;
use fakehub::world::UserKind;
use secrecy::{ExposeSecret, SecretString};
use tempfile::TempDir;

use crate::common::git::git;

const OWNER: &str = "octo";
const NAME: &str = "widgets";

/// A fakehub whose user `octo` owns the private `octo/widgets`.
struct Hub {
    hub: fakehub::Handle,
    token: SecretString,
    head: CommitSha,
    state: TempDir,
    mirror: Mirror,
}

impl Hub {
    async fn start() -> Hub {
        let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
        let owner = hub.create_user(OWNER, UserKind::User).unwrap();
        hub.create_repo(&fakehub::RepoSpec {
            owner: OWNER.into(),
            name: NAME.into(),
            default_branch: "main".into(),
            private: true,
            files: [("README.md".to_owned(), "hello\n".to_owned())].into(),
            required_checks: vec![],
        })
        .await
        .unwrap();
        let head = fakehub::git::rev_parse(&Self::remote_dir(&hub), "refs/heads/main")
            .await
            .unwrap();
        let state = tempfile::tempdir().unwrap();
        let workspaces = Workspaces::open(state.path()).unwrap();
        let mirror = workspaces
            .mirror(OWNER, NAME, &hub.git_url(OWNER, NAME))
            .await
            .unwrap();
        Hub {
            token: owner.token,
            head: CommitSha::parse(&head).unwrap(),
            hub,
            state,
            mirror,
        }
    }

    fn remote_dir(hub: &fakehub::Handle) -> PathBuf {
        fakehub::git::repo_path(&hub.shared().repos_dir, OWNER, NAME)
    }

    /// The remote's refs, as fakehub's bare repository holds them.
    async fn remote_refs(&self) -> std::collections::BTreeMap<String, String> {
        fakehub::git::refs(&Self::remote_dir(&self.hub))
            .await
            .unwrap()
    }

    /// `git push` of `sha` to `ref_name` the way the push effect runs it.
    async fn push(&self, sha: &CommitSha, ref_name: &str) -> std::process::Output {
        let url = self.hub.git_url(OWNER, NAME);
        let refspec = format!("{sha}:{ref_name}");
        let lease = format!("--force-with-lease={ref_name}:");
        let args = [
            OsStr::new("--git-dir"),
            self.mirror.path().as_os_str(),
            OsStr::new("push"),
            OsStr::new("--porcelain"),
            OsStr::new("--no-verify"),
            OsStr::new(&lease),
            OsStr::new(&url),
            OsStr::new(&refspec),
        ];
        self.mirror
            .git()
            .output(self.mirror.path(), &args, Some(&self.token))
            .await
            .unwrap()
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// What a scan of every process on the machine found.
#[derive(Default)]
struct Sightings {
    /// `environ` or `cmdline` entries holding the token, by pid and file.
    leaks: Vec<String>,
    /// Whether a `git remote-http` process was seen: proof the scan looked
    /// while the transfer ran.
    saw_transfer: bool,
}

/// Reads every `/proc/<pid>/{environ,cmdline}` over and over until `stop`.
fn watch_processes(needles: Vec<Vec<u8>>, stop: Arc<AtomicBool>) -> Sightings {
    let mut found = Sightings::default();
    while !stop.load(Ordering::Relaxed) {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().filter(|n| n.parse::<u32>().is_ok()) else {
                continue;
            };
            for file in ["environ", "cmdline"] {
                let Ok(bytes) = std::fs::read(entry.path().join(file)) else {
                    continue;
                };
                if file == "cmdline" && contains(&bytes, b"remote-http") {
                    found.saw_transfer = true;
                }
                if needles.iter().any(|needle| contains(&bytes, needle)) {
                    found.leaks.push(format!("/proc/{pid}/{file}"));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    found
}

/// Runs `work` while another thread watches every process for the token.
async fn watched<T>(token: &SecretString, work: impl Future<Output = T>) -> (T, Sightings) {
    let raw = token.expose_secret().as_bytes().to_vec();
    let basic = base64::engine::general_purpose::STANDARD
        .encode(format!("x-access-token:{}", token.expose_secret()))
        .into_bytes();
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = std::thread::spawn({
        let stop = Arc::clone(&stop);
        move || watch_processes(vec![raw, basic], stop)
    });
    let result = work.await;
    stop.store(true, Ordering::Relaxed);
    (result, watcher.join().unwrap())
}

#[tokio::test]
async fn while_a_fetch_and_a_push_run_no_process_holds_the_token_in_environ_or_argv() {
    let hub = Hub::start().await;
    // Long enough for the watcher to sweep /proc several times per request.
    hub.hub.set_git_latency(Duration::from_millis(400));

    let (fetched, sightings) = watched(
        &hub.token,
        hub.mirror
            .fetch_shas(std::slice::from_ref(&hub.head), Some(&hub.token)),
    )
    .await;
    fetched.unwrap();
    assert!(hub.mirror.has_commit(&hub.head).await.unwrap());
    assert!(
        sightings.saw_transfer,
        "the watcher never saw git's transfer"
    );
    assert!(sightings.leaks.is_empty(), "{:?}", sightings.leaks);

    let (pushed, sightings) =
        watched(&hub.token, hub.push(&hub.head, "refs/heads/autoforge/1")).await;
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    assert!(
        sightings.saw_transfer,
        "the watcher never saw git's transfer"
    );
    assert!(sightings.leaks.is_empty(), "{:?}", sightings.leaks);
    assert_eq!(
        hub.remote_refs().await.get("refs/heads/autoforge/1"),
        Some(&hub.head.to_string())
    );
}

#[tokio::test]
async fn without_the_token_the_private_repository_is_not_served() {
    let hub = Hub::start().await;
    let error = hub
        .mirror
        .fetch_shas(std::slice::from_ref(&hub.head), None)
        .await
        .unwrap_err();
    assert!(!hub.mirror.has_commit(&hub.head).await.unwrap(), "{error}");
}

/// Appends `text` to the mirror's config, as an agent writing through its
/// worktree's common directory could.
fn plant_config(mirror: &Mirror, text: &str) {
    let config = mirror.path().join("config");
    let mut tampered = std::fs::read_to_string(&config).unwrap();
    tampered.push_str(text);
    std::fs::write(&config, tampered).unwrap();
}

/// An executable hook that leaves `marker` behind when it runs.
fn plant_hook(mirror: &Mirror, name: &str, marker: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let hooks = mirror.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join(name);
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Accepts connections on a loopback port and counts them: a planted proxy
/// that would see the token if git used it.
async fn counting_proxy() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::Relaxed);
            drop(socket);
        }
    });
    (port, seen)
}

#[tokio::test]
async fn a_planted_proxy_push_setting_hook_and_filter_do_not_act_on_the_controller() {
    let hub = Hub::start().await;
    hub.mirror
        .fetch_shas(std::slice::from_ref(&hub.head), Some(&hub.token))
        .await
        .unwrap();
    let worktree = Worktree::ensure(&hub.mirror, autoforge_journal::testing::issue(3), &hub.head)
        .await
        .unwrap();
    // An annotated tag only `push.followTags` would carry along.
    git(
        hub.mirror.path(),
        &["tag", "-a", "-m", "planted", "v-planted", hub.head.as_str()],
    );

    let markers = hub.state.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let (proxy_port, proxy_hits) = counting_proxy().await;
    let origin = hub.hub.base_url().to_owned();
    plant_config(
        &hub.mirror,
        &format!(
            "[http]\n\tproxy = http://127.0.0.1:{proxy_port}\n\
             [http \"{origin}/\"]\n\tproxy = http://127.0.0.1:{proxy_port}\n\
             [push]\n\tfollowTags = true\n\
             [filter \"evil\"]\n\tclean = touch '{clean}'; cat\n\tsmudge = touch '{smudge}'; cat\n",
            clean = markers.join("clean").display(),
            smudge = markers.join("smudge").display(),
        ),
    );
    for hook in [
        "pre-push",
        "reference-transaction",
        "post-checkout",
        "post-index-change",
    ] {
        plant_hook(&hub.mirror, hook, &markers.join(hook));
    }
    let info = hub.mirror.path().join("info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(info.join("attributes"), "* filter=evil\n").unwrap();

    // A changed file makes `git status` hash it, which is when a clean
    // filter would run.
    std::fs::write(worktree.path().join("README.md"), "changed\n").unwrap();
    worktree.fingerprint().await.unwrap();
    let other = upstream_commit(&hub).await;
    hub.mirror
        .fetch_shas(std::slice::from_ref(&other), Some(&hub.token))
        .await
        .unwrap();
    let pushed = hub.push(&hub.head, "refs/heads/autoforge/2").await;
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );

    let ran: Vec<_> = std::fs::read_dir(&markers)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(ran.is_empty(), "planted code ran: {ran:?}");
    assert_eq!(
        proxy_hits.load(Ordering::Relaxed),
        0,
        "git used the planted proxy"
    );
    let refs = hub.remote_refs().await;
    assert!(refs.contains_key("refs/heads/autoforge/2"), "{refs:?}");
    assert!(
        !refs.keys().any(|name| name.contains("v-planted")),
        "push.followTags took effect: {refs:?}"
    );
    let config = std::fs::read_to_string(hub.mirror.path().join("config")).unwrap();
    assert!(
        !config.contains("proxy") && !config.contains("evil"),
        "{config}"
    );
    assert!(!hub.mirror.path().join("hooks").exists());
}

/// A new commit on the remote's default branch, made by fakehub itself.
async fn upstream_commit(hub: &Hub) -> CommitSha {
    let dir = Hub::remote_dir(&hub.hub);
    let work = tempfile::tempdir().unwrap();
    git(
        work.path(),
        &["clone", "-q", dir.to_str().unwrap(), "clone"],
    );
    let clone = work.path().join("clone");
    std::fs::write(clone.join("second.txt"), "second\n").unwrap();
    git(&clone, &["add", "second.txt"]);
    git(&clone, &["commit", "-q", "-m", "second"]);
    git(&clone, &["push", "-q", "origin", "HEAD:main"]);
    CommitSha::parse(&git(&clone, &["rev-parse", "HEAD"])).unwrap()
}
