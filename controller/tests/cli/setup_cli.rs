//! `autoforge setup`, run as the real binary against fakehub's App manifest
//! flow and driven in real headless Chromium: the person opens the local
//! page, presses its button, confirms on GitHub's page, and the App exists
//! with exactly the permissions and events the code uses, its key and
//! webhook secret are saved owner-only, and those credentials work: doctor,
//! given only the written env file, authenticates as the new App.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use autoforge::github::permissions::{APP_EVENTS, APP_PERMISSIONS};
use autoforge_journal::testing::TestDatabase;
use fakehub::world::UserKind;
use secrecy::ExposeSecret;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_autoforge");

/// Where the browser driver is: `PLAYWRIGHT_CORE_PATH` (as `.ci/run` sets
/// it), else the pinned package the install script puts in its cache
/// outside the repository (installed on first use, like the agent CLIs).
fn playwright_core() -> PathBuf {
    let path = match std::env::var_os("PLAYWRIGHT_CORE_PATH") {
        Some(path) => PathBuf::from(path),
        None => {
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-browser-tools.sh");
            let output = std::process::Command::new("bash")
                .arg(&script)
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{} failed (it needs npm): {}",
                script.display(),
                String::from_utf8_lossy(&output.stderr)
            );
            PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
        }
    };
    assert!(
        path.join("package.json").is_file(),
        "{} holds no playwright-core",
        path.display()
    );
    assert!(
        Path::new("/usr/bin/chromium").is_file() || std::env::var_os("CHROMIUM").is_some(),
        "the browser tests need Debian's chromium (apt-get install chromium) or CHROMIUM=<path>"
    );
    path
}

fn flow_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/browser/setup-flow.cjs")
}

/// Screenshots are kept as test artifacts under the target directory.
fn artifacts(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("artifacts")
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_creates_the_app_in_the_browser_and_saves_credentials_that_authenticate() {
    let playwright = playwright_core();
    let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
    hub.create_user("octo-admin", UserKind::User).unwrap();
    hub.create_user("acme", UserKind::Organization).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("github-app");

    let mut setup = tokio::process::Command::new(BIN)
        .args(["setup", "--org", "acme", "--name", "autoforge acme"])
        .args(["--url", "https://bot.example.test", "--out"])
        .arg(&out)
        .env_clear()
        .env("HOME", dir.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("AUTOFORGE_GITHUB_API_URL", hub.base_url())
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("autoforge setup starts");
    let mut lines = BufReader::new(setup.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("setup prints its page within 30 s")
        .unwrap()
        .expect("a first line");
    let url = first
        .split_whitespace()
        .find(|word| word.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no local URL in {first:?}"))
        .to_owned();

    // A redirect that does not carry this setup's state is refused.
    let forged = reqwest::get(format!("{url}callback?code=abc&state=forged"))
        .await
        .unwrap();
    assert_eq!(forged.status(), 400);

    let shots = artifacts("setup");
    let browser = tokio::process::Command::new("node")
        .arg(flow_script())
        .arg(&url)
        .arg(&shots)
        .env("PLAYWRIGHT_CORE_PATH", &playwright)
        .output()
        .await
        .expect("node runs");
    assert!(
        browser.status.success(),
        "browser flow failed: {}",
        String::from_utf8_lossy(&browser.stderr)
    );
    let pages: Value = serde_json::from_slice(&browser.stdout).unwrap();
    assert_eq!(pages["start"], "Create the autoforge GitHub App");
    assert_eq!(pages["confirm"], "Create GitHub App");
    assert_eq!(pages["done"], "GitHub App created", "{pages:#}");
    for shot in ["1-setup-page.png", "2-github-confirm.png", "3-saved.png"] {
        assert!(
            std::fs::metadata(shots.join(shot)).unwrap().len() > 1000,
            "{shot}"
        );
    }

    let status = tokio::time::timeout(Duration::from_secs(30), setup.wait())
        .await
        .unwrap()
        .unwrap();
    let mut rest = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        rest.push(line);
    }
    let printed = rest.join("\n");
    assert!(status.success(), "setup exited {status:?}: {printed}");

    // The App on GitHub asks for exactly what the code uses.
    let state = hub.state();
    let apps: Vec<&Value> = state["apps"].as_object().unwrap().values().collect();
    assert_eq!(apps.len(), 1);
    let app = apps[0];
    assert_eq!(app["slug"], "autoforge-acme");
    assert_eq!(app["name"], "autoforge acme");
    let wanted: serde_json::Map<String, Value> = APP_PERMISSIONS
        .iter()
        .map(|g| (g.permission.to_owned(), Value::from(g.access.as_str())))
        .collect();
    assert_eq!(app["permissions"], Value::Object(wanted));
    assert_eq!(app["events"], serde_json::json!(APP_EVENTS));
    assert_eq!(app["webhook_url"], "https://bot.example.test/webhook");
    let owner = state["users"][app["owner_id"].to_string()]["login"].clone();
    assert_eq!(owner, "acme");

    // Saved owner-only, the secret being the one GitHub holds.
    for name in ["app.pem", "webhook-secret", "github-app.env"] {
        assert_eq!(mode(&out.join(name)), 0o600, "{name}");
    }
    let secret = std::fs::read_to_string(out.join("webhook-secret")).unwrap();
    assert_eq!(app["webhook_secret"], secret.as_str());
    let env = std::fs::read_to_string(out.join("github-app.env")).unwrap();
    assert!(
        env.contains(&format!("AUTOFORGE_GITHUB_APP_ID={}\n", app["id"])),
        "{env}"
    );
    assert!(
        env.contains(&format!("AUTOFORGE_GITHUB_API_URL={}\n", hub.base_url())),
        "{env}"
    );
    assert!(!printed.contains(&secret), "the secret is never printed");
    assert!(
        printed.contains(&format!(
            "{}/apps/autoforge-acme/installations/new",
            hub.base_url()
        )),
        "{printed}"
    );
    assert!(printed.contains("autoforge serve"), "{printed}");

    // The code worked once: replayed, GitHub no longer knows it.
    let callback = pages["url"].as_str().unwrap();
    let code = callback
        .split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("code="))
        .unwrap();
    let replay = reqwest::Client::new()
        .post(format!(
            "{}/app-manifests/{code}/conversions",
            hub.base_url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(replay.status(), 404);

    // The credentials work: doctor, given only the env file, signs in as the
    // App and finds its permissions and events complete.
    let db = TestDatabase::fresh().await;
    let mut doctor = tokio::process::Command::new(BIN);
    doctor
        .args(["doctor", "--json"])
        .env_clear()
        .env("HOME", dir.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DATABASE_URL", db.url().expose_secret())
        .current_dir(dir.path());
    for line in env.lines() {
        let (key, value) = line.split_once('=').unwrap();
        doctor.env(key, value);
    }
    let output = doctor.output().await.unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    for name in ["github", "github:permissions", "github:events"] {
        let check = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap();
        assert_eq!(check["status"], "ok", "{name}: {report:#}");
    }
}

#[tokio::test]
async fn setup_refuses_to_overwrite_saved_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("github-app");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("app.pem"), "the only copy").unwrap();
    let output = tokio::process::Command::new(BIN)
        .args(["setup", "--out"])
        .arg(&out)
        .env_clear()
        .env("HOME", dir.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(dir.path())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("app.pem") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("app.pem")).unwrap(),
        "the only copy"
    );
}
