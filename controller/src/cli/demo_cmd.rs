//! `autoforge demo`: the whole product against an in-process fake GitHub.
//!
//! Unlike the other commands the demo reads no configuration from the
//! environment or the working directory: it writes its own. Only an
//! explicit `--config FILE` is read, and only for its agent profiles; or
//! `--agents CLI` takes the shipped profiles of a real coding-agent CLI.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use super::{DemoArgs, GlobalArgs};
use crate::config::LogFormat;
use crate::demo::{DemoEnd, DemoOptions, real_agents};
use crate::logging;

/// The demo prints its own timeline on stdout; logs would drown it, so
/// only warnings and errors are logged unless `-v` asks for more.
const DEMO_LOG_FILTER: &str = "warn";

/// Builds the runtime and runs the demo; exit 0 only when the EPIC is DONE.
pub fn run(global: &GlobalArgs, args: &DemoArgs) -> anyhow::Result<ExitCode> {
    // Before anything starts: a missing key or CLI is said at once.
    let agents = args
        .agents
        .map(|cli| {
            let path = std::env::var_os("PATH");
            real_agents::agents_for(cli, |name| std::env::var_os(name), path.as_deref())
        })
        .transpose()?;
    logging::init(DEMO_LOG_FILTER, LogFormat::Auto, global.verbosity())?;
    let options = DemoOptions {
        state_dir: global.state_dir.clone(),
        report: args.report.clone(),
        keep: args.keep,
        timeout: Duration::from_secs(args.timeout),
        config: global.config.clone(),
        agents,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let end = runtime.block_on(crate::demo::run(&options))?;
    Ok(match end {
        DemoEnd::Done => ExitCode::SUCCESS,
        DemoEnd::Stopped { .. } | DemoEnd::TimedOut { .. } | DemoEnd::Interrupted => {
            ExitCode::FAILURE
        }
    })
}
