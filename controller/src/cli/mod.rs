//! The command-line interface: global options, subcommands and the shared
//! start-up sequence (locate and load the configuration, then set up logging).

mod config_cmd;
mod demo_cmd;
mod doctor_cmd;
mod migrate_cmd;
mod operator_cmd;
mod runs_cmd;
mod serve_cmd;
mod setup_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::config::{self, Config, Environment, LogFormat};
use crate::logging;

/// autoforge turns a labelled GitHub issue into a reviewed pull request.
#[derive(Debug, Parser)]
#[command(name = "autoforge", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: CliCommand,
}

/// Options accepted before or after any subcommand.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Config file [default: $AUTOFORGE_CONFIG, else ./autoforge.toml if present, else none].
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// State directory; wins over state_dir and AUTOFORGE_STATE_DIR.
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// More log output (-v debug, -vv trace). RUST_LOG wins over this.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Less log output (-q warn, -qq error). RUST_LOG wins over this.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub quiet: u8,
}

impl GlobalArgs {
    /// Number of `-v` minus number of `-q`, saturated to the `i8` range.
    pub fn verbosity(&self) -> i8 {
        let verbose = i8::try_from(self.verbose).unwrap_or(i8::MAX);
        let quiet = i8::try_from(self.quiet).unwrap_or(i8::MAX);
        verbose.saturating_sub(quiet)
    }
}

#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Check or describe the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Apply the database migrations (starting the managed local Postgres
    /// when no DATABASE_URL / database.url is set), then exit.
    Migrate,
    /// Serve webhooks and poll GitHub: ingress, dispatcher and poller
    /// (starting the managed local Postgres when no DATABASE_URL is set).
    Serve,
    /// Drive a demo EPIC to DONE against an in-process fake GitHub, with
    /// scripted agents and a managed Postgres; no configuration, no network.
    Demo(DemoArgs),
    /// Check that this installation can work: configuration, database,
    /// git, bubblewrap, agent programs, prompts, and the GitHub App's
    /// permissions, events, webhook and recent deliveries. Exits 1 on any
    /// failure.
    Doctor(DoctorArgs),
    /// Create the GitHub App through GitHub's App manifest flow: serves a
    /// page on loopback whose button registers the App with exactly the
    /// permissions and events autoforge uses, then saves its id, private
    /// key and webhook secret (0600) for `serve`.
    Setup(SetupArgs),
    /// Active runs by phase, blocked runs with their reasons, and what
    /// waits in the webhook inbox and the effect journal.
    Status(StatusArgs),
    /// List runs or show one.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Unblock a BLOCKED run, as `/autoforge unblock` would: the phase it
    /// resumes in is chosen from GitHub's current state.
    Unblock(UnblockArgs),
    /// Stop a run, as `/autoforge stop` would.
    Stop(StopArgs),
}

/// Options of `autoforge setup`.
#[derive(Debug, Args)]
pub struct SetupArgs {
    /// Create the App for this organization instead of your own account.
    #[arg(long, value_name = "ORG")]
    pub org: Option<String>,
    /// Public address `serve` is reached at; webhooks go to URL/webhook.
    /// Without it the App starts with its webhook inactive.
    #[arg(long, value_name = "PUBLIC_URL")]
    pub url: Option<String>,
    /// GitHub's web address [default: https://github.com, or derived from
    /// github.api_url for GitHub Enterprise Server].
    #[arg(long, value_name = "URL")]
    pub github_url: Option<String>,
    /// The App's name on GitHub (unique across GitHub).
    #[arg(long, default_value = "autoforge")]
    pub name: String,
    /// Directory for app.pem, webhook-secret and github-app.env
    /// [default: <state dir>/github-app].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Loopback address of the setup page.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
    /// Replace credentials already in the directory.
    #[arg(long)]
    pub force: bool,
}

/// Options of `autoforge status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Runs, newest first.
    List(RunsListArgs),
    /// One run: its timeline, GitHub writes, launches and validations.
    Show(RunsShowArgs),
}

/// Options of `autoforge runs list`.
#[derive(Debug, Args)]
pub struct RunsListArgs {
    /// Only runs of this repository (`owner/name`).
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// Only runs in this phase (`REVIEW`, `blocked`, …).
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// Only blocked runs.
    #[arg(long)]
    pub blocked: bool,
    /// At most this many runs.
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Options of `autoforge runs show`.
#[derive(Debug, Args)]
pub struct RunsShowArgs {
    /// The run's id.
    pub id: i64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Options of `autoforge unblock`.
#[derive(Debug, Args)]
pub struct UnblockArgs {
    /// The run's id.
    pub run: i64,
    /// Why the run may go on (recorded with your name; never posted).
    #[arg(long)]
    pub reason: String,
    /// The operator name to record [default: $USER].
    #[arg(long = "as", value_name = "NAME")]
    pub operator: Option<String>,
    /// Seconds to wait for the running `autoforge serve` to decide.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub wait: u64,
}

/// Options of `autoforge stop`.
#[derive(Debug, Args)]
pub struct StopArgs {
    /// The run's id.
    pub run: i64,
    /// The operator name to record [default: $USER].
    #[arg(long = "as", value_name = "NAME")]
    pub operator: Option<String>,
    /// Seconds to wait for the running `autoforge serve` to decide.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub wait: u64,
}

/// Options of `autoforge doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also launch every agent profile once in a throw-away repository
    /// (real model calls: billable).
    #[arg(long)]
    pub probe: bool,
}

/// Options of `autoforge demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Write a JSON report (runs, effects, GitHub requests, duplicates, wall time).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Leave fakehub, the controller and the state running until Ctrl-C.
    #[arg(long)]
    pub keep: bool,
    /// Give up (exit 1) when the EPIC is not DONE after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub timeout: u64,
    /// Let a real coding-agent CLI do the work, with the profiles shipped
    /// in autoforge.example.toml and your own key from the environment
    /// (real model calls: billable).
    #[arg(long, value_name = "CLI", conflicts_with = "config")]
    pub agents: Option<crate::demo::real_agents::RealCli>,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration (file and AUTOFORGE_* variables); print
    /// every problem and exit 1 if there is any.
    Check {
        /// File to check instead of the one --config or the default search picks.
        file: Option<PathBuf>,
    },
    /// Print the JSON Schema of autoforge.toml.
    Schema,
}

/// Runs the parsed command line. Problems already shown to the user come back
/// as a failing exit code; unexpected ones as an error for `main` to print.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        CliCommand::Config(ConfigCommand::Schema) => config_cmd::schema(),
        CliCommand::Config(ConfigCommand::Check { file }) => {
            init_default_logging(&cli.global)?;
            Ok(config_cmd::check(&cli.global, file.as_deref()))
        }
        CliCommand::Migrate => {
            let config = load_config_and_init_logging(&cli.global)?;
            migrate_cmd::run(&config)
        }
        CliCommand::Serve => {
            let config = load_config_and_init_logging(&cli.global)?;
            serve_cmd::run(&config)
        }
        CliCommand::Demo(args) => demo_cmd::run(&cli.global, args),
        CliCommand::Status(args) => runs_cmd::status(&operator_config(&cli.global)?, args),
        CliCommand::Runs(RunsCommand::List(args)) => {
            runs_cmd::list(&operator_config(&cli.global)?, args)
        }
        CliCommand::Runs(RunsCommand::Show(args)) => {
            runs_cmd::show(&operator_config(&cli.global)?, args)
        }
        CliCommand::Unblock(args) => operator_cmd::unblock(&operator_config(&cli.global)?, args),
        CliCommand::Stop(args) => operator_cmd::stop(&operator_config(&cli.global)?, args),
        CliCommand::Doctor(args) => {
            logging::init(DOCTOR_LOG_FILTER, LogFormat::Auto, cli.global.verbosity())?;
            doctor_cmd::run(&cli.global, args)
        }
        CliCommand::Setup(args) => {
            let config = load_config_and_init_logging(&cli.global)?;
            setup_cmd::run(&config, args)
        }
    }
}

/// The operator commands print their own answer on stdout; logs (on
/// stderr) say only what went wrong unless `-v` asks for more.
fn operator_config(global: &GlobalArgs) -> anyhow::Result<Config> {
    let env = Environment::from_process();
    let config = load_config(global, &env)?;
    logging::init(DOCTOR_LOG_FILTER, LogFormat::Auto, global.verbosity())?;
    Ok(config)
}

/// The doctor prints its own report; logs only say what went wrong unless
/// `-v` asks for more.
const DOCTOR_LOG_FILTER: &str = "warn";

/// The start-up sequence of every command that needs the configuration:
/// load it from the process environment and the located file, set up
/// logging from it, and log its warnings.
pub fn load_config_and_init_logging(global: &GlobalArgs) -> anyhow::Result<Config> {
    let env = Environment::from_process();
    let config = load_config(global, &env)?;
    logging::init(
        &config.settings.logging.filter,
        config.settings.logging.format,
        global.verbosity(),
    )?;
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    Ok(config)
}

/// Loads the configuration the global options point at.
pub fn load_config(global: &GlobalArgs, env: &Environment) -> anyhow::Result<Config> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let file = config::locate_file(global.config.as_deref(), env, &cwd);
    Ok(config::load(
        file.as_deref(),
        global.state_dir.as_deref(),
        env,
    )?)
}

/// Logging for commands that run before (or without) a valid configuration.
fn init_default_logging(global: &GlobalArgs) -> anyhow::Result<()> {
    let defaults = config::LoggingSettings::default();
    logging::init(&defaults.filter, LogFormat::Auto, global.verbosity())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_options_are_accepted_after_the_subcommand() {
        let cli = Cli::try_parse_from([
            "autoforge",
            "config",
            "check",
            "--config",
            "a.toml",
            "--state-dir",
            "/s",
            "-vv",
        ])
        .expect("parses");
        assert_eq!(cli.global.config, Some(PathBuf::from("a.toml")));
        assert_eq!(cli.global.state_dir, Some(PathBuf::from("/s")));
        assert_eq!(cli.global.verbosity(), 2);
    }

    #[test]
    fn quiet_lowers_verbosity_and_conflicts_with_verbose() {
        let cli = Cli::try_parse_from(["autoforge", "-qq", "config", "schema"]).expect("parses");
        assert_eq!(cli.global.verbosity(), -2);
        assert!(Cli::try_parse_from(["autoforge", "-v", "-q", "config", "schema"]).is_err());
    }

    #[test]
    fn demo_takes_a_report_keep_and_timeout_with_a_ten_minute_default() {
        let cli = Cli::try_parse_from(["autoforge", "demo"]).expect("parses");
        assert!(matches!(
            cli.command,
            CliCommand::Demo(DemoArgs {
                report: None,
                keep: false,
                timeout: 600,
                agents: None,
            })
        ));
        let cli = Cli::try_parse_from([
            "autoforge",
            "demo",
            "--report",
            "r.json",
            "--keep",
            "--timeout",
            "30",
        ])
        .expect("parses");
        assert!(matches!(
            cli.command,
            CliCommand::Demo(DemoArgs { report: Some(ref r), keep: true, timeout: 30, agents: None }) if r == &PathBuf::from("r.json")
        ));
    }

    #[test]
    fn demo_agents_names_one_of_three_clis_and_excludes_a_config_file() {
        use crate::demo::real_agents::RealCli;
        let cli = Cli::try_parse_from(["autoforge", "demo", "--agents", "codex"]).expect("parses");
        assert!(matches!(
            cli.command,
            CliCommand::Demo(DemoArgs {
                agents: Some(RealCli::Codex),
                ..
            })
        ));
        assert!(Cli::try_parse_from(["autoforge", "demo", "--agents", "gemini"]).is_err());
        let both = [
            "autoforge",
            "demo",
            "--agents",
            "claude",
            "--config",
            "a.toml",
        ];
        assert!(Cli::try_parse_from(both).is_err());
    }

    #[test]
    fn doctor_takes_json_and_probe() {
        let cli =
            Cli::try_parse_from(["autoforge", "doctor", "--json", "--probe"]).expect("parses");
        assert!(matches!(
            cli.command,
            CliCommand::Doctor(DoctorArgs {
                json: true,
                probe: true
            })
        ));
    }

    #[test]
    fn check_takes_an_optional_file() {
        let cli = Cli::try_parse_from(["autoforge", "config", "check", "x.toml"]).expect("parses");
        assert!(matches!(
            cli.command,
            CliCommand::Config(ConfigCommand::Check { file: Some(ref f) }) if f == &PathBuf::from("x.toml")
        ));
    }
}
