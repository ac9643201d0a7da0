//! The effect executor against fakehub, and the texts it publishes (bodies,
//! review comments) with their policy checks.

#[path = "../common/mod.rs"]
mod common;

mod effects_comments;
mod effects_issues;
mod effects_pulls;
mod publish_bodies;
mod publish_hostile;
mod publish_review;
mod rendered_texts;
