//! `autoforge config check` and `autoforge config schema`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use super::GlobalArgs;
use crate::config::{self, Config, Environment, Origin};
use crate::dashboard::DashboardAccess;
use crate::sandbox::{SandboxMode, describe_launch, describe_validation, system_mounts};

/// Prints the embedded schema to stdout, byte for byte as shipped.
pub(super) fn schema() -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(config::SCHEMA_TEXT.as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write the schema to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// Loads the configuration like any command would, with `file` (if given)
/// taking the place of the located config file. Prints `ok: <source>` and any
/// warnings, or every problem; the exit code says which.
pub(super) fn check(global: &GlobalArgs, file: Option<&Path>) -> ExitCode {
    let env = Environment::from_process();
    let cwd = std::env::current_dir().unwrap_or_default();
    let file = file
        .map(Path::to_path_buf)
        .or_else(|| config::locate_file(global.config.as_deref(), &env, &cwd));
    match config::load(file.as_deref(), global.state_dir.as_deref(), &env) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                eprintln!("warning: {warning}");
            }
            match &loaded.origin {
                Origin::File(path) => println!("ok: {}", path.display()),
                Origin::EnvironmentOnly => println!("ok: no config file, environment only"),
            }
            print_listeners(&loaded);
            print_sandboxes(&loaded);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Where serve will listen, and who gets the dashboard and `/metrics`.
fn print_listeners(config: &Config) {
    let server = &config.settings.server;
    let access = DashboardAccess::for_listener(
        &server.admin_listen.to_string(),
        config.dashboard_token.clone(),
    );
    println!(
        "webhook listener: {} (/webhook, /healthz, /readyz)",
        server.listen
    );
    println!(
        "admin listener: {} (dashboard, /metrics, /healthz, /readyz); dashboard and /metrics {}",
        server.admin_listen,
        access.describe()
    );
}

/// The effective sandbox of every profile and of the validation commands:
/// what a launch would see, with the per-launch paths named by placeholders.
/// The fixed system view is shown once; nothing is shown without profiles.
fn print_sandboxes(config: &Config) {
    let agents = &config.settings.agents;
    if agents.profiles.is_empty() {
        return;
    }
    if agents.sandbox == SandboxMode::Off {
        println!(
            "warning: agents.sandbox = \"off\": agents and validation run without any sandbox"
        );
        return;
    }
    println!("sandbox: bubblewrap; every launch sees:");
    for mount in system_mounts() {
        println!("  {mount}");
    }
    let fixed = system_mounts().len();
    let print_own = |title: String, lines: Vec<String>| {
        // The first line names mode and network, then the fixed view.
        let network = lines.first().map(String::as_str).unwrap_or_default();
        println!("{title} ({network}), in addition:");
        for line in lines.iter().skip(1 + fixed) {
            println!("  {line}");
        }
    };
    for (name, profile) in &agents.profiles {
        let policy = profile.sandbox.policy(agents.sandbox);
        let program = profile.command.first().map(String::as_str).unwrap_or("");
        print_own(format!("profile {name}"), describe_launch(&policy, program));
    }
    print_own(
        "validation commands".to_owned(),
        describe_validation(&config.settings.validation.sandbox.policy(agents.sandbox)),
    );
}
