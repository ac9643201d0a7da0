//! The run driver in-process against fakehub and a fresh journal: runs,
//! publishing, merging, fixing, EPICs and several driver processes.

#[path = "../common/mod.rs"]
mod common;

mod driver_epic;
mod driver_fix;
mod driver_merge;
mod driver_processes;
mod driver_publish;
mod driver_runs;
