//! Redaction of secrets and credential-shaped text from captured output and context files.
