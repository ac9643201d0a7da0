//! Coding-agent CLIs: profiles and role routing, process supervision, prompt
//! rendering, the per-launch read-context folder and CONTROL_RESULT parsing.

pub mod context;
pub mod profile;
pub mod prompt;
pub mod result;
pub mod supervisor;
