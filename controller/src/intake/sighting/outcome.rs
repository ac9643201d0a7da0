//! What each kind of sighting writes: the run it concerns, the signal it
//! queues, the record it leaves, and the permission read it needs first.

use autoforge_journal::{IssueNumber, Journal};
use serde_json::json;

use super::Sighting;
use super::decisions::{plan_commands, plan_human_review, plan_removal, plan_trigger};
use super::keys::predates;
use crate::github::GitHubApi;
use crate::intake::access::GitHubAccess;
use crate::intake::answering::{answer_to, plan_without_run};
use crate::intake::entries::{ChangeEntries, Entry};
use crate::intake::signal::RunSignal;

/// Works out what `sighting` does. `None`: it concerns no run and needs no
/// record (e.g. a comment on an issue without an active run).
///
/// Long by design: one short arm per kind of sighting, so every kind's
/// handling is read in one place.
pub async fn entries_for(
    sighting: &Sighting,
    journal: &Journal,
    access: &GitHubAccess,
    api: &GitHubApi,
) -> anyhow::Result<Option<ChangeEntries>> {
    let key = sighting.key();
    let run_of = |repository: &str, number: IssueNumber| {
        let repository = repository.to_owned();
        async move { anyhow::Ok(journal.active_run_for_object(&repository, number).await?) }
    };
    let change = match sighting {
        Sighting::TriggerLabeled {
            repository,
            issue,
            actor,
            ..
        } => {
            // A labelling seen before costs no permission read.
            if journal.observed_change(&key).await?.is_some() {
                return Ok(Some(ChangeEntries::new(key, "seen")));
            }
            plan_trigger(key, repository, *issue, actor, journal, access, api).await?
        }
        Sighting::TriggerRemoved {
            repository,
            issue,
            actor,
            removal,
        } => {
            let Some(run_id) = run_of(repository, *issue).await? else {
                return Ok(None);
            };
            // A removal acted on before costs no permission read.
            for seen in [format!("{key}:run-{run_id}"), format!("{key}:{removal}")] {
                if journal.observed_change(&seen).await?.is_some() {
                    return Ok(Some(ChangeEntries::new(seen, "seen")));
                }
            }
            // A removal that happened before the labelling that started
            // this run (delivered late, or seen again) ended an earlier
            // run; it must not stop this one.
            let start = journal.run_start_key(run_id).await?;
            if start
                .as_deref()
                .is_some_and(|start| predates(removal, start))
            {
                let detail = json!({"issue": issue, "removal": removal, "run_started_by": start});
                return Ok(Some(
                    ChangeEntries::new(
                        format!("{key}:{removal}"),
                        "removal before the run's labelling",
                    )
                    .with(Entry::Audit {
                        run_id: Some(run_id),
                        kind: "trigger_removal_predates_run".to_owned(),
                        detail,
                    }),
                ));
            }
            let decision = match actor {
                Some(actor) => Some(access.decide(api, repository, actor).await?),
                None => None,
            };
            plan_removal(key, run_id, *issue, actor.as_ref(), removal, decision)?
        }
        Sighting::IssueClosed {
            repository, issue, ..
        } => {
            let Some(run_id) = run_of(repository, *issue).await? else {
                return Ok(None);
            };
            ChangeEntries::signal(key, run_id, RunSignal::IssueClosed { issue: *issue })
        }
        Sighting::IssueReopened {
            repository, issue, ..
        } => {
            let Some(run_id) = run_of(repository, *issue).await? else {
                return Ok(None);
            };
            ChangeEntries::signal(key, run_id, RunSignal::IssueReopened { issue: *issue })
        }
        Sighting::IssueEdited {
            repository,
            issue,
            editor,
            ..
        } => {
            let Some(run_id) = run_of(repository, *issue).await? else {
                return Ok(None);
            };
            let decision = access.decide(api, repository, editor).await?;
            // The run's own writes (an EPIC's roadmap) are its text already.
            if decision.is_the_app_itself() {
                return Ok(Some(ChangeEntries::new(key, "own edit")));
            }
            let signal = RunSignal::IssueEdited {
                issue: *issue,
                editor: Some(editor.login.clone()),
                by_operator: decision.is_allowed(),
            };
            ChangeEntries::signal(key, run_id, signal)
        }
        Sighting::Commands {
            repository,
            issue,
            comment_id,
            actor,
            commands,
            ..
        } => {
            if commands.is_empty() {
                return Ok(None);
            }
            if journal.observed_change(&key).await?.is_some() {
                return Ok(Some(ChangeEntries::new(key, "seen")));
            }
            let run_id = run_of(repository, *issue).await?;
            let decision = access.decide(api, repository, actor).await?;
            let Some(run_id) = run_id else {
                // No run to act on: the comment is answered outside any run.
                let to = answer_to(&key, repository, api, *issue);
                let label = &access.trigger_label;
                let change = plan_without_run(
                    key.clone(),
                    to,
                    *comment_id,
                    actor,
                    &decision,
                    label,
                    commands,
                )?;
                return Ok(Some(change));
            };
            plan_commands(key, run_id, *issue, *comment_id, actor, &decision, commands)?
        }
        Sighting::PrHead {
            repository,
            pr,
            head_sha,
        } => {
            let Some(run_id) = run_of(repository, pr.as_issue()).await? else {
                return Ok(None);
            };
            let signal = RunSignal::PrHeadMoved {
                pr: *pr,
                head_sha: head_sha.clone(),
            };
            ChangeEntries::signal(key, run_id, signal)
        }
        Sighting::PrClosed {
            repository,
            pr,
            merged,
            merge_commit_sha,
            ..
        } => {
            let Some(run_id) = run_of(repository, pr.as_issue()).await? else {
                return Ok(None);
            };
            let signal = RunSignal::PrClosed {
                pr: *pr,
                merged: *merged,
                merge_commit_sha: merge_commit_sha.clone(),
            };
            ChangeEntries::signal(key, run_id, signal)
        }
        Sighting::PrReopened { repository, pr, .. } => {
            let Some(run_id) = run_of(repository, pr.as_issue()).await? else {
                return Ok(None);
            };
            ChangeEntries::signal(key, run_id, RunSignal::PrReopened { pr: *pr })
        }
        Sighting::PrBase {
            repository,
            pr,
            new_base,
        } => {
            let Some(run_id) = run_of(repository, pr.as_issue()).await? else {
                return Ok(None);
            };
            let signal = RunSignal::PrBaseChanged {
                pr: *pr,
                new_base: new_base.clone(),
            };
            ChangeEntries::signal(key, run_id, signal)
        }
        Sighting::ChecksCompleted {
            repository,
            head_sha,
            pull_requests,
            ..
        } => {
            let mut change = ChangeEntries::new(key, "signal");
            for pr in pull_requests {
                if let Some(run_id) = run_of(repository, pr.as_issue()).await? {
                    change = change.with(Entry::Signal {
                        run_id,
                        suffix: format!(":pr-{pr}"),
                        signal: RunSignal::ChecksCompleted {
                            pr: *pr,
                            head_sha: head_sha.clone(),
                        },
                    });
                }
            }
            if change.entries.is_empty() {
                return Ok(None);
            }
            change
        }
        Sighting::StatusReported {
            repository,
            head_sha,
            ..
        } => {
            let mut change = ChangeEntries::new(key, "signal");
            for (run_id, pr) in journal.active_runs_with_pull_requests(repository).await? {
                change = change.with(Entry::Signal {
                    run_id,
                    suffix: format!(":pr-{pr}"),
                    signal: RunSignal::ChecksCompleted {
                        pr,
                        head_sha: head_sha.clone(),
                    },
                });
            }
            if change.entries.is_empty() {
                return Ok(None);
            }
            change
        }
        Sighting::PrReviewed {
            repository,
            pr,
            head_sha,
            changes_requested,
            ..
        } => {
            let Some(run_id) = run_of(repository, pr.as_issue()).await? else {
                return Ok(None);
            };
            let signal = RunSignal::PrReviewed {
                pr: *pr,
                head_sha: head_sha.clone(),
            };
            let change = ChangeEntries::signal(key, run_id, signal);
            match changes_requested {
                // A review acted on before costs no permission read.
                Some(_) if journal.observed_change(&change.key).await?.is_some() => {
                    return Ok(Some(ChangeEntries::new(change.key, "seen")));
                }
                Some(by) => {
                    let decision = access.decide(api, repository, &by.author).await?;
                    plan_human_review(change, run_id, *pr, by, &decision)
                }
                None => change,
            }
        }
    };
    Ok(Some(change))
}
