//! Postgres schema, migrations and the typed journal API of autoforge, plus
//! the managed local Postgres used when no database is configured.
//!
//! This crate is the only place that talks to Postgres. Its public API uses
//! its own types only (no `sqlx` types), except in [`testing`].

mod deliveries;
mod effects;
mod error;
mod ids;
mod journal;
pub mod localpg;
mod records;
mod runs;
pub mod testing;

pub use deliveries::{Delivery, DeliveryRetry, InsertOutcome, NewDelivery};
pub use effects::{
    Effect, EffectKind, MAX_ATTEMPTS, MAX_EFFECTS_PER_TRANSITION, NewEffect, Stage, UnknownValue,
};
pub use error::{ActiveRunScope, DatabaseError, JournalError};
pub use ids::{DeliveryId, EffectId, LaunchId, RunId};
pub use journal::{Journal, JournalTx};
pub use records::{
    AgentLaunch, AuditEvent, CommandDecision, LaunchEnd, NewCommandDecision, NewLaunch,
    NewValidation, ValidationOutcome, ValidationRecord,
};
pub use runs::{Lease, NewRun, Run, RunFilter, TERMINAL_PHASES, is_terminal};
