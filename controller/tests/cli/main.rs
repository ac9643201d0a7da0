//! The `autoforge` command line: configuration, migrations and the demo.

#[path = "../common/mod.rs"]
mod common;

mod build_features;
mod config_cli;
mod demo_cli;
mod migrate_cli;
