//! Operator commands: Markdown-aware parsing of `/autoforge` lines and the
//! pure decision of who counts as an operator. Nothing here does IO: the
//! caller reads the collaborator permission from GitHub and passes it in.

mod authorize;
mod local;
mod parse;

pub use authorize::{
    Actor, ActorKind, AllowedBy, OperatorDecision, OperatorPolicy, Permission, RefusalReason,
    UnknownPermission, decide_operator, is_own_login,
};
pub use local::{LocalCommand, LocalCommandEvent};
pub use parse::{
    AnswerProblem, COMMAND_PREFIX, Command, CommandParseError, MAX_ANSWERS,
    MAX_UNBLOCK_REASON_CHARS, VERBS, commands_added_by_edit, parse_answers, parse_commands,
    usage_of,
};
