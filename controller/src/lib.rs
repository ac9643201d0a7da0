//! autoforge: a self-hosted GitHub App that turns a labelled issue into a
//! reviewed pull request. The binary in `main.rs` is a thin shell over the
//! modules declared here; see `docs/architecture.md` in the repository for the
//! data flow between them.

pub mod agents;
pub mod cli;
pub mod commands;
pub mod config;
pub mod dashboard;
pub mod database;
pub mod demo;
pub mod doctor;
pub mod driver;
pub mod effects;
pub mod github;
pub mod inline_code;
pub mod intake;
pub mod logging;
pub mod machine;
pub mod metrics;
pub mod programs;
pub mod publish;
pub mod redact;
pub mod sandbox;
pub mod serve;
pub mod setup;
pub mod validation;
pub mod webhook;
pub mod workspace;
