//! Webhook deliveries: signature verification and translation of payloads into run events.
