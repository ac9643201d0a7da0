-- Answers: comments the controller posts outside any run, each answering
-- one observed change (a trigger label added by someone who is not an
-- operator, a command on a thread no run watches). Like an effect, an
-- answer is recorded before it is sent, in the transaction that claims the
-- change's dedupe key, and moves only forward; it has no run and so no run
-- lease, so a sender claims the row itself (`claim_token` fences a sender
-- whose claim expired, like a lease's fencing token).

CREATE TABLE answers (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dedupe_key       text        NOT NULL UNIQUE CHECK (dedupe_key <> ''),
    repository       text        NOT NULL CHECK (repository LIKE '%_/_%'),
    installation_id  bigint,
    thread           bigint      NOT NULL CHECK (thread > 0),
    body             text        NOT NULL CHECK (body <> ''),
    write_nonce      text        NOT NULL CHECK (write_nonce ~ '^[0-9a-f]{32}$'),
    stage            text        NOT NULL DEFAULT 'intended'
                         CHECK (stage IN ('intended', 'attempted', 'observed', 'conflict')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts BETWEEN 0 AND 2),
    observed         jsonb,
    reason           text,
    claim_token      bigint      NOT NULL DEFAULT 0,
    claimed_until    timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX answers_pending ON answers (id) WHERE stage IN ('intended', 'attempted');

-- The same forward-only stage rule as effects; there is no reopen for an
-- answer, so conflict is final too.
CREATE FUNCTION answers_stage_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.stage IS DISTINCT FROM OLD.stage AND NOT (
           (OLD.stage = 'intended'  AND NEW.stage IN ('attempted', 'observed', 'conflict'))
        OR (OLD.stage = 'attempted' AND NEW.stage IN ('observed', 'conflict')))
    THEN
        RAISE EXCEPTION 'illegal answer stage move % -> %', OLD.stage, NEW.stage
            USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.stage IN ('observed', 'conflict') AND NEW IS DISTINCT FROM OLD THEN
        RAISE EXCEPTION 'settled answers are immutable'
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER answers_stage_guard BEFORE UPDATE ON answers
    FOR EACH ROW EXECUTE FUNCTION answers_stage_guard();
