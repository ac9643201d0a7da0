-- The large values the controller writes on its hot paths (every webhook's
-- payload, a run's state on every transition, effect bodies, run events) are
-- compressed with lz4 instead of Postgres's default pglz. pglz costs the
-- server more CPU per value than the rest of an insert: on the ingest bench's
-- 12.6 KB deliveries, one durable insert per commit went from 2.1k to 2.9k
-- per second at one client and from 7.3k to 10.7k at sixteen, for the same
-- stored size (docs/performance-log.md).
--
-- Only values written from now on use lz4; existing ones stay readable as
-- they are. A server built without lz4 (or older than 14, which lacks the
-- clause) keeps pglz: the same data, only slower, so that is a notice and
-- not a failed upgrade.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE deliveries ALTER COLUMN payload SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE runs ALTER COLUMN state SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE effects ALTER COLUMN payload SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE run_events ALTER COLUMN event SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'lz4 compression is not available on this server: %', SQLERRM;
END
$$;
