//! Rule-by-rule tests of `decide`, driven through the public events the way
//! the driver would feed them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agents;
mod check_run;
mod epic;
mod fix;
mod human;
mod local_operator;
mod merge;
mod operator;
mod plan;
mod protected;
mod review;
mod surfaces;
mod trust;

use crate::machine::*;
pub(super) use autoforge_journal::{CommitSha, IssueNumber, PullNumber, testing};

pub(super) fn sha(n: u32) -> CommitSha {
    CommitSha::parse(&format!("{n:040x}")).expect("40 hex digits")
}

pub(super) const PR: PullNumber = testing::pull(12);
pub(super) const ISSUE: IssueNumber = testing::issue(7);

pub(super) fn pr_at(head: &CommitSha, merge_base: &CommitSha) -> PrFacts {
    PrFacts {
        number: PR,
        state: PrState::Open,
        head_sha: head.clone(),
        base_ref: "main".to_owned(),
        merge_base_sha: merge_base.clone(),
        draft: false,
        merge_commit: None,
        checks: ChecksState::Success,
        mergeable: Some(true),
        mergeable_state: MergeableState::Clean,
        clean_review_intact: true,
        protected_paths_changed: false,
        title: "Add the widget".into(),
        merge_methods: AllowedMergeMethods::default(),
        reviews: None,
        changed_files: 1,
        listed_files: 1,
        required_checks_missing: Vec::new(),
    }
}

pub(super) fn facts(pr: Option<PrFacts>) -> GitHubFacts {
    GitHubFacts {
        issue_open: true,
        branch_head: None,
        pr,
        adoptable_prs: Vec::new(),
        issue_text: None,
    }
}

pub(super) fn finding(round: u32, n: u32, resolution: &str) -> Finding {
    Finding {
        id: format!("R{round}-F{n}"),
        classification: Classification::NonBlocked,
        title: format!("finding {n}"),
        location: "src/lib.rs:1".to_owned(),
        required_resolution: resolution.to_owned(),
    }
}

pub(super) fn command(command: OperatorRequest) -> Event {
    Event::Operator(OperatorCommand {
        thread: ISSUE,
        comment_id: 555,
        actor: "op".to_owned(),
        command,
    })
}

/// A run being driven event by event; every decision must be legal.
pub(super) struct Run {
    pub state: RunState,
    pub last: Decision,
}

impl Run {
    pub fn start(settings: RunSettings, epic: Option<IssueNumber>) -> Run {
        let state = RunState::new("run-1", ISSUE, settings.clone());
        let started = Event::Started {
            repository: "acme/widgets".to_owned(),
            issue: ISSUE,
            epic,
            base_branch: "main".to_owned(),
            base_sha: sha(1),
            branch_head: None,
            settings,
            repository_settings: RepositorySettingsRead::default(),
            issue_text: None,
            started_by: None,
        };
        let last = decide(&state, &started).expect("legal");
        Run {
            state: last.next.clone(),
            last,
        }
    }

    pub fn default_run() -> Run {
        Run::start(RunSettings::default(), None)
    }

    /// Applies an event that must be accepted.
    pub fn apply(&mut self, event: Event) -> &Decision {
        let decision = decide(&self.state, &event).expect("legal");
        assert_eq!(
            decision.refusal,
            None,
            "unexpected refusal for {}",
            event.name()
        );
        self.state = decision.next.clone();
        self.last = decision;
        &self.last
    }

    /// Applies an event that must be refused and change nothing.
    pub fn refuse(&mut self, event: Event) -> Refusal {
        let before = serde_json::to_string(&self.state).expect("serialise");
        let decision = decide(&self.state, &event).expect("legal");
        assert_eq!(
            serde_json::to_string(&decision.next).expect("serialise"),
            before
        );
        decision.refusal.expect("a refusal")
    }

    pub fn launch(&self) -> LaunchRequest {
        match &self.state.awaiting {
            Awaiting::Agent { launch } => launch.as_ref().clone(),
            other => panic!("not running an agent: {other:?}"),
        }
    }

    pub fn finish_agent(&mut self, outcome: AgentOutcome) -> &Decision {
        let launch = self.launch().id;
        self.apply(Event::AgentFinished {
            launch,
            outcome,
            tokens: None,
            cost_micros: None,
        })
    }

    pub fn succeed(&mut self, result: PhaseResult) -> &Decision {
        self.finish_agent(AgentOutcome::Result {
            result: AgentResult::Success { result },
        })
    }

    pub fn validated(&mut self, sha: &CommitSha, passed: bool) -> &Decision {
        self.apply(Event::ValidationFinished {
            sha: sha.clone(),
            passed,
            failed_index: (!passed).then_some(0),
            summary: if passed {
                "all passed"
            } else {
                "command 0 failed"
            }
            .to_owned(),
            protected_paths: Vec::new(),
        })
    }

    /// A passing validation of `sha` that finds it changing `paths`.
    pub fn validated_protected(&mut self, sha: &CommitSha, paths: &[&str]) -> &Decision {
        self.apply(Event::ValidationFinished {
            sha: sha.clone(),
            passed: true,
            failed_index: None,
            summary: "all passed".to_owned(),
            protected_paths: paths.iter().map(|p| (*p).to_owned()).collect(),
        })
    }

    pub fn observed(&mut self, observed: Vec<EffectReadBack>) -> &Decision {
        self.apply(Event::EffectsObserved { observed })
    }

    pub fn github(&mut self, facts: GitHubFacts) -> &Decision {
        self.apply(Event::GitHubObserved { facts })
    }

    pub fn implement(&mut self, head: &CommitSha) {
        self.succeed(PhaseResult::Implement(ImplementResult {
            head_sha: head.clone(),
            pr_title: "Add widgets".to_owned(),
            pr_body: "body".to_owned(),
            tests: Vec::new(),
        }));
    }

    /// INITIALIZING → IMPLEMENT → REVIEW with the PR at `sha(2)`.
    pub fn to_review(settings: RunSettings, epic: Option<IssueNumber>) -> Run {
        let mut run = Run::start(settings, epic);
        run.implement(&sha(2));
        run.validated(&sha(2), true);
        run.github(facts(None));
        run.observed(vec![
            EffectReadBack::Pushed { sha: sha(2) },
            EffectReadBack::PullRequest { number: PR },
        ]);
        assert_eq!(run.state.phase, Phase::Review);
        run
    }

    /// Binds the next round at `head` and returns the round number.
    pub fn bind(&mut self, head: &CommitSha) -> u32 {
        self.github(facts(Some(pr_at(head, &sha(1)))));
        self.launch().round
    }

    pub fn review(&mut self, findings: Vec<Finding>) {
        let round = self.launch().round;
        let head = self.state.review.binding.clone().expect("bound").head_sha;
        self.succeed(PhaseResult::Review(ReviewResult {
            round,
            reviewed_head_sha: head,
            findings,
            sections: ReviewSections::default(),
        }));
        self.observed(vec![EffectReadBack::Comment {
            url: format!("https://example.test/c/{round}"),
        }]);
    }

    /// A whole round at `head` whose re-read sees `reread_head`.
    pub fn round(&mut self, head: &CommitSha, findings: Vec<Finding>, reread_head: &CommitSha) {
        self.bind(head);
        self.review(findings);
        self.github(facts(Some(pr_at(reread_head, &sha(1)))));
    }

    pub fn to_ready(settings: RunSettings, epic: Option<IssueNumber>) -> Run {
        let mut run = Run::to_review(settings, epic);
        run.round(&sha(2), Vec::new(), &sha(2));
        assert_eq!(run.state.phase, Phase::ReadyForMerge);
        run
    }

    pub fn status_edits(&self) -> usize {
        self.last
            .effects
            .iter()
            .filter(|e| e.kind() == EffectKind::EditStatusComment)
            .count()
    }
}
