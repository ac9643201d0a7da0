//! Who is calling: personal tokens (`ghp_…`), installation tokens (`ghs_…`),
//! GitHub App JWTs (RS256, checked against the app's public key), and the
//! basic-auth forms git uses. Also mints app key pairs and tokens.

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::signature::KeyPair as _;
use axum::http::{HeaderMap, header};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rand::Rng;
use serde_json::Value;

use crate::http::ApiError;
use crate::world::{Grant, TokenScope, World};

/// The authenticated principal of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Anonymous,
    /// A personal access token's user.
    User {
        user_id: u64,
    },
    /// An installation token (acts as the app's bot user), possibly
    /// narrowed to fewer repositories and permissions.
    Installation {
        installation_id: u64,
        scope: TokenScope,
    },
    /// A GitHub App JWT (only `/app/*` accepts it).
    App {
        app_id: u64,
    },
}

impl Caller {
    /// Token kind as recorded in the request log.
    pub fn kind(&self) -> &'static str {
        match self {
            Caller::Anonymous => "none",
            Caller::User { .. } => "personal",
            Caller::Installation { .. } => "installation",
            Caller::App { .. } => "app_jwt",
        }
    }

    /// The budget a request is counted against, for fakehub's accounting:
    /// `installation:<id>` (every token of the installation shares it, as
    /// on GitHub), `app:<id>`, `user:<id>` or `anonymous`.
    pub fn rate_scope(&self) -> String {
        match self {
            Caller::Anonymous => "anonymous".to_owned(),
            Caller::User { user_id } => format!("user:{user_id}"),
            Caller::Installation {
                installation_id, ..
            } => format!("installation:{installation_id}"),
            Caller::App { app_id } => format!("app:{app_id}"),
        }
    }
}

/// The raw credential carried by a request, from `Authorization: token|Bearer`
/// or from basic auth (git sends `x-access-token:<token>`).
pub fn credential(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, rest) = value.split_once(' ')?;
    let rest = rest.trim();
    match scheme.to_ascii_lowercase().as_str() {
        "token" | "bearer" => Some(rest.to_string()),
        "basic" => {
            let decoded = STANDARD.decode(rest).ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (user, pass) = text.split_once(':')?;
            // git clients put the token either in the password or the user.
            Some(if pass.is_empty() {
                user.to_string()
            } else {
                pass.to_string()
            })
        }
        _ => None,
    }
}

/// Resolve a credential to a caller. A missing credential is anonymous; an
/// unknown, expired or forged one is `401 Bad credentials`.
pub fn authenticate(
    world: &World,
    token: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Caller, ApiError> {
    let Some(token) = token else {
        return Ok(Caller::Anonymous);
    };
    if token.matches('.').count() == 2 {
        return verify_app_jwt(world, token, now).map(|app_id| Caller::App { app_id });
    }
    match world.grant(token, now) {
        Some(Grant::Personal { user_id }) => Ok(Caller::User { user_id: *user_id }),
        Some(Grant::Installation {
            installation_id, ..
        }) if world
            .installations
            .get(installation_id)
            .is_some_and(|i| i.suspended_at.is_some()) =>
        {
            Err(ApiError::installation_suspended())
        }
        Some(Grant::Installation {
            installation_id,
            scope,
            ..
        }) => Ok(Caller::Installation {
            installation_id: *installation_id,
            scope: scope.clone(),
        }),
        None => Err(ApiError::bad_credentials()),
    }
}

fn jwt_error(message: &str) -> ApiError {
    ApiError::new(axum::http::StatusCode::UNAUTHORIZED, message)
}

/// Check an App JWT as GitHub does: RS256 signed by the app named in `iss`,
/// `iat` not in the future (60 s skew), `exp` in the future and at most ten
/// minutes after `iat`.
fn verify_app_jwt(world: &World, token: &str, now: DateTime<Utc>) -> Result<u64, ApiError> {
    let payload = token
        .split('.')
        .nth(1)
        .ok_or_else(|| jwt_error("A JSON web token could not be decoded"))?;
    let claims: Value = URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| jwt_error("A JSON web token could not be decoded"))?;
    let app_id = match &claims["iss"] {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| jwt_error("'Issuer' claim ('iss') must be an Integer"))?;
    let app = world
        .apps
        .get(&app_id)
        .ok_or_else(|| jwt_error("Integration not found"))?;
    let key = DecodingKey::from_rsa_pem(app.public_key_pem.as_bytes())
        .map_err(|_| jwt_error("A JSON web token could not be decoded"))?;
    let mut validation = Validation::new(Algorithm::RS256);
    validation.leeway = 60;
    validation.validate_aud = false;
    validation.set_required_spec_claims(&["exp"]);
    jsonwebtoken::decode::<Value>(token, &key, &validation)
        .map_err(|_| jwt_error("A JSON web token could not be decoded"))?;
    let iat = claims["iat"].as_i64().ok_or_else(|| jwt_error("'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"))?;
    let exp = claims["exp"].as_i64().unwrap_or(0);
    let now = now.timestamp();
    if iat > now + 60 {
        return Err(jwt_error(
            "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
        ));
    }
    if exp > iat + 600 + 60 || exp > now + 660 {
        return Err(jwt_error(
            "'Expiration time' claim ('exp') is too far in the future",
        ));
    }
    Ok(app_id)
}

/// A fresh token with GitHub's prefix and 36 random alphanumerics.
pub fn mint_token(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let tail: String = (0..36)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{tail}")
}

/// A new RSA-2048 key pair for a GitHub App: `(private PKCS#8 PEM, public SPKI PEM)`.
pub fn generate_app_key() -> anyhow::Result<(String, String)> {
    let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
        .map_err(|_| anyhow::anyhow!("RSA key generation failed"))?;
    let private = pair
        .as_der()
        .map_err(|_| anyhow::anyhow!("RSA private key encoding failed"))?;
    let public = pair
        .public_key()
        .as_der()
        .map_err(|_| anyhow::anyhow!("RSA public key encoding failed"))?;
    Ok((
        pem("PRIVATE KEY", private.as_ref()),
        pem("PUBLIC KEY", public.as_ref()),
    ))
}

fn pem(tag: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {tag}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {tag}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn git_basic_auth_yields_the_token_from_the_password() {
        let mut h = HeaderMap::new();
        let v = format!("Basic {}", STANDARD.encode("x-access-token:ghs_abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(&v).unwrap());
        assert_eq!(credential(&h).as_deref(), Some("ghs_abc"));
    }

    #[test]
    fn unknown_token_is_bad_credentials_and_missing_token_is_anonymous() {
        let world = World::default();
        assert_eq!(
            authenticate(&world, None, Utc::now()).unwrap(),
            Caller::Anonymous
        );
        let err = authenticate(&world, Some("ghp_nope"), Utc::now()).unwrap_err();
        assert_eq!(err.status(), axum::http::StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn generated_key_signs_a_jwt_that_verifies_and_a_stale_one_does_not() {
        let (private, public) = generate_app_key().unwrap();
        let mut world = World::default();
        world.apps.insert(
            7,
            crate::world::App {
                id: 7,
                slug: "bot".into(),
                name: "bot".into(),
                owner_id: 1,
                bot_user_id: 2,
                hook_id: 3,
                webhook_url: None,
                webhook_secret: None,
                permissions: Default::default(),
                events: vec![],
                public_key_pem: public,
                created_at: Utc::now(),
            },
        );
        let key = jsonwebtoken::EncodingKey::from_rsa_pem(private.as_bytes()).unwrap();
        let now = Utc::now().timestamp();
        let sign = |iat: i64, exp: i64| {
            jsonwebtoken::encode(
                &jsonwebtoken::Header::new(Algorithm::RS256),
                &serde_json::json!({"iss": 7, "iat": iat, "exp": exp}),
                &key,
            )
            .unwrap()
        };
        assert_eq!(
            authenticate(&world, Some(&sign(now - 30, now + 540)), Utc::now()).unwrap(),
            Caller::App { app_id: 7 }
        );
        assert!(authenticate(&world, Some(&sign(now - 1200, now - 700)), Utc::now()).is_err());
        assert!(authenticate(&world, Some(&sign(now, now + 3600)), Utc::now()).is_err());
    }
}
