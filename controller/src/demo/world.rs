//! Seeds the demo's fake GitHub: an operator who owns a repository holding
//! a tiny shell project with a real test command, a GitHub App installed
//! on it whose webhooks reach the controller, and an EPIC of three small
//! issues (GitHub sub-issues, also listed as a task list in its body).

use std::collections::BTreeMap;

use anyhow::{Context, anyhow};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

/// The operator's login; they own the repository and label the EPIC.
pub const OPERATOR: &str = "demo-operator";
/// The demo repository's name (under the operator's account).
pub const REPOSITORY: &str = "tinytext";
/// The demo App's slug.
pub const APP_SLUG: &str = "autoforge-demo";
/// The validation command of the demo project.
pub const TEST_COMMAND: &str = "sh test.sh";

const README: &str = "# tinytext\n\nSmall POSIX shell text helpers, one per file under `lib/`, \
each with a test under `tests/`. Run every test with `sh test.sh`.\n";

const TEST_RUNNER: &str = r#"#!/bin/sh
# Runs every tests/test_*.sh from the project root; stops at the first failure.
set -eu
cd "$(dirname "$0")"
passed=0
for test in tests/test_*.sh; do
    if ! sh "$test"; then
        echo "FAIL $test"
        exit 1
    fi
    echo "ok   $test"
    passed=$((passed + 1))
done
echo "$passed test files passed"
"#;

const TRIM: &str = r#"# trim TEXT: prints TEXT without leading and trailing blanks.
trim() {
    printf '%s\n' "$1" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//'
}
"#;

const TRIM_TEST: &str = r#". ./lib/trim.sh
[ "$(trim '  two words  ')" = 'two words' ] || { echo "trim: wrong output"; exit 1; }
"#;

const AGENTS_GUIDE: &str = "# Notes for coding agents\n\nOne helper per file in `lib/`, \
named after its function; its test is `tests/test_<name>.sh`. Run `sh test.sh` before committing.\n";

/// The files of the repository's first commit.
pub fn project_files() -> BTreeMap<String, String> {
    [
        ("README.md", README),
        ("AGENTS.md", AGENTS_GUIDE),
        ("test.sh", TEST_RUNNER),
        ("lib/trim.sh", TRIM),
        ("tests/test_trim.sh", TRIM_TEST),
    ]
    .into_iter()
    .map(|(path, text)| (path.to_owned(), text.to_owned()))
    .collect()
}

/// The EPIC's issues, in order: title and the helper it asks for.
const CHILDREN: [(&str, &str, &str); 3] = [
    (
        "Add an `upper` helper",
        "upper",
        "Print the given text in capital letters.",
    ),
    (
        "Add a `words` helper",
        "words",
        "Print how many blank-separated words the given text holds.",
    ),
    (
        "Add a `reverse` helper",
        "reverse",
        "Print the given text with its characters in reverse order.",
    ),
];

/// What `seed` created.
pub struct DemoWorld {
    /// `owner/name` of the repository.
    pub full_name: String,
    pub operator_token: SecretString,
    pub app_id: u64,
    pub app_private_key: SecretString,
    pub epic: u64,
    /// The EPIC's issues in order.
    pub children: Vec<u64>,
}

/// A GitHub App granted exactly what the shipped manifest asks for, owned
/// by `owner` and installed on `repositories` of that account (the demo's
/// one; the bench's many).
pub async fn install_app(
    hub: &fakehub::Handle,
    owner: &str,
    repositories: &[String],
    webhook_url: &str,
    webhook_secret: &SecretString,
) -> anyhow::Result<fakehub::CreatedApp> {
    let app = hub
        .create_app(&fakehub::NewApp {
            slug: APP_SLUG.into(),
            owner: Some(owner.into()),
            webhook_url: Some(webhook_url.to_owned()),
            webhook_secret: Some(webhook_secret.expose_secret().to_owned()),
            // Exactly what the shipped manifest asks for: the demo's App
            // cannot drift from what a real installation grants.
            permissions: crate::github::permissions::APP_PERMISSIONS
                .iter()
                .map(|grant| {
                    (
                        grant.permission.to_owned(),
                        grant.access.as_str().to_owned(),
                    )
                })
                .collect(),
            events: vec![],
        })
        .await
        .map_err(|error| anyhow!("cannot create the GitHub App: {error}"))?;
    hub.install(
        app.id,
        &fakehub::NewInstallation {
            account: owner.into(),
            repositories: repositories.to_vec(),
        },
    )
    .map_err(|error| anyhow!("cannot install the GitHub App: {error}"))?;
    Ok(app)
}

/// Creates the operator, repository, App, installation and issues.
/// `webhook_url` is where the controller will listen.
pub async fn seed(
    hub: &fakehub::Handle,
    webhook_url: &str,
    webhook_secret: &SecretString,
) -> anyhow::Result<DemoWorld> {
    let operator = hub
        .create_user(OPERATOR, fakehub::world::UserKind::User)
        .map_err(|error| anyhow!("cannot create the operator: {error}"))?;
    hub.create_repo(&fakehub::RepoSpec {
        owner: OPERATOR.into(),
        name: REPOSITORY.into(),
        default_branch: "main".into(),
        private: true,
        files: project_files(),
        required_checks: vec![],
    })
    .await
    .map_err(|error| anyhow!("cannot create the repository: {error}"))?;
    let app = install_app(
        hub,
        OPERATOR,
        &[REPOSITORY.to_owned()],
        webhook_url,
        webhook_secret,
    )
    .await?;

    let people = PersonApi::new(hub.base_url(), operator.token.clone());
    let full_name = format!("{OPERATOR}/{REPOSITORY}");
    let mut children = Vec::new();
    let mut child_ids = Vec::new();
    for (title, helper, what) in CHILDREN {
        let body = format!(
            "{what}\n\nHelper name: `{helper}`\n\nAdd `lib/{helper}.sh` and a test in \
             `tests/test_{helper}.sh`; `sh test.sh` must pass."
        );
        let issue = people
            .post(
                &format!("/repos/{full_name}/issues"),
                &json!({"title": title, "body": body}),
            )
            .await?;
        children.push(number_of(&issue, "number")?);
        child_ids.push(number_of(&issue, "id")?);
    }
    let task_list: String = children.iter().map(|n| format!("- [ ] #{n}\n")).collect();
    let epic_body = format!(
        "Grow tinytext by three helpers, one pull request each, in this order:\n\n{task_list}"
    );
    let epic = people
        .post(
            &format!("/repos/{full_name}/issues"),
            &json!({"title": "EPIC: three more text helpers", "body": epic_body, "labels": ["epic"]}),
        )
        .await?;
    let epic = number_of(&epic, "number")?;
    for id in child_ids {
        people
            .post(
                &format!("/repos/{full_name}/issues/{epic}/sub_issues"),
                &json!({ "sub_issue_id": id }),
            )
            .await?;
    }
    Ok(DemoWorld {
        full_name,
        operator_token: operator.token,
        app_id: app.id,
        app_private_key: app.private_key_pem,
        epic,
        children,
    })
}

/// Adds `label` to the EPIC as the operator: GitHub (fakehub) then sends
/// the signed `issues.labeled` webhook that starts the run.
pub async fn label_epic(
    hub: &fakehub::Handle,
    world: &DemoWorld,
    label: &str,
) -> anyhow::Result<()> {
    PersonApi::new(hub.base_url(), world.operator_token.clone())
        .post(
            &format!("/repos/{}/issues/{}/labels", world.full_name, world.epic),
            &json!({ "labels": [label] }),
        )
        .await?;
    Ok(())
}

fn number_of(object: &Value, key: &str) -> anyhow::Result<u64> {
    object[key]
        .as_u64()
        .with_context(|| format!("fakehub answered without a numeric `{key}`: {object}"))
}

/// A person's REST calls to fakehub, with their token.
#[derive(Clone)]
pub struct PersonApi {
    base: String,
    token: SecretString,
    http: reqwest::Client,
}

impl PersonApi {
    pub fn new(base: &str, token: SecretString) -> PersonApi {
        PersonApi {
            base: base.to_owned(),
            token,
            http: reqwest::Client::new(),
        }
    }

    /// POSTs `body` to `path`; the answer's JSON, or an error naming the
    /// status and text of a refusal.
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .header(
                "authorization",
                format!("token {}", self.token.expose_secret()),
            )
            .header("user-agent", "autoforge-demo")
            .json(body)
            .send()
            .await
            .with_context(|| format!("POST {path} to fakehub failed"))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .with_context(|| format!("reading the answer to POST {path}"))?;
        anyhow::ensure!(
            status.is_success(),
            "POST {path}: fakehub answered {status}: {text}"
        );
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}
