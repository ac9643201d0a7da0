//! Tracing subscriber set-up: human format on a terminal, JSON otherwise.
