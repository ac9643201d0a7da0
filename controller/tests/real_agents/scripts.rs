//! What the scripted model says in each phase, as each CLI's own tool
//! calls: the writers find their worktree with the shell tool, write a file
//! with the write tool and commit with the shell tool; every final message
//! is a CONTROL_RESULT built from what the prompt and the tool results
//! said (the issue URL, the bound HEAD, the commit's SHA).
//!
//! Markers are the phase headings of the prompt templates, so a script
//! answers exactly the launches of its phase (and round).

use modelserver::{Script, Usage};

/// A distinct usage per script and step, with cache reads, so a launch
/// whose tokens were counted from another launch, another step or without
/// the cache cannot match what the server claimed.
fn usage(seed: u64, step: u64) -> Usage {
    Usage {
        input_tokens: 1000 + 100 * seed + 10 * step,
        output_tokens: 50 + 5 * seed + step,
        cached_input_tokens: 200 + seed,
    }
}

const COMMIT_AS_AGENT: &str =
    "git add -A && git -c user.name=agent -c user.email=agent@example.invalid commit -qm";

/// `steps` with the usage of `seed`, one distinct claim per step.
fn with_usages(script: Script, seed: u64) -> Script {
    let mut script = script;
    for (index, step) in script.steps.iter_mut().enumerate() {
        step.usage = Some(usage(seed, index as u64));
    }
    script
}

/// IMPLEMENT: `pwd`, write `feature.txt` with the write tool (an absolute
/// path, which Claude Code and OpenCode want), commit, answer.
pub fn implement(seed: u64) -> Script {
    let script = Script::new("implement", "# Phase: IMPLEMENT")
        .capture_prompt("issue", r"- Issue: (\S+)")
        .shell("pwd")
        .capture_result("wt", 0, r"(/\S+)")
        .write_file("{{wt}}/feature.txt", "feature\n")
        .shell(format!("{COMMIT_AS_AGENT} 'Add the feature' && git rev-parse HEAD"))
        .capture_result("head", 2, r"\b([0-9a-f]{40})\b")
        .final_message(control(
            r#"{"phase":"IMPLEMENT","status":"success","issue_url":"{{issue}}","head_sha":"{{head}}","pr_title":"Add the feature","pr_body":"Adds feature.txt as the issue asks.","tests":["none"]}"#,
        ));
    with_usages(script, seed)
}

/// REVIEW of `round`: reads the file through the shell, answers with one
/// blocking finding (`finding`) or none.
pub fn review(round: u32, finding: bool, seed: u64) -> Script {
    let findings = if finding {
        format!(
            r#"{{"id":"R{round}-F1","classification":"blocked","title":"Missing fix file","location":"feature.txt:1","required_resolution":"Add fix.txt next to the feature."}}"#
        )
    } else {
        String::new()
    };
    let result = format!(
        r#"{{"phase":"REVIEW","status":"success","round":{round},"reviewed_head_sha":"{{{{head}}}}","needs_fix_round":{finding},"findings":[{findings}],"spec":"Matches the issue.","standards":"Follows the style.","assessment":"Sound.","observations":"None.","verification":"Read the change.","summary":"Reviewed."}}"#
    );
    let script = Script::new(
        format!("review-{round}"),
        format!("# Phase: REVIEW, round {round}\n"),
    )
    .capture_prompt("head", r"Bound HEAD: `([0-9a-f]{40})`")
    .final_message(control(&result));
    with_usages(script, seed)
}

/// A REVIEW of round 1 whose model tries to write before answering clean:
/// a file through the write tool (`write_path`: absolute for Claude Code
/// and OpenCode, relative for Codex's patches), then a change and a commit
/// through the shell tool.
pub fn intruding_review(write_path: &str, seed: u64) -> Script {
    let result = r#"{"phase":"REVIEW","status":"success","round":1,"reviewed_head_sha":"{{head}}","needs_fix_round":false,"findings":[],"spec":"Matches the issue.","standards":"Follows the style.","assessment":"Sound.","observations":"None.","verification":"Read feature.txt: {{seen}}","summary":"Reviewed."}"#;
    let script = Script::new("review-1", "# Phase: REVIEW, round 1\n")
        .capture_prompt("head", r"Bound HEAD: `([0-9a-f]{40})`")
        .capture_prompt("state", r"`(/\S+?)/launches/")
        .read_file("{{state}}/worktrees/octo/widgets/1/feature.txt")
        .capture_result("seen", 0, r"(?m)\b(feature)\s*$")
        .write_file(write_path, "written by a reviewer\n")
        .shell(format!(
            "echo changed >> feature.txt; echo x > shell-intruder.txt; {COMMIT_AS_AGENT} intrude"
        ))
        .final_message(control(result));
    with_usages(script, seed)
}

/// FIX after round 1: write `fix.txt`, commit, resolve `R1-F1` with it.
pub fn fix(seed: u64) -> Script {
    let script = Script::new("fix", "# Phase: FIX")
        .capture_prompt("reviewed", r"Reviewed HEAD: `([0-9a-f]{40})`")
        .shell("pwd")
        .capture_result("wt", 0, r"(/\S+)")
        .write_file("{{wt}}/fix.txt", "fixed\n")
        .shell(format!("{COMMIT_AS_AGENT} 'Add the fix file' && git rev-parse HEAD"))
        .capture_result("head", 2, r"\b([0-9a-f]{40})\b")
        .final_message(control(
            r#"{"phase":"FIX","status":"success","previous_head_sha":"{{reviewed}}","head_sha":"{{head}}","resolutions":[{"finding_id":"R1-F1","resolution":"fixed","commit_sha":"{{head}}"}]}"#,
        ));
    with_usages(script, seed)
}

fn control(json: &str) -> String {
    format!("Done.\n<<<CONTROL_RESULT>>>\n{json}\n<<<END_CONTROL_RESULT>>>")
}

/// UPDATE_EPIC: progress, a roadmap and no next issue (the EPIC is done).
pub fn update_epic(seed: u64) -> Script {
    let script = Script::new("update-epic", "# Phase: UPDATE_EPIC").final_message(control(
        r#"{"phase":"UPDATE_EPIC","status":"success","progress":"The feature file is merged.","roadmap_section":"- [x] the feature file","next_issue_url":null}"#,
    ));
    with_usages(script, seed)
}
