//! Typed row identifiers, so a run id cannot be passed where an effect id is
//! expected.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! row_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
            sqlx::Type,
        )]
        #[sqlx(transparent)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

row_id!(
    /// A row of `deliveries` (the inbox), not GitHub's delivery GUID.
    DeliveryId
);
row_id!(
    /// A run.
    RunId
);
row_id!(
    /// An effect of the write-ahead journal.
    EffectId
);
row_id!(
    /// An agent launch record.
    LaunchId
);
row_id!(
    /// A comment the controller posts outside any run.
    AnswerId
);
