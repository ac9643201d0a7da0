-- Live progress and cost of agent launches. A launch row is now written when
-- the process starts, with its process id, and refreshed by heartbeats
-- while it runs (elapsed time, output so far, tokens so far where the
-- profile's output format reports them). A row still without an end after a
-- controller restart whose process is gone is ended as `lost`.
-- Token counts are kept apart (input, output, cache reads) so that a
-- profile's price table can turn them into an estimated cost, stored in
-- millionths of the price table's currency unit.

ALTER TABLE agent_launches
    ADD COLUMN pid            integer CHECK (pid > 0),
    ADD COLUMN heartbeat_at   timestamptz,
    ADD COLUMN elapsed_ms     bigint CHECK (elapsed_ms >= 0),
    ADD COLUMN output_bytes   bigint CHECK (output_bytes >= 0),
    ADD COLUMN input_tokens   bigint CHECK (input_tokens >= 0),
    ADD COLUMN output_tokens  bigint CHECK (output_tokens >= 0),
    ADD COLUMN cached_tokens  bigint CHECK (cached_tokens >= 0),
    ADD COLUMN cost_micros    bigint CHECK (cost_micros >= 0);

-- The running launches of a run (at most one) and of all runs (recovery).
CREATE INDEX agent_launches_running ON agent_launches (run_id) WHERE ended_at IS NULL;
