//! Answers: comments posted outside any run, each answering one observed
//! change (SPEC §2: a refused trigger labelling, a command on a thread no
//! run watches). The row is written in the transaction that claims the
//! change, so it exists before anything is sent; it then moves only
//! forward (`intended → attempted → observed | conflict`) like an effect.
//!
//! No run lease fences an answer, so a sender first claims the row for a
//! while ([`Journal::claim_answer`]); every later move checks that claim's
//! token, so a sender whose claim ran out cannot write over the next one.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::effects::{MAX_ATTEMPTS, MAX_UNANSWERED_SENDS, Stage, sends_exhausted};
use crate::error::{JournalError, Result};
use crate::github_ids::IssueNumber;
use crate::ids::AnswerId;
use crate::journal::{Journal, JournalTx};

/// An answer as the observer planned it: the exact body, marker included.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAnswer {
    /// The change it answers (one answer per change).
    pub dedupe_key: String,
    /// `owner/name`.
    pub repository: String,
    /// The installation whose token writes it; `None` with a personal token.
    pub installation_id: Option<i64>,
    /// The issue or pull request conversation.
    pub thread: IssueNumber,
    pub body: String,
    /// The nonce the body's marker carries (32 lowercase hex digits): a
    /// comment with this marker and nonce was written from this row.
    pub write_nonce: String,
}

/// An answer as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Answer {
    pub id: AnswerId,
    pub dedupe_key: String,
    pub repository: String,
    pub installation_id: Option<i64>,
    pub thread: IssueNumber,
    pub body: String,
    pub write_nonce: String,
    #[sqlx(try_from = "String")]
    pub stage: Stage,
    /// Every send so far, unanswered ones included.
    pub attempts: i32,
    /// Sends answered with an error after which nothing was visible; they
    /// do not count against [`MAX_ATTEMPTS`] (as for effects).
    pub unanswered: i32,
    pub observed: Option<Value>,
    pub reason: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl Answer {
    /// True when no further send is allowed, by the effects' rule.
    pub fn sends_exhausted(&self) -> bool {
        sends_exhausted(self.attempts, self.unanswered)
    }
}

/// A sender's hold on one answer, from [`Journal::claim_answer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerClaim {
    pub answer_id: AnswerId,
    pub claim_token: i64,
}

const ANSWER_COLUMNS: &str = "id, dedupe_key, repository, installation_id, thread, body, \
     write_nonce, stage, attempts, unanswered, observed, reason, created_at";

impl JournalTx {
    /// Records `answer` in this transaction; a second answer to the same
    /// change is not written (returns `None`).
    pub async fn insert_answer(&mut self, answer: &NewAnswer) -> Result<Option<AnswerId>> {
        Ok(sqlx::query_scalar(
            "INSERT INTO answers (dedupe_key, repository, installation_id, thread, body, \
                 write_nonce) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (dedupe_key) DO NOTHING RETURNING id",
        )
        .bind(&answer.dedupe_key)
        .bind(&answer.repository)
        .bind(answer.installation_id)
        .bind(answer.thread)
        .bind(&answer.body)
        .bind(&answer.write_nonce)
        .fetch_optional(self.conn())
        .await?)
    }
}

impl Journal {
    /// Answers not yet settled, oldest first.
    pub async fn pending_answers(&self, limit: i64) -> Result<Vec<Answer>> {
        Ok(sqlx::query_as::<_, Answer>(sqlx::AssertSqlSafe(format!(
            "SELECT {ANSWER_COLUMNS} FROM answers WHERE stage IN ('intended', 'attempted') \
             ORDER BY id LIMIT $1"
        )))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Every answer on `repository`'s `thread`, oldest first.
    pub async fn answers_on(&self, repository: &str, thread: IssueNumber) -> Result<Vec<Answer>> {
        Ok(sqlx::query_as::<_, Answer>(sqlx::AssertSqlSafe(format!(
            "SELECT {ANSWER_COLUMNS} FROM answers WHERE repository = $1 AND thread = $2 \
             ORDER BY id"
        )))
        .bind(repository)
        .bind(thread)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The answer `id` as stored now.
    pub async fn answer(&self, id: AnswerId) -> Result<Answer> {
        sqlx::query_as::<_, Answer>(sqlx::AssertSqlSafe(format!(
            "SELECT {ANSWER_COLUMNS} FROM answers WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or(JournalError::NotFound {
            what: "answer",
            id: id.0,
        })
    }

    /// Claims a pending answer for `hold`, unless another sender's claim
    /// is still running; `None` then (or when it is settled).
    pub async fn claim_answer(&self, id: AnswerId, hold: Duration) -> Result<Option<AnswerClaim>> {
        let seconds = hold.as_secs_f64();
        let token: Option<i64> = sqlx::query_scalar(
            "UPDATE answers SET claim_token = claim_token + 1, \
                 claimed_until = now() + make_interval(secs => $2), updated_at = now() \
             WHERE id = $1 AND stage IN ('intended', 'attempted') \
                 AND (claimed_until IS NULL OR claimed_until < now()) \
             RETURNING claim_token",
        )
        .bind(id)
        .bind(seconds)
        .fetch_optional(&self.pool)
        .await?;
        Ok(token.map(|claim_token| AnswerClaim {
            answer_id: id,
            claim_token,
        }))
    }

    /// Moves the answer to `attempted` before its one send, counting the
    /// attempt; refused once the budget is spent
    /// ([`Answer::sends_exhausted`]).
    pub async fn mark_answer_attempted(&self, claim: &AnswerClaim) -> Result<()> {
        let attempts: Option<i32> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "UPDATE answers SET stage = 'attempted', attempts = attempts + 1, updated_at = now() \
             WHERE {HELD} AND attempts - unanswered < $3 AND unanswered < $4 RETURNING attempts"
        )))
        .bind(claim.answer_id)
        .bind(claim.claim_token)
        .bind(MAX_ATTEMPTS)
        .bind(MAX_UNANSWERED_SENDS)
        .fetch_optional(&self.pool)
        .await?;
        match attempts {
            Some(_) => Ok(()),
            None => Err(self.why_not_moved(claim).await),
        }
    }

    /// Records that the last send was answered with an error and nothing
    /// was visible after it (see [`Journal::mark_unanswered`]).
    pub async fn mark_answer_unanswered(&self, claim: &AnswerClaim) -> Result<()> {
        let moved = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE answers SET unanswered = unanswered + 1, updated_at = now() \
             WHERE {HELD} AND stage = 'attempted' AND unanswered < attempts AND unanswered < $3"
        )))
        .bind(claim.answer_id)
        .bind(claim.claim_token)
        .bind(MAX_UNANSWERED_SENDS)
        .execute(&self.pool)
        .await?;
        if moved.rows_affected() == 1 {
            Ok(())
        } else {
            Err(self.why_not_moved(claim).await)
        }
    }

    /// Settles the answer as posted, with what read-back saw.
    pub async fn mark_answer_observed(&self, claim: &AnswerClaim, observed: &Value) -> Result<()> {
        self.settle_answer(claim, Stage::Observed, Some(observed), None)
            .await
    }

    /// Settles the answer as not postable, with the reason.
    pub async fn mark_answer_conflict(&self, claim: &AnswerClaim, reason: &str) -> Result<()> {
        self.settle_answer(claim, Stage::Conflict, None, Some(reason))
            .await
    }

    async fn settle_answer(
        &self,
        claim: &AnswerClaim,
        stage: Stage,
        observed: Option<&Value>,
        reason: Option<&str>,
    ) -> Result<()> {
        let moved = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE answers SET stage = $3, observed = $4, reason = $5, claimed_until = NULL, \
                 updated_at = now() WHERE {HELD}"
        )))
        .bind(claim.answer_id)
        .bind(claim.claim_token)
        .bind(stage.as_str())
        .bind(observed)
        .bind(reason)
        .execute(&self.pool)
        .await?;
        if moved.rows_affected() == 1 {
            Ok(())
        } else {
            Err(self.why_not_moved(claim).await)
        }
    }

    async fn why_not_moved(&self, claim: &AnswerClaim) -> JournalError {
        match self.answer(claim.answer_id).await {
            Ok(answer) if answer.sends_exhausted() => JournalError::InvalidInput(format!(
                "answer {} was already sent {} times ({} answered with an error), the maximum",
                answer.id, answer.attempts, answer.unanswered
            )),
            Ok(_) => JournalError::AnswerClaimLost {
                answer_id: claim.answer_id,
                claim_token: claim.claim_token,
            },
            Err(error) => error,
        }
    }
}

/// The claim is still this sender's and the answer is not settled.
const HELD: &str = "id = $1 AND claim_token = $2 AND claimed_until > now() \
     AND stage IN ('intended', 'attempted')";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testing::TestDatabase;
    use serde_json::json;

    fn answer(key: &str) -> NewAnswer {
        NewAnswer {
            dedupe_key: key.to_owned(),
            repository: "acme/widgets".to_owned(),
            installation_id: Some(7),
            thread: crate::testing::issue(4),
            body: "Hello".to_owned(),
            write_nonce: "0123456789abcdef0123456789abcdef".to_owned(),
        }
    }

    async fn insert(journal: &Journal, key: &str) -> Option<AnswerId> {
        let mut tx = journal.begin().await.unwrap();
        let id = tx.insert_answer(&answer(key)).await.unwrap();
        tx.commit().await.unwrap();
        id
    }

    #[tokio::test]
    async fn one_change_gets_one_answer() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        assert!(insert(journal, "trigger:a/b#4:event-1").await.is_some());
        assert_eq!(insert(journal, "trigger:a/b#4:event-1").await, None);
        assert_eq!(journal.pending_answers(10).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_claimed_answer_cannot_be_claimed_twice_and_a_lost_claim_moves_nothing() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        let id = insert(journal, "k").await.unwrap();
        let first = journal
            .claim_answer(id, Duration::from_millis(200))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            journal
                .claim_answer(id, Duration::from_secs(60))
                .await
                .unwrap(),
            None
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        let second = journal
            .claim_answer(id, Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(
            journal.mark_answer_attempted(&first).await,
            Err(JournalError::AnswerClaimLost { .. })
        ));
        journal.mark_answer_attempted(&second).await.unwrap();
        journal
            .mark_answer_observed(&second, &json!({"comment_id": 3}))
            .await
            .unwrap();
        let stored = journal.answer(id).await.unwrap();
        assert_eq!((stored.stage, stored.attempts), (Stage::Observed, 1));
        assert!(journal.pending_answers(10).await.unwrap().is_empty());
        assert_eq!(
            journal
                .claim_answer(id, Duration::from_secs(60))
                .await
                .unwrap(),
            None,
            "a settled answer is not claimed again"
        );
    }

    #[tokio::test]
    async fn an_answer_is_sent_at_most_twice_when_each_send_may_have_landed() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        let id = insert(journal, "k").await.unwrap();
        let claim = journal
            .claim_answer(id, Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        journal.mark_answer_attempted(&claim).await.unwrap();
        journal.mark_answer_attempted(&claim).await.unwrap();
        assert!(journal.mark_answer_attempted(&claim).await.is_err());
        journal.mark_answer_conflict(&claim, "gone").await.unwrap();
        assert_eq!(journal.answer(id).await.unwrap().stage, Stage::Conflict);
    }

    #[tokio::test]
    async fn error_answers_do_not_spend_an_answers_attempts_but_are_bounded() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        let id = insert(journal, "k").await.unwrap();
        let claim = journal
            .claim_answer(id, Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        for _ in 0..MAX_UNANSWERED_SENDS {
            journal.mark_answer_attempted(&claim).await.unwrap();
            journal.mark_answer_unanswered(&claim).await.unwrap();
        }
        let answer = journal.answer(id).await.unwrap();
        assert_eq!((answer.attempts, answer.unanswered), (5, 5));
        assert!(answer.sends_exhausted());
        let error = journal.mark_answer_attempted(&claim).await.unwrap_err();
        assert!(
            error.to_string().contains("5 answered with an error"),
            "{error}"
        );
    }
}
