//! Commands given on the controller's own host (`autoforge unblock|stop`)
//! as they travel to the run's driver in a run event. Whoever can run the
//! CLI against the journal is an operator: there is no GitHub permission
//! to check, only the name to record.

use serde::{Deserialize, Serialize};

/// What the CLI stores for the driver, under the key `local_command` so
/// that it can never be read as an observed GitHub change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalCommandEvent {
    pub local_command: LocalCommand,
}

/// One local command and who gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verb", rename_all = "snake_case")]
pub enum LocalCommand {
    Unblock { actor: String, reason: String },
    Stop { actor: String },
}

impl LocalCommand {
    pub fn verb(&self) -> &'static str {
        match self {
            LocalCommand::Unblock { .. } => "unblock",
            LocalCommand::Stop { .. } => "stop",
        }
    }

    pub fn actor(&self) -> &str {
        match self {
            LocalCommand::Unblock { actor, .. } | LocalCommand::Stop { actor } => actor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_command_is_stored_under_its_own_key_and_reads_back() {
        let event = LocalCommandEvent {
            local_command: LocalCommand::Unblock {
                actor: "alice".into(),
                reason: "fixed the check".into(),
            },
        };
        let value = serde_json::to_value(&event).expect("serialises");
        assert_eq!(value["local_command"]["verb"], "unblock");
        assert_eq!(value["local_command"]["actor"], "alice");
        let back: LocalCommandEvent = serde_json::from_value(value).expect("reads back");
        assert_eq!(back, event);
        assert!(
            serde_json::from_value::<LocalCommandEvent>(serde_json::json!({"verb": "stop"}))
                .is_err()
        );
    }
}
