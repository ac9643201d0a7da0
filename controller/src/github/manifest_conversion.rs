//! `POST /app-manifests/{code}/conversions`: the last step of GitHub's App
//! manifest flow, which trades the temporary code GitHub handed the browser
//! for the new App's id, private key and webhook secret. It needs no
//! credential (the code is one), works once, and only within an hour.

use secrecy::SecretString;
use serde::Deserialize;

use super::paths::encode_component;

/// What GitHub returns about the App it created.
#[derive(Debug, Deserialize)]
pub struct ConvertedApp {
    pub id: u64,
    pub slug: String,
    pub name: String,
    pub html_url: String,
    pub pem: SecretString,
    /// Absent when the manifest asked for no active webhook.
    pub webhook_secret: Option<SecretString>,
}

/// Why the conversion failed.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    #[error(
        "the code is not one GitHub issued, or it was used already or is older than an hour; start again"
    )]
    UnknownCode,
    #[error("GitHub answered {status} to the conversion: {body}")]
    Refused { status: u16, body: String },
    #[error("cannot reach GitHub at {url}: {source}")]
    Unreachable { url: String, source: reqwest::Error },
    #[error("GitHub's answer to the conversion is not an App with a key: {0}")]
    Unexpected(reqwest::Error),
}

/// Converts `code` on the API at `api_url` (`https://api.github.com`, or
/// `https://HOST/api/v3` for GitHub Enterprise Server).
pub async fn convert_manifest_code(
    api_url: &str,
    code: &str,
) -> Result<ConvertedApp, ConversionError> {
    let url = format!(
        "{}/app-manifests/{}/conversions",
        api_url.trim_end_matches('/'),
        encode_component(code)
    );
    let client = reqwest::Client::builder()
        .user_agent(concat!("autoforge/", env!("CARGO_PKG_VERSION")))
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|source| ConversionError::Unreachable {
            url: url.clone(),
            source,
        })?;
    let response = client
        .post(&url)
        .header("accept", "application/vnd.github+json")
        .header("x-github-api-version", "2022-11-28")
        .send()
        .await
        .map_err(|source| ConversionError::Unreachable {
            url: url.clone(),
            source,
        })?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(ConversionError::UnknownCode);
    }
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        let body: String = body.chars().take(500).collect();
        return Err(ConversionError::Refused {
            status: status.as_u16(),
            body,
        });
    }
    response.json().await.map_err(ConversionError::Unexpected)
}
