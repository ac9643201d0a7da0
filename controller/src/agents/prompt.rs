//! Placeholder: filled in by the agents work (issue 6).
