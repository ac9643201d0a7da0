//! What a chaos run is compared by: fakehub's objects as one JSON
//! document with ids, timestamps, commit SHAs and fakehub's port
//! normalised away (two runs never share them), the git content of every
//! branch, and the counts of the writes GitHub answered. Two runs of the
//! same workload, one with kills and one without, must give the same
//! document byte for byte.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::common::{OWNER, World};

/// Replaces what differs between two runs of one workload by nature:
/// fakehub's address, 40-hex commit SHAs and the numbers inside markers
/// and URLs that are ids (comments, reviews, check runs).
pub fn normalise(text: &str, hub: &str) -> String {
    let text = text.replace(hub, "<hub>");
    let sha = regex::Regex::new(r"\b[0-9a-f]{40}\b").expect("a regex");
    let text = sha.replace_all(&text, "<sha>");
    // The texts show a short SHA in backticks, where it may happen to be
    // all digits (one in about three hundred is).
    let quoted = regex::Regex::new(r"`[0-9a-f]{7,12}`").expect("a regex");
    let text = quoted.replace_all(&text, "`<short-sha>`");
    let short = regex::Regex::new(r"\b[0-9a-f]{7,12}\b").expect("a regex");
    let text = short.replace_all(&text, |c: &regex::Captures<'_>| {
        // A short SHA has a letter and a digit; a word or a number has not.
        let s = &c[0];
        if s.chars().any(|ch| ch.is_ascii_digit()) && s.chars().any(|ch| ch.is_ascii_alphabetic()) {
            "<short-sha>".to_owned()
        } else {
            s.to_owned()
        }
    });
    let ids = regex::Regex::new(
        r#"(_id=|_id":|comment-|/reviews/|/comments/|#issuecomment-|check-runs/|/runs/)\d+"#,
    )
    .expect("a regex");
    let text = ids.replace_all(&text, "${1}<id>");
    // Run ids are the journal's sequence values: a Postgres killed mid-run
    // skips the values it had logged ahead, so they differ between runs.
    let runs = regex::Regex::new(r#"(\\?"run\\?":|run=)\d+"#).expect("a regex");
    let text = runs.replace_all(&text, "${1}<run>");
    // Each write's nonce in its marker.
    let nonce = regex::Regex::new(r#"("write":")[0-9a-f]{32}""#).expect("a regex");
    nonce.replace_all(&text, "${1}<write>\"").into_owned()
}

/// fakehub's objects of every repository, normalised.
pub fn canonical(world: &World) -> Value {
    let state = world.hub.state();
    let view = View::of(&state, world.hub.base_url());
    let mut repos = BTreeMap::new();
    for repo in state["repos"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, r)| r)
    {
        let repo_id = repo["id"].as_u64();
        let issues: Vec<Value> = repo["issues"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, issue)| view.issue(repo_id, issue))
            .collect();
        let name = repo["name"].as_str().unwrap_or_default().to_owned();
        let git = crate::common::off_the_runtime(|| git_view(world, &name));
        repos.insert(
            name,
            json!({"issues": issues, "check_runs": view.check_runs(repo_id), "labels": repo["labels"]
                .as_array().into_iter().flatten().map(|l| l["name"].clone()).collect::<Vec<_>>(),
                "git": git}),
        );
    }
    json!({ "repositories": repos, "writes": write_counts(world) })
}

/// What the normalised views of one fakehub state share: its address,
/// its users' logins, its comments and check runs.
struct View<'a> {
    hub: String,
    users: BTreeMap<u64, String>,
    /// Every comment, oldest first.
    comments: Vec<&'a Value>,
    check_runs: Vec<&'a Value>,
}

impl<'a> View<'a> {
    fn of(state: &'a Value, hub: &str) -> View<'a> {
        let users = state["users"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, u)| Some((u["id"].as_u64()?, u["login"].as_str()?.to_owned())))
            .collect();
        // fakehub keys its comments by id, and a JSON object's keys sort as
        // text ("10" before "9"), so two runs whose ids cross a power of ten
        // at different moments would list one thread's comments in
        // different orders: order them by id, the order they were made in.
        let mut comments: Vec<(u64, &Value)> = state["comments"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(id, c)| Some((id.parse().ok()?, c)))
            .collect();
        comments.sort_by_key(|(id, _)| *id);
        View {
            hub: hub.to_owned(),
            users,
            comments: comments.into_iter().map(|(_, c)| c).collect(),
            check_runs: state["check_runs"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(_, c)| c)
                .collect(),
        }
    }

    fn norm(&self, v: &Value) -> Option<String> {
        v.as_str().map(|s| normalise(s, &self.hub))
    }

    fn login(&self, v: &Value) -> Option<String> {
        v.as_u64().and_then(|id| self.users.get(&id).cloned())
    }

    /// Who reacted with what, sorted.
    fn reactions(&self, v: &Value) -> Vec<String> {
        let mut all: Vec<String> = v
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                format!(
                    "{}:{}",
                    self.login(&r["user_id"]).unwrap_or_default(),
                    r["content"]
                )
            })
            .collect();
        all.sort();
        all
    }

    /// One issue or PR with its comments, labels, events and review.
    fn issue(&self, repo_id: Option<u64>, issue: &Value) -> Value {
        let number = issue["number"].as_u64().unwrap_or_default();
        let comments: Vec<Value> = self
            .comments
            .iter()
            .filter(|c| c["repo_id"].as_u64() == repo_id && c["issue_number"] == number)
            .map(|c| {
                json!({"by": self.login(&c["user_id"]), "body": self.norm(&c["body"]),
                    "edited": c["created_at"] != c["updated_at"],
                    "reactions": self.reactions(&c["reactions"])})
            })
            .collect();
        let mut labels: Vec<String> = issue["labels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l.as_str().map(str::to_owned))
            .collect();
        labels.sort();
        let events: Vec<String> = issue["events"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                format!(
                    "{} {} {}",
                    self.login(&e["actor_id"]).unwrap_or_default(),
                    e["event"].as_str().unwrap_or_default(),
                    e["label"].as_str().unwrap_or_default()
                )
            })
            .collect();
        let login = |v: &Value| self.login(v);
        let pull = pull_view(&issue["pull"], &self.hub, &login);
        json!({
            "number": number, "title": self.norm(&issue["title"]), "body": self.norm(&issue["body"]),
            "by": self.login(&issue["user_id"]), "open": issue["state_open"],
            "state_reason": issue["state_reason"], "labels": labels, "events": events,
            "reactions": self.reactions(&issue["reactions"]),
            "parent": issue["parent"].get(1), "sub_issues": issue["sub_issues"]
                .as_array().into_iter().flatten().map(|s| s[1].clone()).collect::<Vec<_>>(),
            "pull": pull, "comments": comments,
        })
    }

    /// The repository's check runs, one line each, sorted.
    fn check_runs(&self, repo_id: Option<u64>) -> Vec<String> {
        let mut checks: Vec<String> = self
            .check_runs
            .iter()
            .filter(|c| c["repo_id"].as_u64() == repo_id)
            .map(|c| {
                normalise(
                    &format!(
                        "{} {} {} {} {} {} {}",
                        c["head_sha"],
                        c["name"],
                        c["status"],
                        c["conclusion"],
                        c["output_title"],
                        c["output_summary"],
                        c["output_text"]
                    ),
                    &self.hub,
                )
            })
            .collect();
        checks.sort();
        checks
    }
}

fn pull_view(pull: &Value, hub: &str, login: &dyn Fn(&Value) -> Option<String>) -> Value {
    if pull.is_null() {
        return Value::Null;
    }
    let reviews: Vec<Value> = pull["reviews"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let comments: Vec<Value> = r["comments"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    json!({"path": c["path"], "line": c["line"], "side": c["side"],
                        "start_line": c["start_line"], "body": c["body"].as_str().map(|b| normalise(b, hub)),
                        "hunk": c["diff_hunk"]})
                })
                .collect();
            json!({"by": login(&r["user_id"]), "state": r["state"],
                "body": r["body"].as_str().map(|b| normalise(b, hub)), "comments": comments})
        })
        .collect();
    json!({"head": pull["head_ref"], "base": pull["base_ref"], "draft": pull["draft"],
        "merged": !pull["merged_at"].is_null(), "merged_by": login(&pull["merged_by"]),
        "commits": pull["stats"]["commits"], "changed_files": pull["stats"]["changed_files"],
        "additions": pull["stats"]["additions"], "deletions": pull["stats"]["deletions"],
        "reviews": reviews})
}

/// A mirror clone of `octo/<repo>` from fakehub, fetched as the owner.
pub struct Mirror {
    dir: tempfile::TempDir,
    header: String,
}

impl Mirror {
    pub fn of(world: &World, repo: &str) -> Mirror {
        let mirror = Mirror {
            dir: tempfile::tempdir().expect("a clone folder"),
            header: format!(
                "http.extraHeader=Authorization: Bearer {}",
                world.owner().token
            ),
        };
        let url = world.hub.git_url(OWNER, repo);
        mirror.run(&["clone", "-q", "--mirror", &url, "m.git"]);
        mirror
    }

    /// `git ARGS` on the mirror; its stdout. A failure fails the test with
    /// git's stderr.
    pub fn git(&self, args: &[&str]) -> Vec<u8> {
        let mut all = vec!["--git-dir", "m.git"];
        all.extend_from_slice(args);
        self.run(&all)
    }

    fn run(&self, args: &[&str]) -> Vec<u8> {
        let output = std::process::Command::new("git")
            .args(["-c", &self.header])
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("run git");
        assert!(
            output.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }
}

/// Every branch of `octo/<repo>`: its commits' messages and its tree
/// (paths and blob ids, which depend on content only).
fn git_view(world: &World, repo: &str) -> Value {
    let mirror = Mirror::of(world, repo);
    let text = |args: &[&str]| String::from_utf8_lossy(&mirror.git(args)).into_owned();
    let mut branches = BTreeMap::new();
    for line in text(&["for-each-ref", "--format=%(refname)"]).lines() {
        let log = text(&["log", "--format=%s%n%b%n--", line]);
        let tree = text(&["ls-tree", "-r", line]);
        branches.insert(line.to_owned(), json!({"log": log, "tree": tree}));
    }
    json!(branches)
}

/// Answered writes (anything but GET) by method and route, the routes
/// a crash changes by design left out: installation tokens (one per
/// process) and webhook redeliveries (asked for what a dead process
/// missed).
pub fn write_counts(world: &World) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for request in world.hub.requests() {
        let by_design = request.route.contains("access_tokens")
            || request.route.contains("/attempts")
            || request.path.starts_with("/_fakehub");
        if request.method == "GET" || by_design || !(200..300).contains(&request.status) {
            continue;
        }
        *counts
            .entry(format!("{} {}", request.method, request.route))
            .or_insert(0) += 1;
    }
    counts
}

/// Every controller marker (`<!-- ai-… -->`, `<!-- autoforge-… -->`) on
/// fakehub, with how many times its thread carries it: a marker identity
/// is the repository, the issue or pull request, and the marker's whole
/// text (its write nonce normalised away, so a second write of one object
/// is a duplicate).
pub fn marker_counts(canonical: &Value) -> BTreeMap<String, usize> {
    let marker = regex::Regex::new(r"<!--\s*(ai-|autoforge-)[^>]*-->").expect("a regex");
    let mut counts = BTreeMap::new();
    let repositories = canonical["repositories"].as_object().into_iter().flatten();
    for (repo, view) in repositories {
        for issue in view["issues"].as_array().into_iter().flatten() {
            let thread = format!("{repo}#{}", issue["number"]);
            let mut visit = |text: &str| {
                for found in marker.find_iter(text) {
                    let key = format!("{thread} {}", found.as_str());
                    *counts.entry(key).or_insert(0) += 1;
                }
            };
            walk_strings(issue, &mut visit);
        }
    }
    counts
}

fn walk_strings(value: &Value, visit: &mut dyn FnMut(&str)) {
    match value {
        Value::String(s) => visit(s),
        Value::Array(items) => items.iter().for_each(|v| walk_strings(v, visit)),
        Value::Object(map) => map.values().for_each(|v| walk_strings(v, visit)),
        _ => {}
    }
}

/// The JSON paths at which two documents differ (at most `limit`).
pub fn differences(a: &Value, b: &Value, limit: usize) -> Vec<String> {
    let mut found = Vec::new();
    diff_at("", a, b, &mut found, limit);
    found
}

fn diff_at(path: &str, a: &Value, b: &Value, found: &mut Vec<String>, limit: usize) {
    if found.len() >= limit || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let null = Value::Null;
                let (l, r) = (x.get(key).unwrap_or(&null), y.get(key).unwrap_or(&null));
                diff_at(&format!("{path}/{key}"), l, r, found, limit);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (l, r)) in x.iter().zip(y).enumerate() {
                diff_at(&format!("{path}/{i}"), l, r, found, limit);
            }
        }
        _ => found.push(format!("{path}:\n  crash-free: {a}\n  chaos:      {b}")),
    }
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn a_short_sha_in_backticks_is_normalised_even_when_it_is_all_digits() {
        let text = "passed on `380687338388`, then on `3a8f0c1d2e4b`; issue 1234567 stays";
        assert_eq!(
            normalise(text, "http://hub"),
            "passed on `<short-sha>`, then on `<short-sha>`; issue 1234567 stays"
        );
    }
}
