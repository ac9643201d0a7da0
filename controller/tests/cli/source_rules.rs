//! Boundaries the sources keep that visibility alone cannot enforce.
//! `github::writes` is crate-private, yet any module of the crate could
//! still call it: only the effect executor may, after journalling the
//! write, plus the poller's redelivery request (documented at
//! `github::writes::redeliver_hook_delivery`).

use crate::common::sources::controller_sources;

#[test]
fn only_the_effect_executor_and_the_redelivery_request_write_to_github() {
    let import =
        regex::Regex::new(r"github::\{[^}]*\bwrites\b|github::writes").expect("a valid pattern");
    let mut offenders = Vec::new();
    for file in controller_sources() {
        let relative = file.relative.as_str();
        if relative.starts_with("effects/") || relative.starts_with("github/") {
            continue;
        }
        let text = &file.text;
        // The poller may name the module only to ask for redeliveries.
        let allowed = relative == "intake/poller.rs"
            && text
                .match_indices("writes::")
                .all(|(at, _)| text[at..].starts_with("writes::redeliver_hook_delivery("));
        if (import.is_match(text) || text.contains("writes::")) && !allowed {
            offenders.push(file.relative);
        }
    }
    assert!(
        offenders.is_empty(),
        "GitHub writes outside effects: {offenders:?}"
    );
}
