//! Server-wide counters of statements (for `/metrics`): how long statements take and how many
//! fail. One set per process (in-process test servers share it).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

use eddy_stream::metrics::Histogram;

#[derive(Debug, Default)]
pub struct ServerMetrics {
    /// Statement run times.
    pub queries: Histogram,
    /// Statements that ended with an error.
    pub query_errors: AtomicU64,
}

/// The process's counters.
pub fn metrics() -> &'static ServerMetrics {
    static METRICS: OnceLock<ServerMetrics> = OnceLock::new();
    METRICS.get_or_init(ServerMetrics::default)
}

/// Records one statement.
pub fn statement(took: Duration, failed: bool) {
    let m = metrics();
    m.queries.observe(took);
    if failed {
        m.query_errors.fetch_add(1, Relaxed);
    }
}
