//! The installation token git gets is minted for the run's repository and
//! `contents: write` only, and fakehub holds it to that: it pushes to its
//! repository, but cannot reach the installation's other repository nor
//! comment on an issue, although the App itself may do both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;

use autoforge::github::{GitHubAuth, GitHubClient, RepoName, writes};
use autoforge::workspace::{CommitSha, Workspaces};
use fakehub::world::{Grant, UserKind};
use secrecy::{ExposeSecret, SecretString};

const OWNER: &str = "octo";
const MINE: &str = "widgets";
const OTHER: &str = "gadgets";

struct Installed {
    hub: fakehub::Handle,
    client: GitHubClient,
    installation: u64,
}

/// `octo/widgets` and `octo/gadgets`, both private, and an App installed on
/// both with contents, issues and pull-request write access.
async fn installed() -> Installed {
    let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
    hub.create_user(OWNER, UserKind::User).unwrap();
    for name in [MINE, OTHER] {
        hub.create_repo(&fakehub::RepoSpec {
            owner: OWNER.into(),
            name: name.into(),
            default_branch: "main".into(),
            private: true,
            files: [("README.md".to_owned(), format!("{name}\n"))].into(),
            required_checks: vec![],
        })
        .await
        .unwrap();
    }
    let app = hub
        .create_app(&fakehub::NewApp {
            slug: "autoforge-creds".into(),
            owner: Some(OWNER.into()),
            webhook_url: None,
            webhook_secret: None,
            permissions: [
                ("contents", "write"),
                ("issues", "write"),
                ("pull_requests", "write"),
                ("metadata", "read"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
            events: vec![],
        })
        .await
        .unwrap();
    let installation = hub
        .install(
            app.id,
            &fakehub::NewInstallation {
                account: OWNER.into(),
                repositories: vec![MINE.into(), OTHER.into()],
            },
        )
        .unwrap();
    let auth = GitHubAuth::App {
        app_id: app.id,
        private_key_pem: SecretString::from(app.private_key_pem.expose_secret().to_owned()),
    };
    let client = GitHubClient::new(hub.base_url(), auth).unwrap();
    Installed {
        hub,
        client,
        installation,
    }
}

fn repo(name: &str) -> RepoName {
    RepoName::new(OWNER, name).unwrap()
}

/// Pushes the head of `name`'s default branch back to it as
/// `refs/heads/autoforge/1`, through a mirror, with `token`.
async fn push_as(hub: &fakehub::Handle, name: &str, token: &SecretString) -> std::process::Output {
    let remote = fakehub::git::repo_path(&hub.shared().repos_dir, OWNER, name);
    let head = fakehub::git::rev_parse(&remote, "refs/heads/main")
        .await
        .unwrap();
    let head = CommitSha::parse(&head).unwrap();
    let state = tempfile::tempdir().unwrap();
    let workspaces = Workspaces::open(state.path()).unwrap();
    let url = hub.git_url(OWNER, name);
    let mirror = workspaces.mirror(OWNER, name, &url).await.unwrap();
    // Fetching needs only read access; a token that cannot see the
    // repository fails here already.
    if let Err(error) = mirror
        .fetch_shas(std::slice::from_ref(&head), Some(token))
        .await
    {
        return std::process::Output {
            status: std::os::unix::process::ExitStatusExt::from_raw(1 << 8),
            stdout: Vec::new(),
            stderr: error.to_string().into_bytes(),
        };
    }
    let refspec = format!("{head}:refs/heads/autoforge/1");
    let args = [
        OsStr::new("--git-dir"),
        mirror.path().as_os_str(),
        OsStr::new("push"),
        OsStr::new("--porcelain"),
        OsStr::new(&url),
        OsStr::new(&refspec),
    ];
    mirror
        .git()
        .output(mirror.path(), &args, Some(token))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_git_token_is_minted_for_one_repository_with_contents_write_only() {
    let setup = installed().await;
    let api = setup.client.installation(setup.installation).unwrap();
    let token = api.git_credential(&repo(MINE)).await.unwrap();

    let grant = setup
        .hub
        .shared()
        .lock()
        .tokens
        .get(token.expose_secret())
        .cloned()
        .expect("fakehub minted the token");
    let Grant::Installation { scope, .. } = grant else {
        panic!("not an installation token");
    };
    let mine = setup
        .hub
        .shared()
        .lock()
        .repo_id_by_name(OWNER, MINE)
        .unwrap();
    assert_eq!(scope.repository_ids, Some(vec![mine]));
    assert_eq!(
        scope.permissions,
        Some([("contents".to_owned(), "write".to_owned())].into())
    );

    let other = api.git_credential(&repo(OTHER)).await.unwrap();
    assert_ne!(other.expose_secret(), token.expose_secret());
}

#[tokio::test]
async fn the_narrowed_token_pushes_to_its_repository_and_nowhere_else() {
    let setup = installed().await;
    let api = setup.client.installation(setup.installation).unwrap();
    let token = api.git_credential(&repo(MINE)).await.unwrap();

    let pushed = push_as(&setup.hub, MINE, &token).await;
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    let refused = push_as(&setup.hub, OTHER, &token).await;
    assert!(
        !refused.status.success(),
        "pushed to {OTHER} with a {MINE} token"
    );
    let other_remote = fakehub::git::repo_path(&setup.hub.shared().repos_dir, OWNER, OTHER);
    assert_eq!(
        fakehub::git::rev_parse(&other_remote, "refs/heads/autoforge/1").await,
        None
    );
}

#[tokio::test]
async fn the_narrowed_token_cannot_comment_though_the_installation_can() {
    let setup = installed().await;
    let api = setup.client.installation(setup.installation).unwrap();
    let issue = writes::create_issue(&api, &repo(MINE), "an issue", "body", &[])
        .await
        .unwrap()
        .number;
    writes::create_comment(&api, &repo(MINE), issue, "the App may comment")
        .await
        .unwrap();

    let token = api.git_credential(&repo(MINE)).await.unwrap();
    let as_git = GitHubClient::new(setup.hub.base_url(), GitHubAuth::Token(token))
        .unwrap()
        .installation(0)
        .unwrap();
    let error = writes::create_comment(&as_git, &repo(MINE), issue, "git may not")
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(403), "{error}");
    let hidden = writes::create_comment(
        &as_git,
        &repo(OTHER),
        autoforge_journal::testing::issue(1),
        "nor elsewhere",
    )
    .await
    .unwrap_err();
    assert_eq!(hidden.status(), Some(404), "{hidden}");
}
