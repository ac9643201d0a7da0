//! The `autoforge` command line: configuration, migrations and the demo;
//! and the rules the build and the sources keep.

#[path = "../common/mod.rs"]
mod common;

mod build_features;
mod config_cli;
mod demo_agents_cli;
mod demo_cli;
mod doctor_cli;
mod doctor_probe;
mod doctor_real_probe;
mod logs_cli;
mod migrate_cli;
mod operator_cli;
mod setup_cli;
mod source_rules;
mod status_rate_limit;
