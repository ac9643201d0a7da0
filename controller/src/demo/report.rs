//! The demo's JSON report (`--report FILE`): the final phase of every run,
//! the effects by kind and stage, fakehub's request log by route, the
//! number of duplicated controller objects, and the wall time.
//!
//! Duplicates are counted from fakehub's own state, not from the journal:
//! every issue, pull request and comment body is scanned for controller
//! markers, and two objects carrying one marker identity (name and payload,
//! without the per-write nonce) are a duplicate write that the journal
//! exists to prevent.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use autoforge_journal::{Journal, RunFilter};
use serde::Serialize;
use serde_json::Value;

use crate::effects::markers::{self, MarkerName, Scan};

/// Everything `--report` writes.
#[derive(Debug, Serialize)]
pub struct DemoReport {
    /// How the demo ended: `done`, `blocked`, `failed`, `stopped`, `timeout`.
    pub outcome: String,
    pub runs: Vec<ReportedRun>,
    /// `kind → stage → count`.
    pub effects: BTreeMap<String, BTreeMap<String, u64>>,
    pub github_requests: RequestSummary,
    /// Agent launches of every run (relaunches included).
    pub agent_launches: i64,
    /// Objects beyond the first that share a marker identity; must be 0.
    pub duplicates: u64,
    /// The identities behind `duplicates`, for diagnosis.
    pub duplicated_identities: Vec<String>,
    /// Issues the controller created (follow-ups), by number.
    pub issues_created_by_controller: Vec<u64>,
    pub wall_seconds: f64,
}

#[derive(Debug, Serialize)]
pub struct ReportedRun {
    pub id: String,
    pub repository: String,
    pub epic: Option<i64>,
    /// The issue the run was on when it ended.
    pub issue: i64,
    pub phase: String,
    pub active: bool,
}

/// fakehub's request log, summarised.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct RequestSummary {
    pub total: u64,
    pub reads: u64,
    pub writes: u64,
    /// Requests made with the App's credentials (the controller), as
    /// opposed to the demo's operator seeding the world.
    pub by_controller: ReadWrite,
    /// `"METHOD route" → count`.
    pub by_route: BTreeMap<String, u64>,
    /// `"METHOD route" → count` of the controller's requests only.
    pub controller_by_route: BTreeMap<String, u64>,
    /// `"METHOD route" → rate-limit points` the controller's requests cost.
    pub controller_points_by_route: BTreeMap<String, u64>,
}

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct ReadWrite {
    pub reads: u64,
    pub writes: u64,
    /// Reads GitHub answered `304 Not Modified` (free of rate limit).
    pub not_modified: u64,
    /// Rate-limit points spent: every request but a `304` or a refusal.
    pub points: u64,
}

fn is_read(method: &str) -> bool {
    matches!(method, "GET" | "HEAD")
}

/// Summarises fakehub's request log.
pub fn summarize_requests(records: &[fakehub::world::RequestRecord]) -> RequestSummary {
    let mut summary = RequestSummary::default();
    for record in records {
        summary.total += 1;
        let read = is_read(&record.method);
        if read {
            summary.reads += 1;
        } else {
            summary.writes += 1;
        }
        let route = format!("{} {}", record.method, record.route);
        if matches!(record.token_kind.as_str(), "installation" | "app_jwt") {
            let mine = &mut summary.by_controller;
            if read {
                mine.reads += 1;
            } else {
                mine.writes += 1;
            }
            mine.not_modified += u64::from(record.status == 304);
            mine.points += record.cost;
            *summary
                .controller_by_route
                .entry(route.clone())
                .or_default() += 1;
            *summary
                .controller_points_by_route
                .entry(route.clone())
                .or_default() += record.cost;
        }
        *summary.by_route.entry(route).or_default() += 1;
    }
    summary
}

/// One object on fakehub whose body may carry markers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectRef {
    pub repository: String,
    /// The issue or pull request a comment sits on; `None` for an issue
    /// or pull request body.
    pub container: Option<u64>,
    /// `issue 4`, `pull 5`, `comment 17 on 4`.
    pub what: String,
}

/// Marker identities carried by more than one object, with those objects.
/// An identity is where the object lives (the repository, and for a
/// comment the issue or pull request it is on, which is where the
/// controller looks for it) plus the marker name and its payload without
/// the `write` nonce. A run that moves through an EPIC keeps one status
/// comment on each of its issues, so those are distinct identities. A
/// marker that cannot be read is ignored here (the controller blocks on
/// it where it matters).
pub fn duplicated_identities<'a>(
    objects: impl IntoIterator<Item = (ObjectRef, &'a str)>,
) -> BTreeMap<String, BTreeSet<ObjectRef>> {
    let mut holders: BTreeMap<String, BTreeSet<ObjectRef>> = BTreeMap::new();
    for (object, body) in objects {
        for name in MarkerName::ALL {
            let Scan::Found(found) = markers::scan(body, name) else {
                continue;
            };
            for marker in found {
                let mut payload = marker.payload.clone();
                payload.remove("write");
                let place = object
                    .container
                    .map_or_else(String::new, |number| format!("#{number} "));
                let identity = format!(
                    "{} {place}{} {}",
                    object.repository,
                    name.as_str(),
                    Value::Object(payload)
                );
                holders.entry(identity).or_default().insert(object.clone());
            }
        }
    }
    holders.retain(|_, objects| objects.len() > 1);
    holders
}

/// Every issue, pull request and comment body in fakehub's world.
fn world_bodies(hub: &fakehub::Handle) -> Vec<(ObjectRef, String)> {
    let world = hub.shared().lock();
    let mut bodies = Vec::new();
    let full_name = |repo: &fakehub::world::Repo| {
        let owner = world
            .users
            .get(&repo.owner_id)
            .map_or_else(|| repo.owner_id.to_string(), |user| user.login.clone());
        format!("{owner}/{}", repo.name)
    };
    for repo in world.repos.values() {
        let repository = full_name(repo);
        for issue in repo.issues.values() {
            let kind = if issue.pull.is_some() {
                "pull"
            } else {
                "issue"
            };
            bodies.push((
                ObjectRef {
                    repository: repository.clone(),
                    container: None,
                    what: format!("{kind} {}", issue.number),
                },
                issue.body.clone().unwrap_or_default(),
            ));
        }
    }
    for comment in world.comments.values() {
        let repository = world
            .repos
            .get(&comment.repo_id)
            .map_or_else(|| comment.repo_id.to_string(), full_name);
        bodies.push((
            ObjectRef {
                repository,
                container: Some(comment.issue_number),
                what: format!("comment {} on {}", comment.id, comment.issue_number),
            },
            comment.body.clone(),
        ));
    }
    bodies
}

/// Issues (not pull requests) authored by the App's bot, in number order.
fn issues_by(hub: &fakehub::Handle, bot_login: &str) -> Vec<u64> {
    let world = hub.shared().lock();
    let mut numbers: Vec<u64> = world
        .repos
        .values()
        .flat_map(|repo| repo.issues.values())
        .filter(|issue| issue.pull.is_none())
        .filter(|issue| {
            world
                .users
                .get(&issue.user_id)
                .is_some_and(|user| user.login == bot_login)
        })
        .map(|issue| issue.number)
        .collect();
    numbers.sort_unstable();
    numbers
}

/// Builds the report from the journal and fakehub.
pub async fn build(
    journal: &Journal,
    hub: &fakehub::Handle,
    bot_login: &str,
    outcome: &str,
    wall_seconds: f64,
) -> anyhow::Result<DemoReport> {
    let runs = journal
        .list_runs(RunFilter::All, 1000)
        .await
        .context("cannot list the runs")?;
    let mut effects: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for run in &runs {
        for effect in journal
            .list_effects(run.id)
            .await
            .context("cannot list a run's effects")?
        {
            *effects
                .entry(effect.kind.as_str().to_owned())
                .or_default()
                .entry(effect.stage.as_str().to_owned())
                .or_default() += 1;
        }
    }
    let duplicated = duplicated_identities(
        world_bodies(hub)
            .iter()
            .map(|(object, body)| (object.clone(), body.as_str())),
    );
    let duplicates = duplicated
        .values()
        .map(|objects| u64::try_from(objects.len().saturating_sub(1)).unwrap_or(u64::MAX))
        .sum();
    let run_ids: Vec<_> = runs.iter().map(|run| run.id).collect();
    let agent_launches = journal
        .launch_totals(&run_ids)
        .await
        .context("cannot count the agent launches")?
        .launches;
    let mut runs: Vec<ReportedRun> = runs
        .into_iter()
        .map(|run| ReportedRun {
            epic: super::working_epic(&run),
            issue: super::working_issue(&run),
            id: run.id.to_string(),
            repository: run.repository,
            phase: run.phase,
            active: run.active,
        })
        .collect();
    runs.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(DemoReport {
        agent_launches,
        outcome: outcome.to_owned(),
        runs,
        effects,
        github_requests: summarize_requests(&hub.requests()),
        duplicates,
        duplicated_identities: duplicated
            .into_iter()
            .map(|(identity, objects)| {
                let holders: Vec<&str> = objects.iter().map(|o| o.what.as_str()).collect();
                format!("{identity} on {}", holders.join(", "))
            })
            .collect(),
        issues_created_by_controller: issues_by(hub, bot_login),
        wall_seconds,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    fn object(what: &str) -> ObjectRef {
        comment_on(4, what)
    }

    fn comment_on(issue: u64, what: &str) -> ObjectRef {
        ObjectRef {
            repository: "o/r".into(),
            container: Some(issue),
            what: what.into(),
        }
    }

    fn marker(name: MarkerName, payload: Value) -> String {
        markers::render(name, payload.as_object().unwrap()).unwrap()
    }

    #[test]
    fn two_objects_with_one_marker_identity_are_a_duplicate_even_with_different_nonces() {
        let first = format!(
            "progress\n{}",
            marker(
                MarkerName::EpicProgress,
                json!({"issue": "1", "pr": "5", "run": 1, "write": "a"})
            )
        );
        let second = format!(
            "progress again\n{}",
            marker(
                MarkerName::EpicProgress,
                json!({"issue": "1", "pr": "5", "run": 1, "write": "b"})
            )
        );
        let other = marker(
            MarkerName::EpicProgress,
            json!({"issue": "2", "pr": "6", "run": 1}),
        );
        let found = duplicated_identities([
            (object("comment 1"), first.as_str()),
            (object("comment 2"), second.as_str()),
            (object("comment 3"), other.as_str()),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        let holders = found.values().next().unwrap();
        assert_eq!(
            holders.iter().map(|o| o.what.as_str()).collect::<Vec<_>>(),
            ["comment 1", "comment 2"]
        );
    }

    #[test]
    fn one_object_repeating_a_marker_and_distinct_markers_are_not_duplicates() {
        let status = marker(MarkerName::Status, json!({"run": 3}));
        let twice = format!("{status}\n{status}");
        let review = marker(
            MarkerName::ReviewResult,
            json!({"round": 1, "reviewed_head_sha": "ab", "needs_fix_round": false}),
        );
        let found = duplicated_identities([
            (object("comment 1"), twice.as_str()),
            (object("comment 2"), review.as_str()),
            (object("issue 4"), "no markers at all"),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn one_status_comment_on_each_issue_of_an_epic_run_is_not_a_duplicate_but_two_on_one_issue_are()
    {
        let status = marker(MarkerName::Status, json!({"run": 1}));
        let across = duplicated_identities([
            (comment_on(1, "comment 1"), status.as_str()),
            (comment_on(2, "comment 2"), status.as_str()),
        ]);
        assert!(across.is_empty(), "{across:?}");
        let twice = duplicated_identities([
            (comment_on(1, "comment 1"), status.as_str()),
            (comment_on(1, "comment 3"), status.as_str()),
        ]);
        assert_eq!(twice.len(), 1, "{twice:?}");
    }

    fn record(method: &str, route: &str, token_kind: &str) -> fakehub::world::RequestRecord {
        fakehub::world::RequestRecord {
            method: method.into(),
            route: route.into(),
            path: route.into(),
            status: 200,
            token_kind: token_kind.into(),
            conditional_hit: false,
            duration_ms: 1.0,
            rate_scope: String::new(),
            cost: 1,
            applied_status: None,
        }
    }

    #[test]
    fn requests_are_split_into_reads_and_writes_by_route_and_by_caller() {
        let summary = summarize_requests(&[
            record("GET", "/repos/{owner}/{repo}", "installation"),
            fakehub::world::RequestRecord {
                status: 304,
                conditional_hit: true,
                cost: 0,
                ..record("GET", "/repos/{owner}/{repo}", "installation")
            },
            record("POST", "/repos/{owner}/{repo}/issues", "personal"),
            record(
                "PATCH",
                "/repos/{owner}/{repo}/issues/comments/{comment_id}",
                "installation",
            ),
        ]);
        assert_eq!(summary.total, 4);
        assert_eq!((summary.reads, summary.writes), (2, 2));
        assert_eq!(
            summary.by_controller,
            ReadWrite {
                reads: 2,
                writes: 1,
                not_modified: 1,
                points: 2,
            }
        );
        assert_eq!(summary.by_route["GET /repos/{owner}/{repo}"], 2);
        assert_eq!(summary.by_route["POST /repos/{owner}/{repo}/issues"], 1);
        assert_eq!(
            summary
                .controller_by_route
                .get("POST /repos/{owner}/{repo}/issues"),
            None,
            "a person's request is not the controller's"
        );
        assert_eq!(summary.controller_by_route["GET /repos/{owner}/{repo}"], 2);
        assert_eq!(
            summary.controller_points_by_route["GET /repos/{owner}/{repo}"],
            1
        );
    }
}
