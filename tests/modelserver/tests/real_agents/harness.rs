//! One launch of a real CLI against an in-process modelserver: a scratch
//! directory (outside /tmp: Codex's own sandbox will not set up under it)
//! holding a throw-away git repository, a fresh HOME and TMPDIR, and an
//! empty directory mounted over /tmp for the launch. The CLI runs with an
//! emptied environment inside `unshare --net --mount`, so it has loopback
//! only; `modelserver bridge` carries its model traffic to the server's
//! Unix socket in the scratch directory.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use modelserver::{Handle, Outcome, Script};

/// The model server's address as the CLI sees it, inside its namespace.
pub const INNER_BASE: &str = "http://127.0.0.1:4010";
const INNER_ADDR: &str = "127.0.0.1:4010";
/// A CLI run that takes longer has hung: fail rather than wait.
const LAUNCH_LIMIT: Duration = Duration::from_secs(120);

pub struct Launch {
    _scratch: tempfile::TempDir,
    pub root: PathBuf,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
    /// Mounted over /tmp inside the launch: whatever lands here was left in /tmp.
    pub slash_tmp: PathBuf,
    pub server: Handle,
    initial: BTreeSet<String>,
}

/// What a launch did.
pub struct Ran {
    pub output: Output,
    pub elapsed: Duration,
}

impl Ran {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn assert_success(&self, what: &str) {
        assert!(
            self.output.status.success(),
            "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
            self.output.status,
            self.stdout(),
            String::from_utf8_lossy(&self.output.stderr)
        );
    }
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=autoforge-test",
            "-c",
            "user.email=test@example.invalid",
        ])
        .args(args)
        .current_dir(repo)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("directory is readable")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

impl Launch {
    /// A scratch directory, a repository with one commit, and a started
    /// server (the test loads its scripts).
    pub async fn new() -> Launch {
        let scratch = tempfile::Builder::new()
            .prefix("real-agent-")
            .tempdir_in(scratch_parent())
            .expect("scratch directory");
        let root = scratch.path().to_path_buf();
        let [repo, home, tmp, slash_tmp] =
            ["repo", "home", "tmp", "slash-tmp"].map(|name| root.join(name));
        for dir in [&repo, &home, &tmp, &slash_tmp] {
            std::fs::create_dir(dir).expect("scratch subdirectory");
        }
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README.md"), "A throw-away repository.\n").expect("write");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", "Initial commit"]);
        let server = modelserver::start(modelserver::Config {
            unix_socket: Some(root.join("ms.sock")),
            ..modelserver::Config::default()
        })
        .await
        .expect("modelserver starts");
        let initial = entries(&root);
        Launch {
            _scratch: scratch,
            root,
            repo,
            home,
            tmp,
            slash_tmp,
            server,
            initial,
        }
    }

    pub fn head(&self) -> String {
        git(&self.repo, &["rev-parse", "HEAD"])
    }

    /// HEAD, the status including ignored files, and every path in the
    /// work tree: what a read-only run must leave as it was.
    pub fn fingerprint(&self) -> String {
        let files = git(&self.repo, &["ls-files", "--others", "--cached"]);
        let status = git(&self.repo, &["status", "--porcelain", "--ignored"]);
        format!("{}\n{status}\n{files}", self.head())
    }

    pub fn commit_count(&self) -> usize {
        git(&self.repo, &["rev-list", "--count", "HEAD"])
            .parse()
            .expect("a count")
    }

    /// Runs `cli args` in the repository with exactly `env` (plus HOME,
    /// TMPDIR and PATH) and `stdin` as standard input.
    pub async fn run(
        &self,
        cli: &Path,
        args: &[OsString],
        env: &[(&str, String)],
        stdin: Option<&str>,
    ) -> Ran {
        let mut command = tokio::process::Command::new("unshare");
        if !nix::unistd::geteuid().is_root() {
            // Without root, a user namespace grants the rights for the others.
            command.args(["--user", "--map-root-user"]);
        }
        command
            .args(["--net", "--mount", "--", "sh", "-c"])
            // Loopback comes up inside the new namespace; /tmp is our
            // directory, so anything left there is seen afterwards.
            .arg(r#"mount --bind "$0" /tmp && ip link set lo up && exec "$@""#)
            .arg(&self.slash_tmp)
            .arg(bridge_binary())
            .args(["bridge", "--listen", INNER_ADDR, "--to"])
            .arg(self.root.join("ms.sock"))
            .arg("--")
            .arg(cli)
            .args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let stdin_file = stdin.map(|text| {
            let path = self.root.join("prompt.txt");
            std::fs::write(&path, text).expect("prompt file");
            path
        });
        match &stdin_file {
            Some(path) => command.stdin(std::fs::File::open(path).expect("prompt opens")),
            None => command.stdin(std::process::Stdio::null()),
        };
        let started = Instant::now();
        let child = command.spawn().expect("unshare starts");
        let output = tokio::time::timeout(LAUNCH_LIMIT, child.wait_with_output())
            .await
            .expect("the CLI finished within its limit")
            .expect("the CLI's output is read");
        if let Some(path) = stdin_file {
            std::fs::remove_file(path).expect("prompt file removed");
        }
        Ran {
            output,
            elapsed: started.elapsed(),
        }
    }

    /// Nothing was left in /tmp, nothing new appeared beside the repository,
    /// HOME and TMPDIR, and every request reached a script.
    pub fn assert_clean(&self, cli: &str) {
        self.assert_clean_but(cli, &[]);
    }

    /// [`Launch::assert_clean`], except for the named entries in /tmp that
    /// the CLI is known to create whatever TMPDIR says.
    pub fn assert_clean_but(&self, cli: &str, known_in_tmp: &[&str]) {
        let left: Vec<String> = entries(&self.slash_tmp)
            .into_iter()
            .filter(|e| !known_in_tmp.contains(&e.as_str()))
            .collect();
        assert!(left.is_empty(), "{cli} left in /tmp: {left:?}");
        assert_eq!(
            entries(&self.root),
            self.initial,
            "{cli} wrote beside its TMPDIR"
        );
        for request in self.server.requests() {
            assert!(
                !matches!(
                    request.outcome,
                    Outcome::NoRoute | Outcome::NoScript | Outcome::BadRequest { .. }
                ),
                "{cli} sent a request no script answers: {} {} {:?}",
                request.method,
                request.path,
                request.outcome
            );
        }
    }
}

/// The text between the CONTROL_RESULT markers, parsed.
pub fn control_result(text: &str) -> serde_json::Value {
    let start = text
        .find("<<<CONTROL_RESULT>>>")
        .unwrap_or_else(|| panic!("no CONTROL_RESULT in {text:?}"));
    let body = &text[start + "<<<CONTROL_RESULT>>>".len()..];
    let end = body.find("<<<END_CONTROL_RESULT>>>").expect("end marker");
    serde_json::from_str(body[..end].trim()).expect("CONTROL_RESULT is JSON")
}

/// The final message every writer script ends with: the HEAD its commit
/// printed, taken from the result of the commit step (step 1).
pub fn writer_final() -> &'static str {
    "Committed.\n<<<CONTROL_RESULT>>>\n\
     {\"phase\":\"IMPLEMENT\",\"status\":\"success\",\"head_sha\":\"{{head}}\",\"tests\":[\"none\"]}\n\
     <<<END_CONTROL_RESULT>>>"
}

/// The shell step every writer commits with.
pub const COMMIT: &str = "git add -A && git -c user.name=agent -c user.email=agent@example.invalid \
                          commit -qm 'Add the greeting' && git rev-parse HEAD";

/// Lines every file the writers create holds.
pub const GREETING: &str = "hello from the scripted model\n";

/// Prints how long a launch took (visible with `--nocapture`).
pub fn report(cli: &str, what: &str, ran: &Ran) {
    eprintln!("{cli} {what}: {:.1}s", ran.elapsed.as_secs_f64());
}

pub fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// Usage claimed per step by the writer scripts: different per step, with
/// cache reads, so a CLI that reports only one turn or drops the cache
/// split cannot match the total.
pub fn step_usage(step: u64) -> modelserver::Usage {
    modelserver::Usage {
        input_tokens: 1200 + 300 * step,
        output_tokens: 40 + 15 * step,
        cached_input_tokens: 256,
    }
}

/// Write `file` (a path as the CLI's write tool wants it), commit it, and
/// report the HEAD the commit printed.
pub fn writer_script(name: &str, marker: &str, file: &str) -> Script {
    Script::new(name, marker)
        .write_file(file, GREETING)
        .with_usage(step_usage(0))
        .shell(COMMIT)
        .with_usage(step_usage(1))
        .capture_result("head", 1, r"\b([0-9a-f]{40})\b")
        .final_message(writer_final())
        .with_usage(step_usage(2))
}

/// A reviewer whose model tries to write anyway: a file through the write
/// tool, then a change through the shell; the final message quotes what
/// each tool answered.
pub fn intruder_script(name: &str, marker: &str, file: &str) -> Script {
    Script::new(name, marker)
        .write_file(file, "written by a reviewer\n")
        .shell("echo changed >> README.md; echo x > shell-intruder.txt; git add -A; git commit -qm intrude")
        .capture_result("write", 0, r"(?s)^(.{0,300})")
        .capture_result("shell", 1, r"(?s)^(.{0,300})")
        .final_message("write tool said: {{write}}\nshell tool said: {{shell}}")
}

/// The read-only assertions shared by every CLI: the repository did not
/// move, and the CLI came back to the model after the refusals.
pub fn assert_untouched(launch: &Launch, before: &str, cli: &str, script: &str) {
    assert_eq!(
        launch.fingerprint(),
        before,
        "{cli}'s read-only run changed the repository"
    );
    let finals = launch
        .server
        .requests()
        .into_iter()
        .filter(|r| r.script.as_deref() == Some(script) && r.outcome == Outcome::Final)
        .count();
    assert!(
        finals >= 1,
        "{cli} never came back for the final message after the refusals"
    );
}

/// A writer whose first reply is refused as overloaded and whose second
/// reply's stream breaks midway, each once.
pub fn faulty_script(name: &str, marker: &str, file: &str) -> Script {
    writer_script(name, marker, file)
        .fault(0, modelserver::FaultKind::Overloaded, 1)
        .fault(1, modelserver::FaultKind::CutStream, 1)
}

/// The outcomes the server logged for `script`, in order.
pub fn outcomes(launch: &Launch, script: &str) -> Vec<(Option<usize>, Outcome)> {
    launch
        .server
        .requests()
        .into_iter()
        .filter(|r| r.script.as_deref() == Some(script) && r.outcome != Outcome::Side)
        .map(|r| (r.step, r.outcome))
        .collect()
}

/// Both faults were met and each step was then answered.
pub fn assert_recovered(launch: &Launch, cli: &str) {
    let log = outcomes(launch, "writer");
    let fault = |kind| Outcome::Fault { fault: kind };
    assert_eq!(
        log.first(),
        Some(&(Some(0), fault(modelserver::FaultKind::Overloaded))),
        "{cli}: {log:?}"
    );
    assert!(
        log.contains(&(Some(1), fault(modelserver::FaultKind::CutStream))),
        "{cli}: {log:?}"
    );
    assert_eq!(
        log.last(),
        Some(&(Some(2), Outcome::Final)),
        "{cli}: {log:?}"
    );
}

/// Where scratch directories go: the build's own temporary folder, unless
/// it is under /tmp (a clone in /tmp), which the launch's private /tmp
/// would hide; then a folder outside it.
fn scratch_parent() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if !target.starts_with("/tmp") {
        return target;
    }
    let parent = if nix::unistd::geteuid().is_root() {
        PathBuf::from("/var/lib/autoforge-tests/real-agents")
    } else {
        let home = std::env::var_os("HOME").expect("HOME for the scratch folder");
        PathBuf::from(home).join(".cache/autoforge-tests/real-agents")
    };
    std::fs::create_dir_all(&parent).expect("scratch parent outside /tmp");
    parent
}

/// The model server binary the launch runs as its bridge, at a path the
/// launch's private /tmp does not hide: a copy outside /tmp (made once per
/// process, one fixed name) when the build lives under /tmp.
fn bridge_binary() -> PathBuf {
    static COPY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let built = PathBuf::from(env!("CARGO_BIN_EXE_modelserver"));
    if !built.starts_with("/tmp") {
        return built;
    }
    COPY.get_or_init(|| {
        // One fixed name, replaced by a rename, so runs do not pile up copies.
        let parent = scratch_parent();
        let staging = parent.join(format!(".modelserver-{}", std::process::id()));
        let copy = parent.join("modelserver-bridge");
        std::fs::copy(&built, &staging).expect("copy the model server out of /tmp");
        std::fs::rename(&staging, &copy).expect("put the model server copy in place");
        copy
    })
    .clone()
}
