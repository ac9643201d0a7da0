-- Run events: what the dispatcher and the poller observed for a run, queued
-- durably for the run driver. A change seen both by a webhook and by the
-- poller produces one row, because both build the same `dedupe_key`.
--
-- `observed_changes` remembers every change the dispatcher or poller acted
-- on, including those that produced no run event (a refused trigger label,
-- an ignored comment), so a later sighting of the same change is a no-op.

CREATE TABLE observed_changes (
    dedupe_key       text        PRIMARY KEY CHECK (dedupe_key <> ''),
    source           text        NOT NULL CHECK (source IN ('webhook', 'poll')),
    outcome          text        NOT NULL,
    observed_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE run_events (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id           bigint      NOT NULL REFERENCES runs (id),
    dedupe_key       text        NOT NULL UNIQUE CHECK (dedupe_key <> ''),
    source           text        NOT NULL CHECK (source IN ('webhook', 'poll')),
    event            jsonb       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    consumed_at      timestamptz
);

CREATE INDEX run_events_pending ON run_events (run_id, id) WHERE consumed_at IS NULL;

-- The pull request a run opened or adopted, so PR deliveries find their run.
ALTER TABLE runs ADD COLUMN pull_request bigint;
CREATE INDEX runs_active_pull_request ON runs (repository, pull_request)
    WHERE active AND pull_request IS NOT NULL;
