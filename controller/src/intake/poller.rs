//! The poller: the backstop for missed webhooks (SPEC §14). Every
//! `poll.interval_seconds` it reads, with conditional requests (a `304`
//! costs no rate limit, so an unchanged pass is free), the App's
//! installations and their repositories, the open issues carrying the
//! trigger label in each watched repository and the issue, comments and
//! pull request of each active run. What it sees goes through the same
//! planner as webhooks with the same dedupe keys, so a change seen both
//! ways acts once. As a GitHub App it also asks GitHub to redeliver failed
//! deliveries our inbox lacks, listing the deliveries only back to the
//! newest one its previous pass saw.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use autoforge_journal::{EventSource, IssueNumber, Journal, PullNumber, Run, RunFilter};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use tokio::sync::watch;

use super::access::{GitHubAccess, WatchedRepository, repo_name};
use super::entries::record;
use super::held_budgets::HeldBudgets;
use super::sighting::{
    Sighting, body_digest, comment_key, comment_key_prefix, entries_for, labeling_of_event,
};
use super::signal::RunListener;
use crate::commands::{is_own_login, parse_commands};
use crate::github::{GitHubApi, HookDelivery, IssueComment, writes};

/// Redelivery requests per pass, so a long outage does not turn into a
/// burst of hundreds of App requests.
const MAX_REDELIVERIES_PER_PASS: usize = 20;
const MAX_ACTIVE_RUNS_POLLED: i64 = 1_000;

/// The poller's dependencies.
pub struct Poller {
    pub journal: Journal,
    pub access: GitHubAccess,
    pub interval: Duration,
    /// Hook delivery ids we already asked GitHub to redeliver.
    redelivered: HashSet<u64>,
    /// The newest hook delivery id a pass listed: the next pass reads the
    /// listing only back to it.
    newest_delivery: Option<u64>,
    /// Failed deliveries a pass found but did not get to (the per-pass
    /// bound, or an error): the next pass takes them first.
    deferred: Vec<HookDelivery>,
    /// This process's run driver, told about the run events a pass stores
    /// (see [`Poller::with_notifier`]); without one the driver finds them
    /// at its own pace.
    notifier: Option<Arc<dyn RunListener>>,
    /// Repositories whose labelled issues were all handled in an earlier
    /// pass: while their listing answers `304`, nothing there is new, so the
    /// per-issue event and permission reads are skipped.
    labelled_scan_done: HashSet<String>,
    /// The installations the previous pass saw suspended: a change (a
    /// suspension or unsuspension whose webhook was lost) tells the driver
    /// to rebuild its map of served repositories.
    suspended: Option<Vec<u64>>,
}

/// What one pass did, for logs and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassReport {
    pub repositories: usize,
    pub runs: usize,
    pub changes_applied: usize,
    pub redeliveries: usize,
    /// Answers outside any run posted in this pass.
    pub answers_posted: usize,
}

#[derive(Debug, Deserialize)]
struct PolledIssue {
    state: String,
    closed_at: Option<String>,
    #[serde(default)]
    labels: Vec<crate::github::Label>,
}

impl Poller {
    pub fn new(journal: Journal, access: GitHubAccess, interval: Duration) -> Poller {
        Poller {
            journal,
            access,
            interval,
            redelivered: HashSet::new(),
            newest_delivery: None,
            deferred: Vec::new(),
            labelled_scan_done: HashSet::new(),
            notifier: None,
            suspended: None,
        }
    }

    /// Wakes `notifier`'s driver (and stops a run's agent) when a pass
    /// stores run events, as the dispatcher does.
    pub fn with_notifier(mut self, notifier: Arc<dyn RunListener>) -> Poller {
        self.notifier = Some(notifier);
        self
    }

    /// Polls until `shutdown` turns true, once right away and then every interval.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        while !*shutdown.borrow() {
            match self.pass().await {
                Ok(report) => tracing::debug!(?report, "poll pass finished"),
                Err(error) => tracing::warn!(error = format!("{error:#}"), "poll pass failed"),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.interval) => {}
                _ = shutdown.changed() => {}
            }
        }
        tracing::info!("poller stopped");
    }

    /// One full pass. A failure in one repository or run is logged and the
    /// pass goes on with the next.
    pub async fn pass(&mut self) -> anyhow::Result<PassReport> {
        let mut report = PassReport::default();
        let served = self.access.served().await?;
        self.notice_suspensions(&served.suspended);
        let watched = served.repositories;
        report.repositories = watched.len();
        let mut held = HeldBudgets::default();
        for repository in &watched {
            if held.skips(&repository.api) {
                continue;
            }
            match self.poll_labelled_issues(repository).await {
                Ok(applied) => report.changes_applied += applied,
                Err(error) if held.notice(&repository.api, &error) => {}
                Err(error) => tracing::warn!(
                    repository = %repository.full_name,
                    error = format!("{error:#}"),
                    "polling labelled issues failed"
                ),
            }
        }
        // The backstop for answers an outage or a crash left unsent.
        report.answers_posted =
            super::answering::send_pending_answers(&self.journal, &self.access).await;
        let apis: HashMap<&str, &GitHubApi> = watched
            .iter()
            .map(|w| (w.full_name.as_str(), &w.api))
            .collect();
        let runs = self
            .journal
            .list_runs(RunFilter::Active, MAX_ACTIVE_RUNS_POLLED)
            .await?;
        crate::metrics::active_runs(runs.iter().map(|run| run.phase.as_str()));
        for run in &runs {
            let Some(api) = apis.get(run.repository.as_str()) else {
                continue;
            };
            if held.skips(api) {
                continue;
            }
            report.runs += 1;
            match self.poll_run(run, api).await {
                Ok(applied) => report.changes_applied += applied,
                Err(error) if held.notice(api, &error) => {}
                Err(error) => tracing::warn!(
                    run = %run.id,
                    error = format!("{error:#}"),
                    "polling a run failed"
                ),
            }
        }
        held.log();
        if self.access.is_app() {
            match self.redeliver_failed().await {
                Ok(count) => report.redeliveries = count,
                Err(error) => {
                    tracing::warn!(error = format!("{error:#}"), "redelivery failed");
                }
            }
        }
        Ok(report)
    }

    /// Tells the driver when the set of suspended installations differs
    /// from the previous pass's: the backstop for a lost `installation`
    /// webhook, whichever way the suspension went.
    fn notice_suspensions(&mut self, suspended: &[super::Suspension]) {
        let mut now: Vec<u64> = suspended.iter().map(|s| s.installation_id).collect();
        now.sort_unstable();
        let previous = self.suspended.replace(now.clone());
        if previous.is_some_and(|previous| previous != now)
            && let Some(notifier) = &self.notifier
        {
            tracing::info!(suspended = ?now, "suspended installations changed");
            notifier.repositories_changed();
        }
    }

    async fn poll_labelled_issues(
        &mut self,
        repository: &WatchedRepository,
    ) -> anyhow::Result<usize> {
        let listing = repository
            .api
            .open_issues_with_label(&repository.name, &self.access.trigger_label)
            .await?;
        let unchanged = !listing.is_modified();
        if unchanged && self.labelled_scan_done.contains(&repository.full_name) {
            return Ok(0);
        }
        // Marked done only once every issue was handled, so a failure half
        // way is retried next pass even if the listing is then unchanged.
        self.labelled_scan_done.remove(&repository.full_name);
        let issues = listing.into_inner();
        let mut applied = 0;
        for issue in issues.iter().filter(|issue| !issue.is_pull_request()) {
            let number = issue.number;
            if self
                .journal
                .active_run_for_object(&repository.full_name, number)
                .await?
                .is_some()
            {
                continue;
            }
            let Some(labeling) = self
                .access
                .latest_trigger_labeling(&repository.api, &repository.full_name, issue.number)
                .await?
            else {
                continue;
            };
            let Some(actor) = labeling.actor.as_ref().map(|account| account.actor()) else {
                continue;
            };
            let sighting = Sighting::TriggerLabeled {
                repository: repository.full_name.clone(),
                issue: issue.number,
                actor,
                labeling: labeling_of_event(labeling.id),
            };
            applied += self.act(&sighting, &repository.api).await?;
        }
        self.labelled_scan_done.insert(repository.full_name.clone());
        Ok(applied)
    }

    async fn poll_run(&self, run: &Run, api: &GitHubApi) -> anyhow::Result<usize> {
        let repo = repo_name(&run.repository)?;
        let issue = run.current_issue;
        let mut applied = 0;
        let polled: PolledIssue = api
            .get_conditional(&repo.api_path(&format!("/issues/{issue}")))
            .await?
            .into_inner();
        // In an EPIC the label may sit on the EPIC rather than on the
        // current child, so only the removal webhook stops such runs.
        if polled.state == "closed" {
            let sighting = Sighting::IssueClosed {
                repository: run.repository.clone(),
                issue,
                closed_at: polled.closed_at.unwrap_or_default(),
            };
            applied += self.act(&sighting, api).await?;
        } else if run.epic.is_none()
            && !polled
                .labels
                .iter()
                .any(|label| label.name.eq_ignore_ascii_case(&self.access.trigger_label))
        {
            let removal = self
                .access
                .latest_trigger_removal(api, &run.repository, issue)
                .await?;
            let sighting = Sighting::TriggerRemoved {
                repository: run.repository.clone(),
                issue,
                actor: removal
                    .as_ref()
                    .and_then(|event| event.actor.as_ref())
                    .map(|account| account.actor()),
                // Without an event the removal is known only by the run.
                removal: removal.map_or_else(
                    || format!("unlabeled-run-{}", run.id.0),
                    |event| labeling_of_event(event.id),
                ),
            };
            applied += self.act(&sighting, api).await?;
        }
        applied += self.poll_comments(run, api, issue).await?;
        if let Some(pr) = self.journal.run_pull_request(run.id).await? {
            applied += self.poll_comments(run, api, pr.as_issue()).await?;
            applied += self.poll_pull_request(run, api, pr).await?;
        }
        Ok(applied)
    }

    /// Comments written since the run started. Only unedited comments the
    /// journal has not seen count; an edited one is left to its webhook,
    /// since the poller can tell neither what the edit added nor who made
    /// it.
    async fn poll_comments(
        &self,
        run: &Run,
        api: &GitHubApi,
        number: IssueNumber,
    ) -> anyhow::Result<usize> {
        let repo = repo_name(&run.repository)?;
        let comments = api
            .issue_comments_if_changed(&repo, number)
            .await?
            .into_inner();
        let mut applied = 0;
        for comment in comments
            .iter()
            .filter(|c| self.is_human_after(c, run.created_at))
        {
            let key = comment_key(
                &run.repository,
                comment.id,
                &comment.updated_at,
                &body_digest(&comment.body),
            );
            if self.journal.observed_change(&key).await?.is_some() {
                continue;
            }
            // A comment's commands are the author's only while nobody else
            // has edited it, and the REST comment names its author, never
            // its editor: an edit is left to its webhook (GitHub's
            // redelivery brings back a lost one), which names the editor.
            // Edited shows either as a version seen before or as a change
            // time later than the creation (to the second, as GitHub
            // gives both).
            let edited = comment.updated_at != comment.created_at;
            let prefix = comment_key_prefix(&run.repository, comment.id);
            if edited || self.journal.observed_change_with_prefix(&prefix).await? {
                tracing::debug!(
                    comment = comment.id,
                    "an edited comment is left to its webhook: the poller cannot tell who edited it"
                );
                continue;
            }
            let Some(user) = &comment.user else {
                continue;
            };
            let sighting = Sighting::Commands {
                repository: run.repository.clone(),
                issue: number,
                comment_id: comment.id,
                updated_at: comment.updated_at.clone(),
                body_digest: body_digest(&comment.body),
                actor: user.actor(),
                commands: parse_commands(&comment.body),
            };
            applied += self.act(&sighting, api).await?;
        }
        Ok(applied)
    }

    fn is_human_after(&self, comment: &IssueComment, since: DateTime<Utc>) -> bool {
        let created = DateTime::parse_from_rfc3339(&comment.created_at)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or(since);
        // Second resolution on GitHub's side: keep the second the run started.
        if created < since - chrono::Duration::seconds(1) {
            return false;
        }
        let via_app = comment.performed_via_github_app.is_some();
        let bot = comment.user.as_ref().is_none_or(|user| {
            user.kind == "Bot"
                || user.login.to_ascii_lowercase().ends_with("[bot]")
                || is_own_login(&user.login, &self.access.own_login)
        });
        !via_app && !bot
    }

    async fn poll_pull_request(
        &self,
        run: &Run,
        api: &GitHubApi,
        pr: PullNumber,
    ) -> anyhow::Result<usize> {
        let repo = repo_name(&run.repository)?;
        let polled = api.pull_request_if_changed(&repo, pr).await?.into_inner();
        let sighting = if polled.state == "closed" {
            let merged = polled.merged.unwrap_or(polled.merged_at.is_some());
            Sighting::PrClosed {
                repository: run.repository.clone(),
                pr,
                merged,
                merge_commit_sha: if merged {
                    polled.merge_commit_sha.map(|sha| sha.to_string())
                } else {
                    None
                },
                closed_at: polled.closed_at.unwrap_or_default(),
            }
        } else {
            Sighting::PrHead {
                repository: run.repository.clone(),
                pr,
                head_sha: polled.head.sha.to_string(),
            }
        };
        self.act(&sighting, api).await
    }

    /// Plans and applies one sighting; 1 when it changed the journal.
    async fn act(&self, sighting: &Sighting, api: &GitHubApi) -> anyhow::Result<usize> {
        let Some(change) = entries_for(sighting, &self.journal, &self.access, api).await? else {
            return Ok(0);
        };
        let applied = record(&self.journal, Some(&change), EventSource::Poll, None).await?;
        if let (Some(notifier), super::entries::Recorded::Done { .. }) = (&self.notifier, applied) {
            super::dispatcher::notify_driver(&self.journal, notifier.as_ref(), &change).await;
        }
        Ok(usize::from(matches!(
            applied,
            super::entries::Recorded::Done { .. }
        )))
    }

    /// Asks GitHub to redeliver recent deliveries that failed and never
    /// reached our inbox, each at most once per process. Only deliveries
    /// newer than the last pass's newest are listed (conditionally, so an
    /// unchanged listing costs nothing).
    async fn redeliver_failed(&mut self) -> anyhow::Result<usize> {
        let app = self.access.client.app()?;
        let mut deliveries = app
            .hook_deliveries_since(self.newest_delivery)
            .await
            .context("cannot list the App's hook deliveries")?;
        if let Some(newest) = deliveries.iter().map(|d| d.id).max() {
            self.newest_delivery = Some(self.newest_delivery.map_or(newest, |n| n.max(newest)));
        }
        // Listed newest first; what an earlier pass left comes after.
        deliveries.append(&mut self.deferred);
        let mut queue: std::collections::VecDeque<HookDelivery> =
            redelivery_candidates(&deliveries)
                .into_iter()
                .filter(|d| !self.redelivered.contains(&d.id))
                .cloned()
                .collect();
        let mut sent = 0;
        while let Some(delivery) = queue.pop_front() {
            if sent >= MAX_REDELIVERIES_PER_PASS {
                self.deferred.push(delivery);
                continue;
            }
            let outcome = self.redeliver_one(&app, &delivery).await;
            match outcome {
                Ok(asked) => sent += usize::from(asked),
                Err(error) => {
                    self.deferred.push(delivery);
                    self.deferred.extend(queue);
                    return Err(error);
                }
            }
        }
        Ok(sent)
    }

    /// Asks for one redelivery unless the inbox holds the delivery; whether
    /// it asked.
    async fn redeliver_one(
        &mut self,
        app: &GitHubApi,
        delivery: &HookDelivery,
    ) -> anyhow::Result<bool> {
        if self.journal.get_delivery(&delivery.guid).await?.is_some() {
            return Ok(false);
        }
        writes::redeliver_hook_delivery(app, delivery.id)
            .await
            .with_context(|| format!("cannot redeliver delivery {}", delivery.guid))?;
        tracing::info!(guid = %delivery.guid, "asked GitHub to redeliver a failed delivery");
        self.redelivered.insert(delivery.id);
        Ok(true)
    }
}

/// The newest attempt of each delivery GUID none of whose attempts succeeded.
pub fn redelivery_candidates(deliveries: &[HookDelivery]) -> Vec<&HookDelivery> {
    let succeeded: HashSet<&str> = deliveries
        .iter()
        .filter(|d| (200..300).contains(&d.status_code))
        .map(|d| d.guid.as_str())
        .collect();
    let mut seen = HashSet::new();
    deliveries
        .iter()
        .filter(|d| !succeeded.contains(d.guid.as_str()))
        .filter(|d| seen.insert(d.guid.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(id: u64, guid: &str, status_code: u16) -> HookDelivery {
        HookDelivery {
            id,
            guid: guid.to_owned(),
            delivered_at: "2026-01-01T00:00:00Z".to_owned(),
            redelivery: false,
            status: String::new(),
            status_code,
            event: "issues".to_owned(),
            action: None,
            installation_id: None,
            repository_id: None,
        }
    }

    #[test]
    fn only_guids_without_a_successful_attempt_are_redelivered_once() {
        let deliveries = [
            attempt(5, "b", 502),
            attempt(4, "a", 202),
            attempt(3, "a", 502),
            attempt(2, "b", 0),
            attempt(1, "c", 200),
        ];
        let ids: Vec<u64> = redelivery_candidates(&deliveries)
            .iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(ids, [5]);
    }
}
