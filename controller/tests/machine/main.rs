//! Properties of the pure parts: the phase machine and the command parser,
//! checked over generated inputs.

#[path = "../common/mod.rs"]
mod common;

mod commands_properties;
mod machine_properties;
mod text_properties;
