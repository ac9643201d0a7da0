//! The agent phases that return a CONTROL_RESULT.

/// The agent phases that return a CONTROL_RESULT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    Implement,
    Review,
    Fix,
    UpdateEpic,
}

impl Phase {
    /// The `phase` value of the result, also the SPEC's phase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Implement => "IMPLEMENT",
            Self::Review => "REVIEW",
            Self::Fix => "FIX",
            Self::UpdateEpic => "UPDATE_EPIC",
        }
    }

    /// Every phase, for tests and tables.
    pub const ALL: [Phase; 4] = [Self::Implement, Self::Review, Self::Fix, Self::UpdateEpic];
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
