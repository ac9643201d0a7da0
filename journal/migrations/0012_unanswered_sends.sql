-- A send that GitHub answered with a 5xx, a timeout, a cut connection or a
-- rate limit, and whose read-back then showed nothing, most likely did not
-- land: it is counted apart (`unanswered`) so that a burst of server errors
-- does not spend the two attempts an effect has for sends whose outcome
-- really is in doubt. The attempts that count are `attempts - unanswered`
-- (at most 2); unanswered sends have their own bound (at most 5), so a
-- write GitHub keeps failing still ends in a conflict an operator sees.
-- Command answers keep the same two counts under the same rule.

ALTER TABLE effects ADD COLUMN unanswered integer NOT NULL DEFAULT 0;
ALTER TABLE effects DROP CONSTRAINT effects_attempts_check;
ALTER TABLE effects ADD CONSTRAINT effects_attempts_check CHECK (
    unanswered BETWEEN 0 AND 5
    AND unanswered <= attempts
    AND attempts - unanswered BETWEEN 0 AND 2
);

ALTER TABLE answers ADD COLUMN unanswered integer NOT NULL DEFAULT 0;
ALTER TABLE answers DROP CONSTRAINT answers_attempts_check;
ALTER TABLE answers ADD CONSTRAINT answers_attempts_check CHECK (
    unanswered BETWEEN 0 AND 5
    AND unanswered <= attempts
    AND attempts - unanswered BETWEEN 0 AND 2
);
