//! Chaos on the real binaries: a workload of two repositories driven by
//! `autoforge serve` against fakehub and a real Postgres ([`workload`]),
//! seeded random kills of serve and of agent process trees while it runs
//! ([`killer`]), and the normalised view of fakehub two runs are compared
//! by ([`compare`]). The `crash` binary's `chaos_…` tests and the
//! `security` binary's `secret_…` scan share it.

pub mod compare;
pub mod killer;
pub mod workload;

pub use compare::{Mirror, canonical, differences, marker_counts};
pub use killer::{KILLS_ENV, Killer, SEED_ENV, seed_from_env};
pub use workload::{Workload, WorkloadOptions};
