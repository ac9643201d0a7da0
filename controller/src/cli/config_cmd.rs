//! `autoforge config check` and `autoforge config schema`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use super::GlobalArgs;
use crate::config::{self, Environment, Origin};

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
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
