//! Operator commands: Markdown-aware parsing of `/autoforge` lines and permission checks.
