//! The control API's HTTP face: JSON handlers under `/_fakehub/` that call
//! the functions in [`crate::control`].

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::Shared;
use crate::control::{
    add_check, add_status, create_app, create_repo, create_user, install, set_collaborator,
    set_installation_repos, set_merge_rules,
};
use crate::faults::FaultRule;
use crate::http::{ApiError, ApiResult, created, ok};

type S = State<Arc<Shared>>;

fn parse<T: serde::de::DeserializeOwned>(body: Value) -> Result<T, ApiError> {
    serde_json::from_value(body).map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            format!("Problems parsing JSON: {e}"),
        )
    })
}

pub async fn http_create_user(State(s): S, Json(body): Json<Value>) -> ApiResult {
    let u = create_user(&s, &parse(body)?)?;
    created(json!({"id": u.id, "login": u.login, "token": u.token.expose_secret()}))
}

pub async fn http_create_repo(State(s): S, Json(body): Json<Value>) -> ApiResult {
    created(create_repo(&s, &parse(body)?).await?)
}

pub async fn http_set_collaborator(
    State(s): S,
    Path((owner, repo, login)): Path<(String, String, String)>,
    Json(body): Json<Value>,
) -> ApiResult {
    let permission = body["permission"].as_str().unwrap_or("write").to_string();
    set_collaborator(&s, &owner, &repo, &login, &permission)?;
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

pub async fn http_set_merge_rules(
    State(s): S,
    Path((owner, repo)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> ApiResult {
    set_merge_rules(&s, &owner, &repo, &parse(body)?)?;
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

pub async fn http_create_app(State(s): S, Json(body): Json<Value>) -> ApiResult {
    let a = create_app(&s, &parse(body)?).await?;
    created(
        json!({"id": a.id, "slug": a.slug, "bot_login": a.bot_login, "private_key_pem": a.private_key_pem.expose_secret()}),
    )
}

pub async fn http_install(
    State(s): S,
    Path(app_id): Path<u64>,
    Json(body): Json<Value>,
) -> ApiResult {
    created(json!({"id": install(&s, app_id, &parse(body)?)?}))
}

pub async fn http_set_installation_repos(
    State(s): S,
    Path(id): Path<u64>,
    Json(body): Json<Value>,
) -> ApiResult {
    let names: Vec<String> = parse(body.get("repositories").cloned().unwrap_or(Value::Null))?;
    set_installation_repos(&s, id, &names)?;
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

pub async fn http_add_status(State(s): S, Json(body): Json<Value>) -> ApiResult {
    created(json!({"id": add_status(&s, &parse(body)?)?}))
}

pub async fn http_add_check(State(s): S, Json(body): Json<Value>) -> ApiResult {
    created(add_check(&s, &parse(body)?)?)
}

pub async fn http_set_faults(State(s): S, Json(body): Json<Value>) -> ApiResult {
    let rules: Vec<FaultRule> = parse(body.get("rules").cloned().unwrap_or(body))?;
    s.faults().set(rules);
    ok(json!({"rules": s.faults().rules()}))
}

pub async fn http_held(State(s): S, Path(gate): Path<String>) -> ApiResult {
    ok(json!({"gate": gate, "waiting": s.gates.waiting(&gate)}))
}

pub async fn http_release(State(s): S, Path(gate): Path<String>) -> ApiResult {
    ok(json!({"gate": gate, "released": s.gates.release(&gate)}))
}

pub async fn http_requests(State(s): S) -> ApiResult {
    ok(json!(s.lock().requests))
}

/// `GET /_fakehub/rate_usage`: points spent per rate scope since start.
pub async fn http_rate_usage(State(s): S) -> ApiResult {
    ok(json!({"points": s.lock().points}))
}

pub async fn http_state(State(s): S) -> Response {
    Json(json!(&*s.lock())).into_response()
}

/// `POST /_fakehub/faults/profiles`: `{"profiles": ["write_errors", …]}`
/// puts named profiles in force (`[]` ends them).
pub async fn http_set_fault_profiles(State(s): S, Json(body): Json<Value>) -> ApiResult {
    let names: Vec<String> = parse(body.get("profiles").cloned().unwrap_or(body))?;
    crate::profiles::set_profiles(&s, names)
        .map_err(|e| ApiError::new(axum::http::StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    ok(json!({"profiles": s.faults().profiles()}))
}

/// `GET /_fakehub/closed_windows`: how many rate-limit windows the faults
/// closed, and every request sent inside one.
pub async fn http_closed_windows(State(s): S) -> ApiResult {
    let faults = s.faults();
    ok(json!({
        "windows_closed": faults.windows.closings(),
        "requests_inside": faults.windows.inside().len(),
        "requests": faults.windows.inside(),
    }))
}
