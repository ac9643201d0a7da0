//! Webhook emission: GitHub's envelope (`action`, `sender`, `repository`,
//! `installation`), HMAC-SHA256 signatures, asynchronous delivery with a
//! 10-second timeout, the delivery log, redelivery and webhook faults.

use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::Shared;
use crate::faults::FaultKind;
use crate::render::{Ctx, node_id, render_repo, render_user};
use crate::world::{Delivery, World};

/// One event to send to every app that should see it.
pub struct Event {
    pub name: &'static str,
    pub action: Option<&'static str>,
    pub repo_id: Option<u64>,
    /// Send only to this installation (installation events); otherwise to
    /// every installation that covers `repo_id`.
    pub only_installation: Option<u64>,
    pub sender_id: u64,
    /// Event-specific fields (`issue`, `comment`, `label`, `changes`…).
    pub body: Value,
}

/// `X-Hub-Signature-256` value for a body.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC accepts keys of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Record and dispatch `event` to each subscribed installation.
pub fn emit(shared: &Arc<Shared>, world: &mut World, event: Event) {
    let targets: Vec<(u64, u64)> = world
        .installations
        .values()
        // GitHub sends a suspended installation nothing but the
        // `installation` event that suspends or unsuspends it.
        .filter(|i| i.suspended_at.is_none() || event.name == "installation")
        .filter(|i| match (event.only_installation, event.repo_id) {
            (Some(only), _) => i.id == only,
            (None, Some(repo)) => i.repository_ids.contains(&repo),
            (None, None) => false,
        })
        .map(|i| (i.id, i.app_id))
        .collect();
    for (installation_id, app_id) in targets {
        dispatch(shared, world, app_id, Some(installation_id), &event);
    }
}

/// GitHub's `ping`, sent to an app's webhook when it is configured.
pub fn ping(shared: &Arc<Shared>, world: &mut World, app_id: u64) {
    let Some(app) = world.apps.get(&app_id) else {
        return;
    };
    let hook = json!({
        "type": "App",
        "id": app.hook_id,
        "name": "web",
        "active": true,
        "events": app.events,
        "config": {"content_type": "json", "insecure_ssl": "0", "url": app.webhook_url},
        "updated_at": crate::render::ts(app.created_at),
        "created_at": crate::render::ts(app.created_at),
        "app_id": app.id,
        "deliveries_url": format!("{}/app/hook/deliveries", shared.base),
        "ping_url": format!("{}/app/hook/pings", shared.base),
        "url": format!("{}/app/hook/config", shared.base),
    });
    let body = json!({"zen": "Keep it logically awesome.", "hook_id": app.hook_id, "hook": hook});
    let sender_id = app.owner_id;
    dispatch(
        shared,
        world,
        app_id,
        None,
        &Event {
            name: "ping",
            action: None,
            repo_id: None,
            only_installation: None,
            sender_id,
            body,
        },
    );
}

/// Build, record and send one delivery of `event` to one app.
fn dispatch(
    shared: &Arc<Shared>,
    world: &mut World,
    app_id: u64,
    installation: Option<u64>,
    event: &Event,
) {
    {
        let Some(app) = world.apps.get(&app_id) else {
            return;
        };
        let always = matches!(
            event.name,
            "installation" | "installation_repositories" | "ping"
        );
        if !always && !app.events.is_empty() && !app.events.iter().any(|e| e == event.name) {
            return;
        }
        if app.webhook_url.is_none() {
            return;
        }
        let ctx = Ctx {
            base: &shared.base,
            world,
        };
        let mut payload = json!({});
        if let Some(action) = event.action {
            payload["action"] = json!(action);
        }
        if let (Value::Object(p), Value::Object(b)) = (&mut payload, event.body.clone()) {
            p.extend(b);
        }
        if let Some(repo) = event.repo_id.and_then(|r| world.repos.get(&r)) {
            payload["repository"] = render_repo(ctx, repo);
            if event.name == "push" {
                // GitHub's push payload carries these two as Unix timestamps.
                payload["repository"]["created_at"] = json!(repo.created_at.timestamp());
                payload["repository"]["pushed_at"] = json!(repo.pushed_at.timestamp());
                payload["repository"]["master_branch"] = json!(repo.default_branch);
                payload["repository"]["stargazers"] = json!(0);
                let login = payload["repository"]["owner"]["login"].clone();
                payload["repository"]["owner"]["name"] = login.clone();
                payload["repository"]["owner"]["email"] = json!(format!(
                    "{}@users.noreply.fakehub",
                    login.as_str().unwrap_or_default()
                ));
            }
        }
        if let Some(sender) = world.users.get(&event.sender_id) {
            payload["sender"] = render_user(ctx, sender);
        }
        // Installation events carry the full installation object already.
        if let Some(installation_id) =
            installation.filter(|_| payload.get("installation").is_none())
        {
            payload["installation"] =
                json!({"id": installation_id, "node_id": node_id("MDIz", installation_id)});
        }
        let id = world.alloc_id();
        let delivery = Delivery {
            id,
            guid: uuid::Uuid::new_v4().to_string(),
            app_id,
            event: event.name.to_string(),
            action: event.action.map(str::to_string),
            installation_id: installation,
            repository_id: event.repo_id,
            payload,
            redelivery: false,
            delivered_at: Utc::now(),
            status_code: 0,
            status: "pending".to_string(),
            duration_secs: 0.0,
        };
        world.deliveries.push(delivery.clone());
        spawn_delivery(shared.clone(), delivery);
    }
}

/// Send a recorded delivery again as a new attempt with the same GUID.
pub fn redeliver(shared: &Arc<Shared>, world: &mut World, delivery_id: u64) -> Option<u64> {
    let original = world
        .deliveries
        .iter()
        .find(|d| d.id == delivery_id)?
        .clone();
    let id = world.alloc_id();
    let attempt = Delivery {
        id,
        redelivery: true,
        delivered_at: Utc::now(),
        status_code: 0,
        status: "pending".into(),
        duration_secs: 0.0,
        ..original
    };
    world.deliveries.push(attempt.clone());
    spawn_delivery(shared.clone(), attempt);
    Some(id)
}

fn spawn_delivery(shared: Arc<Shared>, delivery: Delivery) {
    tokio::spawn(async move {
        let faults = shared.faults().for_webhook(&delivery.event);
        let mut copies = 1;
        for fault in &faults {
            match fault {
                FaultKind::WebhookDelay { ms } => {
                    tokio::time::sleep(std::time::Duration::from_millis(*ms)).await
                }
                FaultKind::WebhookDuplicate => copies = 2,
                FaultKind::WebhookDrop => {
                    finish(&shared, delivery.id, 0, "dropped by fault injection", 0.0);
                    return;
                }
                _ => {}
            }
        }
        for _ in 0..copies {
            send(&shared, &delivery).await;
        }
    });
}

async fn send(shared: &Shared, delivery: &Delivery) {
    let (url, secret, hook_id) = {
        let w = shared.lock();
        match w.apps.get(&delivery.app_id) {
            Some(app) => (
                app.webhook_url.clone(),
                app.webhook_secret.clone(),
                app.hook_id,
            ),
            None => return,
        }
    };
    let Some(url) = url else { return };
    let body = serde_json::to_vec(&delivery.payload).unwrap_or_default();
    let mut req = shared
        .client
        .post(&url)
        .header("content-type", "application/json")
        .header("X-GitHub-Event", &delivery.event)
        .header("X-GitHub-Delivery", &delivery.guid)
        .header("X-GitHub-Hook-ID", hook_id.to_string())
        .header("X-GitHub-Hook-Installation-Target-Type", "integration")
        .header(
            "X-GitHub-Hook-Installation-Target-ID",
            delivery.app_id.to_string(),
        );
    if let Some(secret) = secret {
        req = req.header("X-Hub-Signature-256", signature(&secret, &body));
    }
    let started = Instant::now();
    let result = req.body(body).send().await;
    let secs = started.elapsed().as_secs_f64();
    match result {
        Ok(resp) => {
            let code = resp.status().as_u16();
            let status = if resp.status().is_success() {
                "OK".to_string()
            } else {
                format!("Invalid HTTP Response: {code}")
            };
            finish(shared, delivery.id, code, &status, secs);
        }
        Err(e) if e.is_timeout() => finish(shared, delivery.id, 0, "timed out", secs),
        Err(_) => finish(shared, delivery.id, 0, "failed to connect to host", secs),
    }
}

fn finish(shared: &Shared, id: u64, code: u16, status: &str, secs: f64) {
    let mut w = shared.lock();
    if let Some(d) = w.deliveries.iter_mut().find(|d| d.id == id) {
        d.status_code = code;
        d.status = status.to_string();
        d.duration_secs = secs;
    }
    drop(w);
    shared.mark_dirty();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_githubs_documented_example() {
        // Example from GitHub's "Validating webhook deliveries" documentation.
        let sig = signature("It's a Secret to Everybody", b"Hello, World!");
        assert_eq!(
            sig,
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }
}
