//! fakehub: a GitHub-compatible simulator for tests and the demo.
