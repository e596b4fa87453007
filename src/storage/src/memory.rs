//! [`MemoryBudget`]: the bytes the operators' state caches may hold together.
//!
//! The server's one `--memory-mb` budget is divided among the state layers (README,
//! "Configuration"): the block cache below SlateDB takes a sixteenth, the operators' caches of
//! their state-table entries half, uncommitted writes and SlateDB's memtables a sixty-fourth
//! each, and the rest is headroom for query execution. Every operator cache adds its bytes
//! here; whichever cache finds the total over the limit sheds its least recently used clean
//! entries (see `eddy_stream::cache`).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Smallest in-memory size at which a holder spills because the shared write budget is
/// exhausted (smaller ones would only make many tiny runs).
pub const MIN_SPILL_BYTES: usize = 4 << 20;

/// A shared byte budget with a running total.
#[derive(Debug)]
pub struct MemoryBudget {
    /// Bytes the holders may use together.
    limit: usize,
    /// Bytes they use now (estimated by each holder).
    used: AtomicUsize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes, none used.
    pub fn new(limit: usize) -> Self {
        Self { limit, used: AtomicUsize::new(0) }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes in use.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// True once the holders use more than the limit.
    pub fn is_over(&self) -> bool {
        self.used() > self.limit
    }

    /// Whether a holder of `held` bytes (already counted here) should move them out of memory
    /// now: when it alone holds half the limit, or when the holders together are over it and
    /// it holds at least [`MIN_SPILL_BYTES`] (smaller spills would only make many
    /// tiny runs or files).
    pub fn calls_for_spill(&self, held: usize) -> bool {
        held > self.limit / 2 || (held >= MIN_SPILL_BYTES && self.is_over())
    }

    /// Records `bytes` more in use.
    pub fn grow(&self, bytes: usize) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records `bytes` released.
    pub fn shrink(&self, bytes: usize) {
        // Holders never release more than they added; saturate anyway rather than wrap.
        let _ = self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| Some(u.saturating_sub(bytes)));
    }
}
