//! Mirror clones, per-issue worktrees, clean exports and credential-safe git transport.
