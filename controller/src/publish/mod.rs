//! Published-text policy and the controller's own renderers (SPEC §7, §4).
