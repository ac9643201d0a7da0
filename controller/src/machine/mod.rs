//! The phase machine: phases, legal edges and the pure `decide` function
//! (SPEC §3, §8, §11).
//!
//! Nothing here performs IO, reads a clock or draws randomness: the driver
//! feeds one [`Event`] at a time and executes the returned [`Decision`]
//! (committing `next` and its effect intents in one transaction first).
//! Every GitHub write leaves the machine as an [`EffectIntent`].
//!
//! # The driver's side of the contract
//!
//! `next.awaiting` says what the run waits for and so what the driver does
//! next, after committing `next` with `effects`:
//!
//! | `Awaiting` | the driver… | and feeds back |
//! |---|---|---|
//! | `Start` | resolves the issue (first open child of an EPIC) | `Started` |
//! | `Agent { launch }` | runs `launches[0]` | `AgentFinished { launch: id, … }` |
//! | `Validation { sha }` | runs the validation commands on `sha` | `ValidationFinished` |
//! | `Effects { step }` | drives the decision's effects to `observed` | `EffectsObserved` or `EffectConflict` |
//! | `Facts { purpose }` | reads the PR, branch and issue afresh | `GitHubObserved` |
//! | `MergeOutcome` | reads the PR after `merge_pr` | `MergeResult` |
//! | `NextIssueCheck { issue }` | reads that issue | `NextIssue` |
//! | `OperatorRetry` / `Nothing` | waits for an operator command | `Operator(…)` |
//!
//! Any wait may instead end with `TransientFailure` (the same step is tried
//! again, bounded), and `LabelRemoved`, `IssueClosed` or an operator command
//! may arrive at any time. An event that does not fit gets a typed
//! [`Refusal`] and leaves the state byte-identical.

pub mod agent_result;
pub mod bounds;
pub mod budget;
mod decide;
pub mod decision;
pub mod event;
pub mod phase;
pub mod protected;
pub mod repository;
pub mod review_rounds;
pub mod state;
pub mod status_labels;
pub mod unblock;

pub use agent_result::{
    AgentOutcome, AgentResult, ApprovedPlan, Classification, EpicResult, Finding, FixResult,
    FollowUpDraft, ImplementResult, PhaseResult, PlanAnswer, PlanQuestion, PlanResult, Resolution,
    ResolutionKind, ReviewResult, ReviewSections,
};
pub use bounds::{Counters, MergeMethod, MergeMode, PlanMode, RunSettings};
pub use decide::{decide, unaccepted_text_in};
pub use decision::{
    CheckRunView, CheckShows, Correction, Decision, EffectIntent, EffectKind, IssueFinished,
    LaunchInputs, LaunchRequest, MachineError, Notice, Refusal, Reply, StatusSnapshot,
    UnblockRefusal, ValidationRequest,
};
pub use event::{
    AllowedMergeMethods, ChecksState, EffectReadBack, Event, GitHubFacts, HumanFeedback, HumanNote,
    LocalOperatorCommand, MergeReport, MergeableState, NextIssueFacts, OperatorCommand,
    OperatorRequest, PrFacts, PrState, RefusedCommand, RefusedLabelRemoval, RepositorySettingsRead,
    ReviewRequirement,
};
pub use phase::{AgentPhase, Cause, IllegalEdge, Phase, UnknownPhase, check_edge, legal_edge};
pub use protected::{is_protected, protected_among};
pub use repository::{
    RepositoryAgents, RepositoryLabels, RepositoryMerge, RepositoryPlan, RepositorySettings,
    RepositoryValidation, ValidationCommand,
};
pub use state::{
    Awaiting, BlockedInfo, CarriedFindings, EffectStep, EpicState, FactsPurpose, LastValidation,
    MergePlan, OperatorGuidance, PlanState, ReviewState, RoundBinding, RoundOutcome, RoundRecord,
    RunState, RunningLine, is_human_finding,
};
