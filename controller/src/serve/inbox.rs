//! The journal as the webhook route's durable inbox.

use anyhow::Context;
use autoforge_journal::{InsertOutcome, Journal, NewDelivery};

use crate::webhook::{DeliveryInbox, ReceivedDelivery, StoreOutcome};

/// Stores deliveries with `Journal::insert_delivery`, which commits before
/// it returns, so the route may acknowledge right after.
#[derive(Clone, Debug)]
pub struct JournalInbox {
    journal: Journal,
}

impl JournalInbox {
    pub fn new(journal: Journal) -> Self {
        JournalInbox { journal }
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
        match self.journal.insert_delivery(&row).await? {
            InsertOutcome::Inserted(_) => Ok(StoreOutcome::Stored),
            InsertOutcome::Duplicate => Ok(StoreOutcome::Duplicate),
        }
    }
}
