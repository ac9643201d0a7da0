//! Configuration: `autoforge.toml`, environment overrides, schema validation, secrets.
