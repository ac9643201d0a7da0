//! Crashes at every window of the write-ahead protocol: in the effect
//! executor, in the driver, and in the real `autoforge serve` binary; and
//! seeded random kills of serve and agents under a whole workload (`chaos`).

#[path = "../common/mod.rs"]
mod common;

mod answer_crash;
mod chaos;
mod crash_serve;
mod driver_crash;
mod effects_crash;
mod matrix;
