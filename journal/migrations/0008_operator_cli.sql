-- Commands given on the controller's own host (`autoforge unblock|stop`)
-- reach the run through the same queue as the observers' events, with
-- their own source so the record says where a command came from.

ALTER TABLE run_events DROP CONSTRAINT run_events_source_check;
ALTER TABLE run_events ADD CONSTRAINT run_events_source_check
    CHECK (source IN ('webhook', 'poll', 'operator'));
