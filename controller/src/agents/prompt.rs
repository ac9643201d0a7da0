//! Placeholder: the prompt renderer lands in the next commit.
