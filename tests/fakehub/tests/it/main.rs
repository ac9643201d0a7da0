//! Integration tests: fakehub over real HTTP, git and webhooks.

#![allow(clippy::unwrap_used)]

mod accounting;
mod conformance;
mod flows;
mod support;
mod typed;
mod webhook_shapes;
