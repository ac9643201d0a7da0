//! The harness every integration-test binary of this crate shares: git and
//! scripted-agent helpers, in-process worlds for the driver and the effect
//! executor, the `autoforge serve` world, the metrics reader and the
//! scenario language. Each binary declares it with
//! `#[path = "../common/mod.rs"] mod common;`.
// Each binary uses only part of the harness.
#![allow(dead_code, unused_imports)]

pub mod driver_support;
pub mod effects_common;
pub mod metrics_support;
pub mod scenario;
pub mod serve_harness;
pub mod support;
