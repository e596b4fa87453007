//! [`MemoryBudget`]: the bytes the operators' state caches may hold together.
//!
//! The server's one `--memory-mb` budget is divided among the state layers (README,
//! "Configuration"): the block cache below SlateDB takes a sixteenth, the operators' caches of
//! their state-table entries half, uncommitted writes and SlateDB's memtables a sixty-fourth
//! each, and the rest is headroom for query execution. Every operator cache adds its bytes
//! here; whichever cache finds the total over the limit sheds its least recently used clean
//! entries (see `eddy_stream::cache`).

use std::sync::atomic::{AtomicUsize, Ordering};

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
