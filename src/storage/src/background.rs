//! The handle on the state store's background task (folding live runs, collecting garbage
//! runs); the task itself is in `maintenance.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

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
}

impl Maintenance {
    /// A handle with no task running and garbage collection pending.
    pub(crate) fn new() -> Self {
        Self {
            wake: Arc::new(Notify::new()),
            gc_pending: Arc::new(AtomicBool::new(true)),
            stop: watch::channel(false).0,
            task: Mutex::new(None),
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
