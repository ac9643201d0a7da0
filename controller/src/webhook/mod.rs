//! Webhook deliveries: signature verification, the header and payload fields
//! the inbox stores, the webhook route (`webhook.path`) over an inbox trait, and the
//! translation of a stored delivery into a run event. Apart from the route,
//! everything here is IO-free.

mod classified;
mod classify;
mod headers;
mod ingress;
mod payload;
mod signature;

pub use classified::{Classified, IgnoreReason, RepoIssue, RepoPull, ReviewBy};
pub use classify::{ClassifyContext, ClassifyError, classify};
pub use headers::{
    DELIVERY_HEADER, DeliveryHeaders, DeliveryMeta, EVENT_HEADER, HeaderError,
    LEGACY_SIGNATURE_HEADER, MetaError, SIGNATURE_256_HEADER,
};
pub use ingress::{
    DEFAULT_WEBHOOK_PATH, DeliveryInbox, MAX_CONCURRENT_DELIVERIES, MAX_WEBHOOK_BODY_BYTES,
    ReceivedDelivery, StoreOutcome, WebhookEndpoint, webhook_router,
};
pub use signature::{SignatureError, sign_body, verify_signature};
