//! The `autoforge` command line: configuration, migrations and the demo.

#[path = "../common/mod.rs"]
mod common;

mod config_cli;
mod demo_cli;
mod migrate_cli;
