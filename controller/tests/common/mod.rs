//! The harness every integration-test binary of this crate shares. One
//! [`World`] (fakehub, a fresh journal, the owner's client) that a test
//! extends with what it needs: drivers and scripted agent catalogs
//! ([`driving`]), a leased run for the effect executor ([`effects`]) or the
//! real `autoforge serve` ([`serve`]) and the chaos workload with its
//! random kills ([`chaos`]); git and scripted-agent helpers
//! ([`git`]), the metrics exposition reader ([`exposition`]), the scenario language
//! ([`scenario`]) and the walker of the controller's sources ([`sources`]). Each binary declares it with
//! `#[path = "../common/mod.rs"] mod common;`.
// Each binary uses only part of the harness.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

pub mod chaos;
pub mod cluster;
pub mod driving;
pub mod effects;
pub mod exposition;
pub mod git;
pub mod relay;
pub mod scenario;
pub mod serve;
pub mod sources;
pub mod world;

pub use driving::*;
pub use effects::*;
pub use git::*;
pub use serve::*;
pub use world::*;
