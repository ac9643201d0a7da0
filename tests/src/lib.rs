//! Shared helpers for autoforge end-to-end tests.
