//! `autoforge doctor [--json] [--probe]`: runs the checks of
//! [`crate::doctor`] and prints them, exiting 1 when any failed.

use std::process::ExitCode;

use anyhow::Context;

use super::{DoctorArgs, GlobalArgs};
use crate::config::{self, Environment};
use crate::doctor::{self, probe};

pub(super) fn run(global: &GlobalArgs, args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let env = Environment::from_process();
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let file = config::locate_file(global.config.as_deref(), &env, &cwd);
    let loaded = config::load(file.as_deref(), global.state_dir.as_deref(), &env);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(async {
        let mut report = doctor::run_checks(&loaded).await;
        if args.probe {
            report.extend(probes(&loaded, args.json).await);
        }
        report
    });
    if args.json {
        let text = serde_json::to_string_pretty(&report.json()).context("cannot render JSON")?;
        println!("{text}");
    } else {
        print!("{}", report.text());
    }
    Ok(if report.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The probes, after saying on the terminal (stderr when stdout is JSON)
/// that they are billable.
async fn probes(
    loaded: &Result<config::Config, config::ConfigError>,
    json: bool,
) -> Vec<doctor::Check> {
    let Ok(config) = loaded else {
        return vec![doctor::Check::skipped(
            "probe",
            "needs a valid configuration",
        )];
    };
    let settings = &config.settings;
    let Ok(catalog) = settings.agents.catalog(settings.limits.review_rounds) else {
        return vec![doctor::Check::skipped(
            "probe",
            "the agent configuration is invalid",
        )];
    };
    let plan = probe::planned(&catalog);
    if plan.is_empty() {
        return vec![doctor::Check::skipped("probe", "no agent profile to probe")];
    }
    let notice = probe::billing_notice(&plan);
    if json {
        eprintln!("{notice}");
    } else {
        println!("{notice}");
    }
    probe::run_probes(config).await
}
