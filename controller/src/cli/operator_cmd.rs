//! `autoforge unblock RUN --reason TEXT` and `autoforge stop RUN`: queue
//! the command for the run's driver (which decides it exactly like the
//! comment command), then wait a little for the decision and say what it
//! was. Nothing here writes to GitHub; the run's effects do.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use autoforge_journal::{Journal, JournalError, NewOperatorCommand, RunId};

use super::runs_cmd::with_journal;
use super::{StopArgs, UnblockArgs};
use crate::commands::{LocalCommand, LocalCommandEvent, MAX_UNBLOCK_REASON_CHARS};
use crate::config::Config;

/// How often the decision is looked for while waiting.
const POLL: Duration = Duration::from_millis(250);

pub(super) fn unblock(config: &Config, args: &UnblockArgs) -> anyhow::Result<ExitCode> {
    let reason = args.reason.trim();
    if reason.is_empty() || reason.chars().count() > MAX_UNBLOCK_REASON_CHARS {
        eprintln!(
            "error: --reason needs between 1 and {MAX_UNBLOCK_REASON_CHARS} characters of text"
        );
        return Ok(ExitCode::FAILURE);
    }
    let command = LocalCommand::Unblock {
        actor: operator_name(args.operator.as_deref()),
        reason: reason.to_owned(),
    };
    give(config, RunId(args.run), command, args.wait)
}

pub(super) fn stop(config: &Config, args: &StopArgs) -> anyhow::Result<ExitCode> {
    let command = LocalCommand::Stop {
        actor: operator_name(args.operator.as_deref()),
    };
    give(config, RunId(args.run), command, args.wait)
}

/// `--as NAME`, else the login name of whoever runs the command.
fn operator_name(given: Option<&str>) -> String {
    given
        .map(str::to_owned)
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| "local-operator".to_owned())
}

fn give(
    config: &Config,
    run: RunId,
    command: LocalCommand,
    wait_seconds: u64,
) -> anyhow::Result<ExitCode> {
    let verb = command.verb();
    let reason = match &command {
        LocalCommand::Unblock { reason, .. } => Some(reason.clone()),
        LocalCommand::Stop { .. } => None,
    };
    let actor = command.actor().to_owned();
    let queued = NewOperatorCommand {
        run_id: run,
        actor: command.actor().to_owned(),
        command: verb.to_owned(),
        reason,
        event: serde_json::to_value(LocalCommandEvent {
            local_command: command,
        })
        .context("cannot serialise the command")?,
    };
    with_journal(config, async |journal| {
        let queued = match journal.queue_operator_command(&queued).await {
            Ok(queued) => queued,
            Err(JournalError::InvalidInput(why)) => {
                eprintln!("refused: {why}");
                return Ok(ExitCode::FAILURE);
            }
            Err(error) => return Err(error).context("cannot queue the command"),
        };
        println!("queued `{verb}` for run {run} as {actor}");
        let deadline = Instant::now() + Duration::from_secs(wait_seconds);
        while Instant::now() < deadline {
            if journal.run_event_consumed(queued.run_event).await? {
                return report(journal, run, verb).await;
            }
            tokio::time::sleep(POLL).await;
        }
        println!(
            "no driver has decided it yet; `autoforge runs show {run}` shows the outcome once \
             `autoforge serve` has"
        );
        Ok(ExitCode::SUCCESS)
    })
}

/// After the driver decided: the run's phase, or the refusal it recorded.
async fn report(journal: &Journal, run: RunId, verb: &str) -> anyhow::Result<ExitCode> {
    let events = journal.list_audit_events(run).await?;
    let since_command = events
        .iter()
        .rposition(|e| e.kind == "operator_command")
        .map_or(&events[..], |at| &events[at + 1..]);
    let refusal = since_command.iter().find(|e| {
        e.kind == "event_refused"
            && e.detail.get("event").and_then(|v| v.as_str()) == Some("local_operator_command")
    });
    if let Some(refused) = refusal {
        println!("refused: {}", refused.detail["refusal"]);
        return Ok(ExitCode::FAILURE);
    }
    let phase = journal
        .get_run(run)
        .await?
        .map_or_else(|| "?".to_owned(), |r| r.phase);
    println!("accepted `{verb}`: run {run} is now {phase}");
    Ok(ExitCode::SUCCESS)
}
