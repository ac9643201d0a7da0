//! Secrets never leak (SPEC §17): the chaos workload (with kills of serve,
//! agents and Postgres) and the demo run with recognisable secrets, and
//! every byte they wrote is searched for each secret in its raw, base64
//! and URL-encoded forms:
//! serve's logs, every journal table (a `pg_dump` of the data), every file
//! of the state directory (mirrors, worktrees, launch logs with their
//! prompts and read-context folders), what the agents saw (their prompts,
//! context folders and environments, saved by `recorded.sh`), fakehub's
//! objects and the git history of every branch, the dashboard pages and
//! `/metrics`. The scan proves it can fail: it plants secrets in four of
//! those places afterwards and must find each one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use base64::Engine as _;
use secrecy::ExposeSecret;
use serde_json::Value;

use crate::common::World;
use crate::common::chaos::{Killer, Mirror, Workload, WorkloadOptions, seed_from_env};

/// The agent vendor key serve hands its agents through `env_inherit`.
const AGENT_KEY_VAR: &str = "ANTHROPIC_API_KEY";

/// One secret and the forms it may take on the way out.
struct Secret {
    name: String,
    forms: Vec<Vec<u8>>,
}

impl Secret {
    /// `value` as it is, in base64 (standard and URL-safe) and URL-encoded.
    fn new(name: &str, value: &str) -> Secret {
        let b64 = base64::engine::general_purpose::STANDARD;
        let b64url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut forms = vec![
            value.as_bytes().to_vec(),
            b64.encode(value).into_bytes(),
            b64url.encode(value).into_bytes(),
            url_encode(value).into_bytes(),
        ];
        forms.sort();
        forms.dedup();
        Secret {
            name: name.to_owned(),
            forms,
        }
    }

    /// An installation token, also as git's basic credential carries it.
    fn token(name: &str, token: &str) -> Secret {
        let mut secret = Secret::new(name, token);
        let basic =
            base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"));
        secret.forms.push(basic.into_bytes());
        secret
    }

    /// A PEM key: every line of its body, each long enough to be its own.
    fn pem(name: &str, pem: &str) -> Secret {
        let forms = pem
            .lines()
            .filter(|l| !l.starts_with("-----") && l.len() >= 40)
            .map(|l| l.as_bytes().to_vec())
            .collect();
        Secret {
            name: name.to_owned(),
            forms,
        }
    }
}

fn url_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Everything scanned: a place's name and its bytes.
type Places = Vec<(String, Vec<u8>)>;

/// Every `(place, secret)` where a form of the secret appears.
fn findings(places: &Places, secrets: &[Secret]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for secret in secrets {
        let escaped: Vec<String> = secret
            .forms
            .iter()
            .map(|f| regex::escape(&String::from_utf8_lossy(f)))
            .collect();
        let any = regex::bytes::Regex::new(&escaped.join("|")).expect("a regex of the forms");
        for (place, bytes) in places {
            if any.is_match(bytes) {
                found.push((place.clone(), secret.name.clone()));
            }
        }
    }
    found
}

/// Every regular file below `dir` but those `skip` names.
fn files_below(dir: &Path, label: &str, skip: &dyn Fn(&Path) -> bool, places: &mut Places) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            files_below(&path, label, skip, places);
        } else if kind.is_file()
            && !skip(&path)
            && let Ok(bytes) = std::fs::read(&path)
        {
            places.push((format!("{label}:{}", path.display()), bytes));
        }
    }
}

/// The journal's data: `pg_dump --data-only` of the test database, the
/// connection given through libpq's variables (never argv).
fn journal_dump(url: &str) -> Vec<u8> {
    let pattern = regex::Regex::new(
        r"^postgres(?:ql)?://([^:@/]+)(?::([^@]+))?@([^:/]+)(?::(\d+))?/([^?]+)(?:\?host=(.+))?$",
    )
    .expect("a regex");
    let parts = pattern
        .captures(url)
        .expect("a postgres URL the tests made");
    let host = parts
        .get(6)
        .or(parts.get(3))
        .map(|m| m.as_str())
        .unwrap_or("localhost");
    let output = std::process::Command::new("pg_dump")
        .args(["--data-only", "--no-owner"])
        .env("PGUSER", &parts[1])
        .env("PGPASSWORD", parts.get(2).map_or("", |m| m.as_str()))
        .env("PGHOST", host)
        .env("PGPORT", parts.get(4).map_or("5432", |m| m.as_str()))
        .env("PGDATABASE", &parts[5])
        .output()
        .expect("run pg_dump");
    assert!(
        output.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("COPY public.effects"),
        "the dump holds the journal's tables"
    );
    output.stdout
}

/// The password of a postgres URL, if it has one.
fn password_of(url: &str) -> Option<String> {
    let pattern = regex::Regex::new(r"^postgres(?:ql)?://[^:@/]+:([^@]+)@").expect("a regex");
    pattern.captures(url).map(|c| c[1].to_owned())
}

/// fakehub's objects (its own records of the App's secret and of the
/// tokens it minted left out: they are GitHub's side) and every branch's
/// history with its patches.
async fn fakehub_places(world: &World, places: &mut Places) {
    let mut state = world.hub.state();
    if let Some(map) = state.as_object_mut() {
        map.remove("tokens");
        map.remove("apps");
    }
    places.push(("fakehub objects".into(), state.to_string().into_bytes()));
    for repo in ["widgets", crate::common::chaos::workload::GADGETS] {
        let history = crate::common::off_the_runtime(|| {
            Mirror::of(world, repo).git(&["log", "-p", "--all", "--format=%H%n%B"])
        });
        places.push((format!("git history of {repo}"), history));
    }
}

/// The dashboard's index and run pages, and `/metrics`, read with the
/// dashboard token.
async fn admin_places(world: &World, token: &str, places: &mut Places) {
    let admin = world.admin_url().to_owned();
    let get = |path: String| {
        let http = world.http.clone();
        async move {
            let response = http
                .get(&path)
                .bearer_auth(token)
                .send()
                .await
                .expect("the admin listener");
            let status = response.status();
            assert!(status.is_success(), "{path}: {status}");
            response.bytes().await.expect("a page").to_vec()
        }
    };
    places.push(("dashboard index".into(), get(format!("{admin}/")).await));
    let runs = world
        .db
        .journal()
        .list_runs(autoforge_journal::RunFilter::All, 100)
        .await
        .unwrap();
    for run in runs {
        let page = get(format!("{admin}/runs/{}", run.id)).await;
        places.push((format!("dashboard run {}", run.id), page));
    }
    places.push(("/metrics".into(), get(format!("{admin}/metrics")).await));
}

/// Installation tokens fakehub minted for the App.
fn installation_tokens(world: &World) -> Vec<String> {
    world.hub.state()["tokens"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, grant)| grant.get("Installation").is_some())
        .map(|(token, _)| token.clone())
        .collect()
}

/// Whether `place` may hold `secret`: only the agents' environments hold
/// the agent key (that is how it reaches them).
fn allowed(place: &str, secret: &str) -> bool {
    secret == AGENT_KEY_VAR && place.starts_with("agent evidence:") && place.ends_with(".env")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn secret_the_chaos_workload_writes_no_secret_anywhere() {
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let webhook = format!("whsec-chaos-{unique}");
    let agent_key = format!("sk-ant-api03-chaos-{unique}");
    let dashboard = format!("dash-chaos-{unique}");
    let options = WorkloadOptions {
        env: vec![
            (AGENT_KEY_VAR.to_owned(), agent_key.clone()),
            ("AUTOFORGE_DASHBOARD_TOKEN".to_owned(), dashboard.clone()),
        ],
        webhook_secret: Some(webhook.clone()),
        profile_extra: format!("env_inherit = [\"{AGENT_KEY_VAR}\"]\n"),
        database_password: Some(format!("pgpass-chaos-{unique}")),
        ..WorkloadOptions::default()
    };
    let killer = Killer::new(seed_from_env(), 4, true).with_postgres_kills();
    let mut workload = Workload::start(Some(killer), options).await;
    workload.drive().await;
    let world = &workload.world;

    // serve's own URL: the cluster's password, or the one the test added.
    let spelled = crate::common::WorldOptions {
        database_password: workload.options.database_password.clone(),
        ..crate::common::WorldOptions::default()
    };
    let db_url = crate::common::database_url(&world.db, &spelled);
    let db_password = password_of(&db_url).expect("a database password");
    let mut secrets = vec![
        Secret::pem("the App's private key", world.app_key().expose_secret()),
        Secret::new("the webhook secret", &webhook),
        Secret::new("the database password", &db_password),
        Secret::new(AGENT_KEY_VAR, &agent_key),
        Secret::new("the dashboard token", &dashboard),
    ];
    let tokens = installation_tokens(world);
    assert!(!tokens.is_empty(), "serve used installation tokens");
    for token in &tokens {
        secrets.push(Secret::token("an installation token", token));
    }

    let places = every_place(&workload, &db_url, &dashboard).await;
    let envs = places
        .iter()
        .filter(|(p, _)| p.starts_with("agent evidence:") && p.ends_with(".env"))
        .count();
    assert!(envs >= 4, "every agent's environment was saved ({envs})");
    let prompts = places
        .iter()
        .filter(|(p, _)| p.ends_with(".prompt"))
        .count();
    assert!(prompts >= 4, "every agent's prompt was saved ({prompts})");
    let found = findings(&places, &secrets);
    assert!(
        found.iter().any(|(p, s)| allowed(p, s)),
        "the agent key reached the agents (the scan reads their environments)"
    );
    let leaks: Vec<&(String, String)> = found.iter().filter(|(p, s)| !allowed(p, s)).collect();
    assert!(
        leaks.is_empty(),
        "secrets found in {leaks:#?} among {} places",
        places.len()
    );

    // The scan can fail: a secret planted in four kinds of place is found.
    let planted = [
        tokens[0].as_str(),
        webhook.as_str(),
        db_password.as_str(),
        agent_key.as_str(),
    ];
    planted_secrets_are_found(&workload, &secrets, planted).await;
}

/// Every place the chaos workload wrote to: serve's log, the journal, the
/// state directory, the agents' evidence, fakehub and the admin pages.
async fn every_place(workload: &Workload, db_url: &str, dashboard: &str) -> Places {
    let world = &workload.world;
    let mut places: Places = Vec::new();
    places.push((
        "serve's log".into(),
        std::fs::read(workload.serve_log()).unwrap(),
    ));
    places.push(("journal tables".into(), journal_dump(db_url)));
    let state = world.state_dir().to_owned();
    // The key file is where the App's key is kept, not a leak.
    let key = state.join("app.pem");
    files_below(&state, "state dir", &|p| p == key, &mut places);
    let evidence = workload.evidence.path().to_owned();
    let log = workload.serve_log();
    files_below(&evidence, "agent evidence", &|p| p == log, &mut places);
    fakehub_places(world, &mut places).await;
    admin_places(world, dashboard, &mut places).await;
    places
}

/// Plants an installation token (base64, in a comment on fakehub), the
/// webhook secret (URL-encoded, in a state-dir file), the database
/// password (in serve's log) and the agent key (in a prompt), and
/// requires the scan to find each where it was planted.
async fn planted_secrets_are_found(
    workload: &Workload,
    secrets: &[Secret],
    [token, webhook, db_password, agent_key]: [&str; 4],
) {
    let world = &workload.world;
    let b64 = base64::engine::general_purpose::STANDARD.encode(token);
    world
        .comment(&world.owner(), 1, &format!("leaked {b64}"))
        .await;
    let state = world.state_dir().to_owned();
    std::fs::write(state.join("planted.txt"), url_encode(webhook)).unwrap();
    let mut log_text = std::fs::read(workload.serve_log()).unwrap();
    log_text.extend_from_slice(db_password.as_bytes());
    let mut planted: Places = vec![("serve's log".into(), log_text)];
    let key = state.join("app.pem");
    files_below(&state, "state dir", &|p| p == key, &mut planted);
    fakehub_places(world, &mut planted).await;
    planted.push((
        "agent evidence:planted.prompt".into(),
        agent_key.as_bytes().to_vec(),
    ));
    let planted_found: Vec<(String, String)> = findings(&planted, secrets)
        .into_iter()
        .filter(|(p, s)| !allowed(p, s))
        .collect();
    for (place, secret) in [
        ("fakehub objects", "an installation token"),
        ("state dir:", "the webhook secret"),
        ("serve's log", "the database password"),
        ("agent evidence:planted.prompt", AGENT_KEY_VAR),
    ] {
        assert!(
            planted_found
                .iter()
                .any(|(p, s)| p.starts_with(place) && s == secret),
            "the planted {secret} in {place} was found: {planted_found:?}"
        );
    }
}

/// `autoforge demo` with a state directory the test reads afterwards:
/// its own fakehub tokens (`ghs_`/`ghp_` shapes), webhook secret
/// (`demo-` and 32 hex), App key and managed Postgres password appear in
/// nothing it wrote but the files that keep them.
#[test]
fn secret_the_demo_writes_no_secret_outside_the_files_that_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    // The managed cluster's server runs as `postgres` when the tests run as
    // root: it must be able to pass through the scratch directory.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    let state = dir.path().join("state");
    let report = dir.path().join("report.json");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_autoforge"))
        .arg("demo")
        .args(["--state-dir", state.to_str().unwrap()])
        .args(["--report", report.to_str().unwrap(), "--timeout", "300"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .current_dir(dir.path())
        .output()
        .expect("run autoforge demo");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let key = state.join("app.pem");
    let pem = std::fs::read_to_string(&key).expect("the demo's App key");
    let password_file = find_file(&state, "password").expect("the managed cluster's password");
    let password = std::fs::read_to_string(&password_file).unwrap();
    let secrets = vec![
        Secret::pem("the App's private key", &pem),
        Secret::new("the database password", password.trim()),
    ];
    let mut places: Places = vec![
        ("demo stdout".into(), output.stdout.clone()),
        ("demo stderr".into(), output.stderr.clone()),
        ("demo report".into(), std::fs::read(&report).unwrap()),
    ];
    let keep = |p: &Path| p == key || p == password_file;
    files_below(&state, "state dir", &keep, &mut places);
    let leaks = findings(&places, &secrets);
    assert!(leaks.is_empty(), "secrets found in {leaks:#?}");
    // Secrets the demo makes up itself, found by their shape.
    let shaped = regex::bytes::Regex::new(r"gh[sp]_[A-Za-z0-9]{20,}|demo-[0-9a-f]{32}").unwrap();
    let shaped_leaks: Vec<&String> = places
        .iter()
        .filter(|(_, bytes)| shaped.is_match(bytes))
        .map(|(p, _)| p)
        .collect();
    assert!(
        shaped_leaks.is_empty(),
        "token-shaped secrets in {shaped_leaks:#?}"
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["outcome"], "done", "{report:#}");
}

/// The first file called `name` below `dir`.
fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
    }
    None
}
