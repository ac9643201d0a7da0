//! The credential git pushes and fetches with. With a personal token it is
//! that token. With an App it is an installation token of its own, minted
//! for the one repository git talks to and `contents: write` only, so the
//! token a git process holds can neither reach another repository of the
//! installation nor comment, label or merge. Minted tokens are kept per
//! installation and repository until a few minutes before they expire.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use http::Method;
use secrecy::SecretString;
use serde_json::json;

use super::client::GitHubApi;
use super::error::GitHubError;
use super::paths::RepoName;
use super::ratelimit::RateScope;

/// A token is replaced when less than this is left of its life, so that a
/// long fetch or push never runs into its expiry.
const REMINT_BEFORE_EXPIRY: chrono::Duration = chrono::Duration::minutes(5);

/// Narrowed tokens by (installation, `owner/name`).
#[derive(Default)]
pub(super) struct GitTokens {
    minted: Mutex<HashMap<(u64, String), Minted>>,
}

#[derive(Clone)]
struct Minted {
    token: SecretString,
    expires_at: DateTime<Utc>,
}

impl GitTokens {
    fn fresh(&self, key: &(u64, String), now: DateTime<Utc>) -> Option<SecretString> {
        let minted = self.minted.lock().unwrap_or_else(|p| p.into_inner());
        minted
            .get(key)
            .filter(|m| m.expires_at - now > REMINT_BEFORE_EXPIRY)
            .map(|m| m.token.clone())
    }

    fn keep(&self, key: (u64, String), minted: Minted) {
        let mut all = self.minted.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|_, m| m.expires_at > Utc::now());
        all.insert(key, minted);
    }
}

impl GitHubApi {
    /// The credential for git's fetches and pushes of `repo`: the personal
    /// token, or an installation token narrowed to `repo` and
    /// `contents: write`. Ask right before each fetch or push rather than
    /// keeping the answer: a kept installation token expires.
    pub async fn git_credential(&self, repo: &RepoName) -> Result<SecretString, GitHubError> {
        match self.scope {
            RateScope::Token => {
                self.shared.personal_token.clone().ok_or_else(|| {
                    GitHubError::Setup("the token handle has no personal token".into())
                })
            }
            RateScope::Installation(id) => self.narrowed_token(id, repo).await,
            RateScope::App => Err(GitHubError::Setup(
                "the App's own handle has no git credential; use an installation".into(),
            )),
        }
    }

    async fn narrowed_token(
        &self,
        installation: u64,
        repo: &RepoName,
    ) -> Result<SecretString, GitHubError> {
        let key = (installation, repo.to_string());
        if let Some(token) = self.shared.git_tokens.fresh(&key, Utc::now()) {
            return Ok(token);
        }
        let app = self.app_handle().ok_or_else(|| {
            GitHubError::Setup("an installation handle without App credentials".into())
        })?;
        let path = format!("/app/installations/{installation}/access_tokens");
        let body = json!({
            "repositories": [repo.name()],
            "permissions": { "contents": "write" },
        });
        let response = app
            .write(Method::POST, &path, Some(&body))
            .await
            .map_err(|error| match error {
                GitHubError::Status {
                    status, message, ..
                } => GitHubError::Credentials { status, message },
                other => other,
            })?;
        #[derive(serde::Deserialize)]
        struct Answer {
            token: String,
            expires_at: DateTime<Utc>,
        }
        // serde's message could quote the body, which holds the token.
        let answer: Answer = serde_json::from_str(&response.body).map_err(|_| {
            GitHubError::Setup(format!("the answer to POST {path} has no token and expiry"))
        })?;
        let minted = Minted {
            token: SecretString::from(answer.token),
            expires_at: answer.expires_at,
        };
        let token = minted.token.clone();
        self.shared.git_tokens.keep(key, minted);
        Ok(token)
    }
}
