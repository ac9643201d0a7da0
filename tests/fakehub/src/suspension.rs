//! Suspending and unsuspending an App's installation, as GitHub does it:
//! `PUT`/`DELETE /app/installations/{id}/suspended` (with the App's JWT),
//! the same through the control API and [`Handle`], `suspended_at` and
//! `suspended_by` on the installation, and the `installation` webhook with
//! action `suspend` or `unsuspend`. While suspended, token requests and
//! every call with the installation's tokens are refused with 403 (see
//! `auth` and `routes::apps`), and no other webhook is sent to it.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use chrono::Utc;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::{ApiError, ApiResult};
use crate::render::{Ctx, render_installation};
use crate::webhooks::{Event, emit};
use crate::{Handle, Shared};

/// Suspends installation `id`; `by` is who did it (the account owner when
/// `None`). Suspending a suspended installation changes nothing and sends
/// nothing, as on GitHub.
pub fn suspend(shared: &Arc<Shared>, id: u64, by: Option<&str>) -> Result<(), ApiError> {
    let mut w = shared.lock();
    let account = w.installation(id)?.account_id;
    let by = match by {
        Some(login) => {
            w.user_by_login(login)
                .ok_or_else(|| ApiError::validation("Installation", "suspended_by", "missing"))?
                .id
        }
        None => account,
    };
    let Some(inst) = w.installations.get_mut(&id) else {
        return Err(ApiError::not_found());
    };
    if inst.suspended_at.is_some() {
        return Ok(());
    }
    inst.suspended_at = Some(Utc::now());
    inst.suspended_by = Some(by);
    announce(shared, &mut w, id, "suspend", by)
}

/// Lifts the suspension of installation `id` (nothing when it is not
/// suspended).
pub fn unsuspend(shared: &Arc<Shared>, id: u64) -> Result<(), ApiError> {
    let mut w = shared.lock();
    let Some(inst) = w.installations.get_mut(&id) else {
        return Err(ApiError::not_found());
    };
    let Some(by) = inst
        .suspended_by
        .take()
        .filter(|_| inst.suspended_at.is_some())
    else {
        return Ok(());
    };
    inst.suspended_at = None;
    announce(shared, &mut w, id, "unsuspend", by)
}

fn announce(
    shared: &Arc<Shared>,
    w: &mut crate::world::World,
    id: u64,
    action: &'static str,
    sender: u64,
) -> Result<(), ApiError> {
    let ctx = Ctx {
        base: &shared.base,
        world: w,
    };
    // Unlike `installation.created`, GitHub's examples of these two carry
    // the installation's timestamps as ISO 8601 strings.
    let inst = render_installation(ctx, w.installation(id)?);
    emit(
        shared,
        w,
        Event {
            name: "installation",
            action: Some(action),
            repo_id: None,
            only_installation: Some(id),
            sender_id: sender,
            body: json!({"installation": inst}),
        },
    );
    shared.mark_dirty();
    Ok(())
}

/// The App's own installations only, as GitHub checks the JWT's issuer.
fn own_installation(shared: &Shared, caller: &Caller, id: u64) -> Result<(), ApiError> {
    let Caller::App { app_id } = caller else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "A JSON web token could not be decoded",
        ));
    };
    let w = shared.lock();
    match w.installations.get(&id) {
        Some(inst) if inst.app_id == *app_id => Ok(()),
        _ => Err(ApiError::not_found()),
    }
}

/// `PUT /app/installations/{id}/suspended`.
pub async fn api_suspend(
    State(s): State<Arc<Shared>>,
    axum::Extension(c): axum::Extension<Caller>,
    Path(id): Path<u64>,
) -> ApiResult {
    own_installation(&s, &c, id)?;
    suspend(&s, id, None)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `DELETE /app/installations/{id}/suspended`.
pub async fn api_unsuspend(
    State(s): State<Arc<Shared>>,
    axum::Extension(c): axum::Extension<Caller>,
    Path(id): Path<u64>,
) -> ApiResult {
    own_installation(&s, &c, id)?;
    unsuspend(&s, id)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `PUT /_fakehub/installations/{id}/suspended`, body `{"by": login}`
/// (optional).
pub async fn http_suspend(
    State(s): State<Arc<Shared>>,
    Path(id): Path<u64>,
    body: Option<axum::Json<Value>>,
) -> ApiResult {
    let by = body
        .as_ref()
        .and_then(|b| b.get("by"))
        .and_then(Value::as_str);
    suspend(&s, id, by)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `DELETE /_fakehub/installations/{id}/suspended`.
pub async fn http_unsuspend(State(s): State<Arc<Shared>>, Path(id): Path<u64>) -> ApiResult {
    unsuspend(&s, id)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

impl Handle {
    /// Suspends an installation (emits `installation.suspend`); `by` is the
    /// suspending user's login, the account owner when `None`.
    pub fn suspend_installation(&self, id: u64, by: Option<&str>) -> Result<(), ApiError> {
        suspend(&self.shared, id, by)
    }

    /// Lifts an installation's suspension (emits `installation.unsuspend`).
    pub fn unsuspend_installation(&self, id: u64) -> Result<(), ApiError> {
        unsuspend(&self.shared, id)
    }
}
