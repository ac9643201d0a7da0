//! Review rounds (SPEC §8): binding, staleness, carried findings and the
//! stagnation fingerprints evaluated after a round with findings.

use super::agent_result::Finding;
use super::bounds::RunSettings;
use super::event::PrFacts;
use super::state::{CarriedFindings, ReviewState, RoundBinding, RoundOutcome, RoundRecord};
use autoforge_journal::CommitSha;
use sha2::{Digest, Sha256};

/// The binding a fresh PR read describes.
pub fn bind(pr: &PrFacts) -> RoundBinding {
    RoundBinding {
        pr: pr.number,
        head_sha: pr.head_sha.clone(),
        base_ref: pr.base_ref.clone(),
        merge_base_sha: pr.merge_base_sha.clone(),
    }
}

/// Whether the PR is no longer at the bound revision. Ordinary commits on
/// the base do not move the merge base; a rewritten base does.
pub fn moved(binding: &RoundBinding, pr: &PrFacts) -> bool {
    bind(pr) != *binding
}

/// Whitespace collapsed, trimmed and lowercased, so rewording by spacing or
/// case does not hide a repeated finding.
fn normalise(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn digest16(text: &str) -> String {
    let full = hex::encode(Sha256::digest(text.as_bytes()));
    full[..16].to_owned()
}

/// A round's history entry; ids and locations do not enter the fingerprint.
pub fn record(
    round: u32,
    head_sha: &CommitSha,
    outcome: RoundOutcome,
    findings: &[Finding],
) -> RoundRecord {
    let mut texts: Vec<String> = findings
        .iter()
        .map(|f| normalise(&f.required_resolution))
        .collect();
    texts.sort();
    let mut finding_digests: Vec<String> = texts.iter().map(|t| digest16(t)).collect();
    finding_digests.sort();
    RoundRecord {
        round,
        head_sha: head_sha.clone(),
        outcome,
        finding_count: u32::try_from(findings.len()).unwrap_or(u32::MAX),
        fingerprint: digest16(&texts.join("\n\u{1f}\n")),
        finding_digests,
    }
}

/// Why the review loop is judged stuck.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stagnation {
    IdenticalFindings { rounds: u32 },
    UnchangedCount { rounds: u32, count: u32 },
}

impl Stagnation {
    pub fn reason(&self) -> String {
        match self {
            Stagnation::IdenticalFindings { rounds } => {
                format!("review stagnated: the same findings {rounds} rounds in a row")
            }
            Stagnation::UnchangedCount { rounds, count } => format!(
                "review stagnated: {count} findings {rounds} rounds in a row with a recurring resolution"
            ),
        }
    }
}

/// The last `n` records when they all asked for a fix; a clean or stale
/// round breaks a streak.
fn fix_streak(history: &[RoundRecord], n: u32) -> Option<&[RoundRecord]> {
    let n = usize::try_from(n).ok()?;
    if n == 0 || history.len() < n {
        return None;
    }
    let tail = &history[history.len() - n..];
    tail.iter()
        .all(|r| r.outcome == RoundOutcome::NeedsFix)
        .then_some(tail)
}

/// Evaluates both stagnation rules on the history, newest round included.
pub fn stagnation(history: &[RoundRecord], settings: &RunSettings) -> Option<Stagnation> {
    let identical = settings.stagnation_identical_rounds;
    if let Some(tail) = fix_streak(history, identical)
        && tail.iter().all(|r| r.fingerprint == tail[0].fingerprint)
    {
        return Some(Stagnation::IdenticalFindings { rounds: identical });
    }
    let unchanged = settings.stagnation_unchanged_count_rounds;
    if let Some(tail) = fix_streak(history, unchanged)
        && tail
            .iter()
            .all(|r| r.finding_count == tail[0].finding_count)
        && resolution_recurs(tail)
    {
        return Some(Stagnation::UnchangedCount {
            rounds: unchanged,
            count: tail[0].finding_count,
        });
    }
    None
}

/// Some finding's resolution digest appears in more than one of the rounds
/// (an A/B/A ping-pong); all-new findings each round count as progress.
fn resolution_recurs(rounds: &[RoundRecord]) -> bool {
    rounds.iter().enumerate().any(|(i, r)| {
        r.finding_digests.iter().any(|d| {
            rounds[i + 1..]
                .iter()
                .any(|later| later.finding_digests.contains(d))
        })
    })
}

/// Makes a stale round's findings the prior findings of the next round,
/// replacing whatever was carried before (never accumulating).
pub fn carry_stale(
    review: &mut ReviewState,
    round: u32,
    head_sha: &CommitSha,
    findings: Vec<Finding>,
) {
    review.prior_findings = if findings.is_empty() {
        None
    } else {
        Some(CarriedFindings {
            round,
            head_sha: head_sha.clone(),
            comment_url: review.comment_url.clone(),
            findings,
        })
    };
    review.open_findings.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::agent_result::Classification;

    fn finding(id: &str, resolution: &str) -> Finding {
        Finding {
            id: id.to_owned(),
            classification: Classification::Nit,
            title: "t".to_owned(),
            location: "l".to_owned(),
            required_resolution: resolution.to_owned(),
        }
    }

    fn needs_fix(round: u32, resolutions: &[&str]) -> RoundRecord {
        let findings: Vec<Finding> = resolutions
            .iter()
            .enumerate()
            .map(|(i, r)| finding(&format!("R{round}-F{}", i + 1), r))
            .collect();
        record(
            round,
            &autoforge_journal::testing::sha("h"),
            RoundOutcome::NeedsFix,
            &findings,
        )
    }

    #[test]
    fn fingerprint_ignores_ids_spacing_case_and_order() {
        let a = record(
            1,
            &autoforge_journal::testing::sha("h"),
            RoundOutcome::NeedsFix,
            &[
                finding("R1-F1", "Fix  the Bug"),
                finding("R1-F2", "add test"),
            ],
        );
        let b = record(
            2,
            &autoforge_journal::testing::sha("h"),
            RoundOutcome::NeedsFix,
            &[
                finding("R2-F1", "add test"),
                finding("R2-F2", " fix the bug "),
            ],
        );
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_eq!(a.fingerprint.len(), 16);
    }

    #[test]
    fn same_fingerprint_two_rounds_in_a_row_is_stagnation() {
        let history = vec![needs_fix(1, &["fix x"]), needs_fix(2, &["Fix X"])];
        assert_eq!(
            stagnation(&history, &RunSettings::default()),
            Some(Stagnation::IdenticalFindings { rounds: 2 })
        );
    }

    #[test]
    fn a_stale_round_breaks_the_identical_streak() {
        let mut stale = needs_fix(2, &["fix x"]);
        stale.outcome = RoundOutcome::Stale;
        let history = vec![needs_fix(1, &["fix x"]), stale, needs_fix(3, &["fix x"])];
        assert_eq!(stagnation(&history, &RunSettings::default()), None);
    }

    #[test]
    fn equal_counts_with_a_recurring_resolution_three_rounds_is_stagnation() {
        let history = vec![
            needs_fix(1, &["a", "b"]),
            needs_fix(2, &["c", "d"]),
            needs_fix(3, &["a", "e"]),
        ];
        assert_eq!(
            stagnation(&history, &RunSettings::default()),
            Some(Stagnation::UnchangedCount {
                rounds: 3,
                count: 2
            })
        );
    }

    #[test]
    fn all_new_findings_each_round_are_progress() {
        let history = vec![
            needs_fix(1, &["a", "b"]),
            needs_fix(2, &["c", "d"]),
            needs_fix(3, &["e", "f"]),
        ];
        assert_eq!(stagnation(&history, &RunSettings::default()), None);
    }

    #[test]
    fn zero_disables_a_stagnation_rule() {
        let settings = RunSettings {
            stagnation_identical_rounds: 0,
            ..RunSettings::default()
        };
        let history = vec![needs_fix(1, &["x"]), needs_fix(2, &["x"])];
        assert_eq!(stagnation(&history, &settings), None);
    }

    #[test]
    fn carried_findings_are_replaced_not_accumulated() {
        let mut review = ReviewState::default();
        carry_stale(
            &mut review,
            1,
            &autoforge_journal::testing::sha("h1"),
            vec![finding("R1-F1", "a"), finding("R1-F2", "b")],
        );
        carry_stale(
            &mut review,
            2,
            &autoforge_journal::testing::sha("h2"),
            vec![finding("R2-F1", "c")],
        );
        let carried = review.prior_findings.clone().expect("carried");
        assert_eq!((carried.round, carried.findings.len()), (2, 1));
        carry_stale(
            &mut review,
            3,
            &autoforge_journal::testing::sha("h3"),
            Vec::new(),
        );
        assert_eq!(
            review.prior_findings, None,
            "a stale clean round leaves nothing carried"
        );
    }
}
