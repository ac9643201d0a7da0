//! `autoforge serve` and its parts: its two listeners, webhook ingress and
//! fixtures, the dispatcher, operators, repository settings, the dashboard
//! and budgets.

#[path = "../common/mod.rs"]
mod common;

mod admin_listener;
mod budget_serve;
mod chaos_github;
mod dashboard_serve;
mod hostile_config;
mod hostile_webhooks;
mod serve_dispatch;
mod serve_e2e;
mod serve_operators;
mod serve_repo_settings;
mod webhook_fixtures;
mod webhook_ignored;
mod webhook_ingress;
mod webhook_settings;
