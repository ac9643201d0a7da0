-- The history of every run's leases: one row per acquisition, written by
-- the statement that grants the lease, so which worker held a run with
-- which fencing token, from when until when, is read from the journal
-- rather than from each replica's own clock. Writes the journal refused
-- to a holder that had lost the run are counted on its row.
--
-- A holding ends at `released_at` when its holder gave the run back, or
-- else at `expires_at`, the last expiry a renewal granted. Rows of a run
-- older than its last 200 acquisitions are pruned when it is leased again.

CREATE TABLE lease_holdings (
    run_id          bigint      NOT NULL REFERENCES runs (id),
    fencing_token   bigint      NOT NULL,
    owner           text        NOT NULL,
    acquired_at     timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    released_at     timestamptz,
    refused_writes  integer     NOT NULL DEFAULT 0 CHECK (refused_writes >= 0),
    last_refused_at timestamptz,
    PRIMARY KEY (run_id, fencing_token)
);
