-- The latest GitHub rate-limit reading per budget, written by the serving
-- process so that `autoforge status`, a separate process, can show the
-- headroom. Bounded by its key: one row per budget owner (an installation
-- id, `app` or `token`) and rate-limit resource (`core`, `search`, …),
-- overwritten in place; `observed_at` is when GitHub's answer arrived.

CREATE TABLE rate_limit_readings (
    owner         text        NOT NULL CHECK (owner ~ '^([0-9]+|app|token)$'),
    resource      text        NOT NULL CHECK (resource ~ '^[a-z_]{1,40}$'),
    limit_total   bigint      CHECK (limit_total >= 0),
    remaining     bigint      CHECK (remaining >= 0),
    reset_at      timestamptz,
    paused_until  timestamptz,
    observed_at   timestamptz NOT NULL,
    recorded_by   text        NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, resource)
);
