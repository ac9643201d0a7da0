//! Postgres schema, migrations and the typed journal API of autoforge.
