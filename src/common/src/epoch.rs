//! Epochs: the unit of consistency. Every state change belongs to exactly one epoch, and epochs
//! commit in order (docs/architecture.md, "Epochs and checkpoints").

use serde::{Deserialize, Serialize};

/// A checkpoint epoch. Strictly increasing; `Epoch(0)` means "nothing committed yet".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Epoch(pub u64);

impl Epoch {
    /// The epoch before anything was committed.
    pub const ZERO: Epoch = Epoch(0);

    /// The epoch that follows this one.
    pub fn next(self) -> Epoch {
        Epoch(self.0 + 1)
    }
}

impl std::fmt::Display for Epoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
