//! The handle on the state store's background task (folding live runs, collecting garbage
//! runs); the task itself is in `maintenance.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::runs::RunId;

/// Handle on the background task.
pub(crate) struct Maintenance {
    /// Wakes the task early (a commit made runs live, recovery requested garbage collection).
    pub(crate) wake: Arc<Notify>,
    /// Set when garbage runs may exist (after open and recovery).
    pub(crate) gc_pending: Arc<AtomicBool>,
    /// Tells the task to stop.
    pub(crate) stop: watch::Sender<bool>,
    /// The task, while running.
    pub(crate) task: Mutex<Option<JoinHandle<()>>>,
    /// Where the fold of the oldest live run stopped, so the next step starts there.
    pub(crate) fold_cursor: Mutex<Option<FoldCursor>>,
}

/// The last run key a fold step moved, in the store incarnation that wrote it. Every entry of
/// the run up to it is gone (deleted by that step's atomic write), so the next step reads from
/// after it: starting at the run's beginning instead would walk past the tombstones of every
/// earlier step again, which made folding a 5M-entry run quadratic. A cursor of an older
/// incarnation is not trusted: that instance may have died before its steps became durable.
#[derive(Debug, Clone)]
pub(crate) struct FoldCursor {
    /// Generation of the incarnation whose write deleted everything up to `key`.
    pub(crate) generation: u64,
    /// The run being folded.
    pub(crate) run: RunId,
    /// The last run key moved.
    pub(crate) key: Bytes,
}

impl Maintenance {
    /// A handle with no task running and garbage collection pending.
    pub(crate) fn new() -> Self {
        Self {
            wake: Arc::new(Notify::new()),
            gc_pending: Arc::new(AtomicBool::new(true)),
            stop: watch::channel(false).0,
            task: Mutex::new(None),
            fold_cursor: Mutex::new(None),
        }
    }

    /// Wakes the task (no-op if none runs; a wake while it works is remembered).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Asks the task to collect garbage runs.
    pub(crate) fn request_gc(&self) {
        self.gc_pending.store(true, Ordering::SeqCst);
        self.wake();
    }
}
