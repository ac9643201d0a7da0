//! Coding-agent CLIs: profiles and role routing, process supervision, prompt
//! rendering, the per-launch read-context folder, CONTROL_RESULT parsing,
//! and the pipeline that ties them into one agent phase.

pub mod context;
pub mod journal;
pub mod pipeline;
pub mod profile;
pub mod prompt;
pub mod result;
pub mod supervisor;
