//! Webhook deliveries: signature verification, the header and payload fields
//! the inbox stores, and the translation of a stored delivery into a run
//! event. Everything here is IO-free; the ingress and dispatcher call it.

mod classify;
mod headers;
mod observation;
mod payload;
mod signature;

pub use classify::{ClassifyContext, ClassifyError, classify};
pub use headers::{
    DELIVERY_HEADER, DeliveryHeaders, DeliveryMeta, EVENT_HEADER, HeaderError,
    LEGACY_SIGNATURE_HEADER, MetaError, SIGNATURE_256_HEADER,
};
pub use observation::{IgnoreReason, IssueRef, Observation};
pub use signature::{SignatureError, sign_body, verify_signature};
