//! Agent launches and what surrounds them: the supervisor, worktrees,
//! prompts and context, result parsing, validation and their journal records.

#[path = "../common/mod.rs"]
mod common;

mod agents_journal;
mod agents_pipeline;
mod prompt_context;
mod prompt_templates;
mod result_fix_epic;
mod result_parser;
mod supervisor_launch;
mod validation_export;
mod validation_journal;
mod workspace_continuation;
mod workspace_git;
