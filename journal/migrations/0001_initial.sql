-- The initial autoforge schema: the webhook inbox, runs with leases, the
-- write-ahead effect journal and the records the dashboard shows.
--
-- Which phases are terminal is decided here and nowhere else in SQL: the
-- generated `runs.active` column. Queries test `active`, never a phase list.

CREATE TABLE deliveries (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id      text        NOT NULL UNIQUE,
    event            text        NOT NULL,
    action           text,
    repository       text,
    installation_id  bigint,
    payload          bytea       NOT NULL,
    received_at      timestamptz NOT NULL DEFAULT now(),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    claimed_by       text,
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    processed_at     timestamptz,
    failed_at        timestamptz,
    error            text,
    CHECK (processed_at IS NULL OR failed_at IS NULL)
);

-- Workers only ever look for rows that are neither processed nor given up.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id)
    WHERE processed_at IS NULL AND failed_at IS NULL;
CREATE INDEX deliveries_failed ON deliveries (failed_at DESC)
    WHERE failed_at IS NOT NULL;

CREATE TABLE runs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    repository       text        NOT NULL,
    epic             bigint,
    current_issue    bigint      NOT NULL,
    phase            text        NOT NULL CHECK (phase <> ''),
    active           boolean     GENERATED ALWAYS AS
                         (phase NOT IN ('DONE', 'FAILED', 'STOPPED')) STORED,
    state            jsonb       NOT NULL,
    version          bigint      NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_expires_at timestamptz,
    fencing_token    bigint      NOT NULL DEFAULT 0,
    wake_at          timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL))
);

-- At most one active run per issue and per EPIC (SPEC §2).
CREATE UNIQUE INDEX runs_one_active_per_issue ON runs (repository, current_issue)
    WHERE active;
CREATE UNIQUE INDEX runs_one_active_per_epic ON runs (repository, epic)
    WHERE active AND epic IS NOT NULL;
CREATE INDEX runs_due ON runs (wake_at, id) WHERE active;

CREATE TABLE effects (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id           bigint      NOT NULL REFERENCES runs (id),
    phase_entry      bigint      NOT NULL,
    position         integer     NOT NULL CHECK (position >= 0),
    kind             text        NOT NULL CHECK (kind IN (
                         'push', 'create_pr', 'adopt_pr', 'post_comment',
                         'edit_status_comment', 'create_issue',
                         'append_issue_markers', 'splice_epic_roadmap',
                         'add_reaction', 'set_labels', 'merge_pr', 'check_run')),
    identity         text        NOT NULL,
    target           text        NOT NULL,
    precondition     jsonb       NOT NULL,
    payload          bytea       NOT NULL,
    completion       jsonb       NOT NULL,
    stage            text        NOT NULL DEFAULT 'intended'
                         CHECK (stage IN ('intended', 'attempted', 'observed', 'conflict')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts BETWEEN 0 AND 2),
    observed         jsonb,
    reason           text,
    fencing_token    bigint      NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, phase_entry, position)
);

CREATE INDEX effects_pending ON effects (run_id, phase_entry, position)
    WHERE stage IN ('intended', 'attempted');

-- The stage machine is enforced by the database too, so that no code path
-- (including a future one written in a hurry) can move an effect backwards.
-- conflict -> intended exists only for the explicit reopen call.
CREATE FUNCTION effects_stage_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.stage IS DISTINCT FROM OLD.stage AND NOT (
           (OLD.stage = 'intended'  AND NEW.stage IN ('attempted', 'observed', 'conflict'))
        OR (OLD.stage = 'attempted' AND NEW.stage IN ('observed', 'conflict'))
        OR (OLD.stage = 'conflict'  AND NEW.stage = 'intended'))
    THEN
        RAISE EXCEPTION 'illegal effect stage move % -> %', OLD.stage, NEW.stage
            USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.stage = 'observed' AND NEW IS DISTINCT FROM OLD THEN
        RAISE EXCEPTION 'observed effects are immutable'
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER effects_stage_guard BEFORE UPDATE ON effects
    FOR EACH ROW EXECUTE FUNCTION effects_stage_guard();

CREATE TABLE agent_launches (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id           bigint      NOT NULL REFERENCES runs (id),
    phase            text        NOT NULL,
    role             text        NOT NULL,
    profile          text        NOT NULL,
    attempt          integer     NOT NULL CHECK (attempt >= 0),
    started_at       timestamptz NOT NULL DEFAULT now(),
    ended_at         timestamptz,
    exit_status      integer,
    duration_ms      bigint      CHECK (duration_ms >= 0),
    tokens           bigint      CHECK (tokens >= 0),
    log_dir          text        NOT NULL,
    outcome          text
);
CREATE INDEX agent_launches_run ON agent_launches (run_id, id);

CREATE TABLE validation_records (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id           bigint      NOT NULL REFERENCES runs (id),
    sha              text        NOT NULL CHECK (sha ~ '^[0-9a-f]{40}$'),
    command_index    integer     NOT NULL CHECK (command_index >= 0),
    command          text        NOT NULL,
    outcome          text        NOT NULL CHECK (outcome IN ('PASS', 'FAIL', 'TIMEOUT')),
    duration_ms      bigint      NOT NULL CHECK (duration_ms >= 0),
    output_tail      text        NOT NULL,
    recorded_at      timestamptz NOT NULL DEFAULT now(),
    -- A failure is final for a commit (SPEC §12): one record per command and SHA.
    UNIQUE (run_id, sha, command_index)
);

CREATE TABLE command_decisions (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id           bigint      REFERENCES runs (id),
    comment_id       bigint      NOT NULL,
    actor            text        NOT NULL,
    command          text        NOT NULL,
    accepted         boolean     NOT NULL,
    reason           text        NOT NULL,
    decided_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX command_decisions_run ON command_decisions (run_id, id);
CREATE INDEX command_decisions_comment ON command_decisions (comment_id);

CREATE TABLE audit_events (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id           bigint      REFERENCES runs (id),
    kind             text        NOT NULL,
    detail           jsonb       NOT NULL,
    recorded_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_events_run ON audit_events (run_id, id);
