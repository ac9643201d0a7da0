//! Intake: everything that turns what GitHub tells us into run signals.
//!
//! Webhook deliveries (stored by the ingress in the durable inbox) and poll
//! reads are translated into one vocabulary, [`Sighting`]s; each sighting's
//! journal entries ([`ChangeEntries`]: start a run, queue a [`RunSignal`],
//! record a command decision or an audit line, journal an answer for
//! people where no run is) are written in one
//! transaction under a dedupe key, so a change seen twice acts once. The
//! run driver consumes the signals; intake tells it through a
//! [`RunListener`] that new ones are due and never imports the driver.

mod access;
mod answering;
mod dispatcher;
mod entries;
mod held_budgets;
mod inbox;
mod poller;
mod sighting;
mod signal;

pub use access::{GitHubAccess, Served, Suspension, WatchedRepository, repo_name};
pub use answering::send_pending_answers;
pub use dispatcher::{Dispatcher, MAX_ATTEMPTS, retry_delay};
pub use entries::{ChangeEntries, Entry, FIRST_PHASE, Recorded, record};
pub use inbox::JournalInbox;
pub use poller::{PassReport, Poller, redelivery_candidates};
pub use sighting::{
    Sighting, body_digest, comment_key, comment_key_prefix, entries_for, labeling_of_event,
};
pub use signal::{RunListener, RunSignal};
