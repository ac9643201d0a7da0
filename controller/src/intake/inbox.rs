//! The journal as the webhook route's durable inbox.

use std::sync::Arc;

use anyhow::Context;
use autoforge_journal::{DeliveryCommitter, InsertOutcome, Journal, NewDelivery};
use tokio::sync::Notify;

use crate::webhook::{DeliveryInbox, ReceivedDelivery, StoreOutcome};

/// Stores deliveries through the journal's group commit
/// ([`DeliveryCommitter`]), which answers only once the delivery's row is
/// committed, so the route may acknowledge right after; deliveries that
/// arrive together share that commit. Each new delivery wakes the local
/// dispatcher, so it does not wait for its next idle poll.
#[derive(Clone, Debug)]
pub struct JournalInbox {
    committer: DeliveryCommitter,
    wakeup: Arc<Notify>,
}

impl JournalInbox {
    /// Starts the journal's committer tasks (on the current runtime); they
    /// end when the last clone of the inbox is dropped.
    pub fn new(journal: &Journal, wakeup: Arc<Notify>) -> Self {
        JournalInbox {
            committer: journal.delivery_committer(),
            wakeup,
        }
    }
}

impl DeliveryInbox for JournalInbox {
    async fn store(&self, delivery: ReceivedDelivery) -> anyhow::Result<StoreOutcome> {
        // GitHub ids fit in i64 today; a larger one is refused rather than
        // wrapped, since a wrong installation would act on the wrong repos.
        let installation_id = delivery
            .meta
            .installation_id
            .map(i64::try_from)
            .transpose()
            .context("the installation id does not fit the inbox column")?;
        let row = NewDelivery {
            delivery_id: delivery.delivery_id,
            event: delivery.event,
            action: delivery.meta.action,
            repository: delivery.meta.repository,
            installation_id,
            payload: delivery.body,
        };
        match self.committer.insert(row).await? {
            InsertOutcome::Inserted(_) => {
                self.wakeup.notify_one();
                Ok(StoreOutcome::Stored)
            }
            InsertOutcome::Duplicate => Ok(StoreOutcome::Duplicate),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::webhook::DeliveryMeta;
    use autoforge_journal::testing::TestDatabase;

    fn delivery(installation_id: Option<u64>) -> ReceivedDelivery {
        ReceivedDelivery {
            delivery_id: "guid-1".to_owned(),
            event: "issues".to_owned(),
            meta: DeliveryMeta {
                action: Some("labeled".to_owned()),
                repository: Some("octo/widgets".to_owned()),
                installation_id,
            },
            body: br#"{"action":"labeled"}"#.to_vec(),
        }
    }

    #[tokio::test]
    async fn a_delivery_is_stored_once_with_its_columns_and_raw_body() {
        let db = TestDatabase::fresh().await;
        let wakeup = Arc::new(Notify::new());
        let inbox = JournalInbox::new(db.journal(), Arc::clone(&wakeup));
        assert_eq!(
            inbox.store(delivery(Some(42))).await.unwrap(),
            StoreOutcome::Stored
        );
        // The stored delivery left a wake-up for the dispatcher.
        tokio::time::timeout(std::time::Duration::from_secs(1), wakeup.notified())
            .await
            .expect("the dispatcher is woken");
        assert_eq!(
            inbox.store(delivery(Some(42))).await.unwrap(),
            StoreOutcome::Duplicate
        );
        let row = db.journal().get_delivery("guid-1").await.unwrap().unwrap();
        assert_eq!(row.installation_id, Some(42));
        assert_eq!(row.repository.as_deref(), Some("octo/widgets"));
        assert_eq!(row.payload, br#"{"action":"labeled"}"#);
    }

    #[tokio::test]
    async fn an_installation_id_beyond_the_column_is_refused_not_wrapped() {
        let db = TestDatabase::fresh().await;
        let inbox = JournalInbox::new(db.journal(), Arc::new(Notify::new()));
        let error = inbox.store(delivery(Some(u64::MAX))).await.unwrap_err();
        assert!(error.to_string().contains("installation id"), "{error}");
        assert!(db.journal().get_delivery("guid-1").await.unwrap().is_none());
    }
}
