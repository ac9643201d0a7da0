-- `post_review`: one pull request review per AI review round, with inline
-- comments at the findings whose locations are lines of the reviewed diff.
-- The effect kinds are a closed set, so a new kind widens the CHECK
-- constraint that 0001_initial.sql created; the list below is the whole
-- set, and `EffectKind::ALL` is compared with it by a unit test.

ALTER TABLE effects DROP CONSTRAINT effects_kind_check;
ALTER TABLE effects ADD CONSTRAINT effects_kind_check CHECK (kind IN (
    'push', 'create_pr', 'adopt_pr', 'post_comment',
    'edit_status_comment', 'create_issue',
    'append_issue_markers', 'splice_epic_roadmap',
    'add_reaction', 'set_labels', 'merge_pr', 'check_run', 'post_review'));
