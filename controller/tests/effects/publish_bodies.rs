//! Controller-composed bodies around agent text: exact layout, whole-body
//! checks and GitHub's size limit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge::publish::bodies::{
    compose_follow_up_body, compose_pr_body, compose_progress_comment,
};
use autoforge::publish::{IssueRef, PolicyViolation, check_commit_message};

const ISSUE_URL: &str = "https://github.com/acme/widgets/issues/12";
const PR_URL: &str = "https://github.com/acme/widgets/pull/30";

fn issue() -> IssueRef {
    IssueRef::parse_url(ISSUE_URL, false).unwrap()
}

#[test]
fn a_pr_body_gets_the_closing_line_and_the_implementation_marker() {
    let body = compose_pr_body("Adds a counter.\n", &issue(), ISSUE_URL).unwrap();
    assert_eq!(
        body,
        format!(
            "Adds a counter.\n\nCloses #12\n\n<!-- ai-implementation: {{\"issue\":\"{ISSUE_URL}\"}} -->"
        )
    );
}

#[test]
fn an_agent_closing_line_in_the_pr_body_is_still_refused() {
    assert!(matches!(
        compose_pr_body("Adds a counter.\n\nfixes #13", &issue(), ISSUE_URL),
        Err(PolicyViolation::ClosingKeyword { .. })
    ));
}

#[test]
fn a_credential_completed_by_the_composition_is_caught_on_the_whole() {
    // Alone, a trailing `Authorization:` has no value and is not a
    // credential; once the controller's next line follows, it has one.
    let agent_body = "Call the API with the header Authorization:";
    assert!(autoforge::redact::find_credential(agent_body).is_none());
    let err = compose_pr_body(agent_body, &issue(), ISSUE_URL).unwrap_err();
    assert!(
        matches!(&err, PolicyViolation::Credential { field, .. } if field == "pr body"),
        "{err}"
    );
    assert!(compose_follow_up_body(agent_body, "R1-F1", PR_URL).is_err());
}

#[test]
fn a_follow_up_body_names_its_finding_and_pr() {
    let body = compose_follow_up_body("Speed up the scan.", "R2-F3", PR_URL).unwrap();
    assert_eq!(
        body,
        format!(
            "Speed up the scan.\n\nDeferred from finding `R2-F3` of {PR_URL}.\n\n\
             <!-- ai-follow-up: {{\"finding_id\":\"R2-F3\",\"pr\":\"{PR_URL}\"}} -->"
        )
    );
}

#[test]
fn a_progress_comment_over_the_body_limit_is_refused() {
    let progress = "p".repeat(65_500);
    assert!(matches!(
        compose_progress_comment(&progress, ISSUE_URL, PR_URL),
        Err(PolicyViolation::TooLong { max: 65_536, .. })
    ));
    let ok = compose_progress_comment("Merged #30.", ISSUE_URL, PR_URL).unwrap();
    assert!(ok.ends_with(&format!(
        "<!-- ai-epic-progress: {{\"issue\":\"{ISSUE_URL}\",\"pr\":\"{PR_URL}\"}} -->"
    )));
}

#[test]
fn commit_messages_may_close_only_the_runs_issue() {
    check_commit_message("c1", "Count widgets\n\nCloses #12", &issue()).unwrap();
    let err = check_commit_message("c2", "Count widgets\n\nCloses #13", &issue()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "commit c2: message closes an issue other than the run's own at byte 15"
    );
}

#[test]
fn agent_text_that_leaves_a_fence_or_comment_open_cannot_swallow_the_controller_lines() {
    // Open, the fence would put `Closes #12` and the marker inside code and
    // the comment would hide them; either changes what GitHub does with them.
    for agent in [
        "Adds a counter.\n\n```\ncode",
        "Adds a counter.\n\n<!-- note",
    ] {
        assert!(
            compose_pr_body(agent, &issue(), ISSUE_URL).is_err(),
            "{agent:?}"
        );
        assert!(
            compose_follow_up_body(agent, "R1-F1", PR_URL).is_err(),
            "{agent:?}"
        );
        assert!(
            compose_progress_comment(agent, ISSUE_URL, PR_URL).is_err(),
            "{agent:?}"
        );
    }
}
