//! Integration tests: fakehub over real HTTP, git and webhooks.

#![allow(clippy::unwrap_used)]

mod accounting;
mod conformance;
mod flows;
mod merge_rules;
mod support;
mod suspension;
mod typed;
mod webhook_shapes;
