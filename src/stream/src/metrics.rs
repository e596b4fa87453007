//! Live metrics of running views: one [`ViewMetrics`] per view actor, shared with whoever shows
//! them (the HTTP API, Prometheus, `EXPLAIN ANALYZE MATERIALIZED VIEW`). The actor writes
//! plain atomics (relaxed: each number is read on its own, never as a consistent set), so
//! reading them never waits for the dataflow and costs the dataflow nothing but the stores.
//!
//! A view's operators form a tree (see the actor module): each input ("branch") is an input node
//! followed by its chain, each stage an optional join node followed by its chain. [`Node`]s
//! list them in that order, each naming the node its output goes to.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crate::cache::CacheStats;
use crate::message::ActorId;

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// Where an upstream relation's changes enter.
    Input,
    /// A one-input operator.
    Operator,
    /// A two-input operator (a join).
    Join,
}

impl NodeKind {
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Input => "input",
            NodeKind::Operator => "operator",
            NodeKind::Join => "join",
        }
    }
}

/// One node of a view's operator tree, with its counters.
#[derive(Debug)]
pub struct Node {
    pub kind: NodeKind,
    /// The operator's description (its `Display`), or for an input the upstream relation id.
    pub label: String,
    /// For inputs: the relation read.
    pub relation: Option<u32>,
    /// The node this one's output goes to (`None`: the view's output).
    pub parent: Option<usize>,
    /// The fragment of the view it runs in (see the actor module; 0 for a view of one actor).
    pub fragment: usize,
    pub stats: NodeStats,
}

/// Counters of one node. Rows count every change (an update counts its two halves).
#[derive(Debug, Default)]
pub struct NodeStats {
    pub rows_in: AtomicU64,
    pub rows_out: AtomicU64,
    pub chunks_in: AtomicU64,
    /// Time spent in the operator (prefetch, process, barrier), nanoseconds.
    pub busy_nanos: AtomicU64,
    /// State cache at the last barrier (stateful operators).
    pub state_entries: AtomicU64,
    pub state_bytes: AtomicU64,
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    pub stateful: AtomicBool,
}

impl NodeStats {
    /// Records one call: `rows_in` rows in (in `chunks` chunks), `rows_out` out, since `start`.
    pub fn record(&self, chunks: u64, rows_in: usize, rows_out: usize, start: Instant) {
        self.chunks_in.fetch_add(chunks, Relaxed);
        self.rows_in.fetch_add(rows_in as u64, Relaxed);
        self.rows_out.fetch_add(rows_out as u64, Relaxed);
        self.busy_nanos.fetch_add(start.elapsed().as_nanos() as u64, Relaxed);
    }

    /// Records the change of one actor's operator cache between two barriers (the actors of
    /// a parallel fragment share the node, so its figures are their sums).
    pub fn add_state(&self, before: CacheStats, now: CacheStats) {
        self.stateful.store(true, Relaxed);
        self.state_entries.fetch_add(now.entries.wrapping_sub(before.entries), Relaxed);
        self.state_bytes.fetch_add(now.bytes.wrapping_sub(before.bytes), Relaxed);
        self.cache_hits.fetch_add(now.hits.wrapping_sub(before.hits), Relaxed);
        self.cache_misses.fetch_add(now.misses.wrapping_sub(before.misses), Relaxed);
    }

    /// A consistent-enough copy for display.
    pub fn snapshot(&self) -> NodeSnapshot {
        NodeSnapshot {
            rows_in: self.rows_in.load(Relaxed),
            rows_out: self.rows_out.load(Relaxed),
            chunks_in: self.chunks_in.load(Relaxed),
            busy_nanos: self.busy_nanos.load(Relaxed),
            state: self.stateful.load(Relaxed).then(|| CacheStats {
                entries: self.state_entries.load(Relaxed),
                bytes: self.state_bytes.load(Relaxed),
                hits: self.cache_hits.load(Relaxed),
                misses: self.cache_misses.load(Relaxed),
            }),
        }
    }
}

/// The values of a [`NodeStats`] at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeSnapshot {
    pub rows_in: u64,
    pub rows_out: u64,
    pub chunks_in: u64,
    pub busy_nanos: u64,
    pub state: Option<CacheStats>,
}

impl NodeSnapshot {
    /// Share of lookups answered without a read (`None`: no lookups yet).
    pub fn hit_ratio(&self) -> Option<f64> {
        let s = self.state?;
        let total = s.hits + s.misses;
        (total > 0).then(|| s.hits as f64 / total as f64)
    }
}

/// Progress of a view's initial load.
#[derive(Debug, Default)]
pub struct BackfillProgress {
    /// A backfill is running.
    pub active: AtomicBool,
    /// It finished.
    pub done: AtomicBool,
    /// Actors of the view whose backfill is still running (the view's is done at 0).
    pub pending: AtomicU64,
    /// Upstream rows read so far.
    pub rows_done: AtomicU64,
    /// Upstream rows to read (counted when it starts; 0: unknown).
    pub rows_total: AtomicU64,
    /// Milliseconds since the Unix epoch when it started and ended.
    pub started_ms: AtomicU64,
    pub ended_ms: AtomicU64,
}

/// A backfill's progress at one moment ([`BackfillProgress::report`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressReport {
    /// `running` or `done` (`none`: no backfill ran).
    pub state: &'static str,
    pub rows_done: u64,
    /// Rows to read, once counted.
    pub rows_total: Option<u64>,
    pub percent: Option<f64>,
    pub rows_per_sec: f64,
    pub elapsed_secs: f64,
    /// Estimated seconds left at the rate so far.
    pub eta_secs: Option<f64>,
    /// When it started (ms since the Unix epoch).
    pub started_ms: u64,
}

impl BackfillProgress {
    /// Where the backfill stands now.
    pub fn report(&self) -> ProgressReport {
        let (done, total) = (self.rows_done.load(Relaxed), self.rows_total.load(Relaxed));
        let started_ms = self.started_ms.load(Relaxed);
        let finished = self.done.load(Relaxed);
        let end = if finished { self.ended_ms.load(Relaxed) } else { now_ms() };
        let elapsed_ms = end.saturating_sub(started_ms);
        let rows_per_sec = if elapsed_ms > 0 { done as f64 * 1000.0 / elapsed_ms as f64 } else { 0.0 };
        let rows_total = (total > 0 || finished).then_some(total.max(done));
        ProgressReport {
            state: if finished { "done" } else if self.active.load(Relaxed) { "running" } else { "none" },
            rows_done: done,
            rows_total,
            percent: if finished { Some(100.0) } else { rows_total.filter(|t| *t > 0).map(|t| (done as f64 * 100.0 / t as f64).min(100.0)) },
            rows_per_sec,
            elapsed_secs: elapsed_ms as f64 / 1e3,
            eta_secs: (!finished && rows_per_sec > 0.0).then_some(()).and(rows_total).map(|t| t.saturating_sub(done) as f64 / rows_per_sec),
            started_ms,
        }
    }
}

/// The metrics of one view: the nodes of all its fragments, each node's counters summed over
/// the fragment's parallel actors.
#[derive(Debug)]
pub struct ViewMetrics {
    pub id: ActorId,
    pub nodes: Vec<Node>,
    /// Barriers passed.
    pub epochs: AtomicU64,
    /// Time spent handing output to the views defined on this one (they were slow to take
    /// it: backpressure), nanoseconds.
    pub output_wait_nanos: AtomicU64,
    /// Time spent on barriers (every operator's flush), nanoseconds.
    pub barrier_nanos: AtomicU64,
    pub backfill: BackfillProgress,
    /// When the actor was built.
    pub created: Instant,
}

impl ViewMetrics {
    pub fn new(id: ActorId, nodes: Vec<Node>) -> Self {
        Self {
            id,
            nodes,
            epochs: AtomicU64::new(0),
            output_wait_nanos: AtomicU64::new(0),
            barrier_nanos: AtomicU64::new(0),
            backfill: BackfillProgress::default(),
            created: Instant::now(),
        }
    }

    /// Rows the view's root emitted (its output changes).
    pub fn rows_out(&self) -> u64 {
        self.nodes.iter().filter(|n| n.parent.is_none()).map(|n| n.stats.rows_out.load(Relaxed)).sum()
    }

    /// Rows that entered through the inputs (from upstream relations: an exchange between
    /// the view's own fragments passes on what already entered).
    pub fn rows_in(&self) -> u64 {
        self.nodes.iter().filter(|n| n.kind == NodeKind::Input && n.relation.is_some()).map(|n| n.stats.rows_in.load(Relaxed)).sum()
    }

    /// The operators' caches summed.
    pub fn state(&self) -> CacheStats {
        self.nodes.iter().filter_map(|n| n.stats.snapshot().state).fold(CacheStats::default(), CacheStats::plus)
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Upper bounds (seconds) of [`Histogram`]'s buckets: 1 ms to ~65 s, doubling.
pub const LATENCY_BUCKETS: [f64; 17] =
    [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384, 32.768, 65.536];

/// A latency histogram over [`LATENCY_BUCKETS`] (counts per bucket, not cumulative; the last
/// slot counts what is above every bound).
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: std::time::Duration) {
        let s = d.as_secs_f64();
        let slot = LATENCY_BUCKETS.iter().position(|b| s <= *b).unwrap_or(LATENCY_BUCKETS.len());
        self.counts[slot].fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(d.as_micros() as u64, Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    /// (sum in seconds, count, (upper bound, count) per bucket ending with +Inf); a bucket
    /// counts the observations above the previous bound (not cumulative).
    pub fn buckets(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let buckets = self.counts.iter().enumerate().map(|(i, c)| (LATENCY_BUCKETS.get(i).copied().unwrap_or(f64::INFINITY), c.load(Relaxed))).collect();
        (self.sum_micros.load(Relaxed) as f64 / 1e6, self.count.load(Relaxed), buckets)
    }
}

/// Counters of the barrier manager's commits.
#[derive(Debug, Default)]
pub struct CommitMetrics {
    /// Barrier cut → durable commit.
    pub barrier_latency: Histogram,
    /// Every actor reported → durable commit (the store's write).
    pub commit_latency: Histogram,
    /// Epochs committed and the state changes they wrote.
    pub epochs: AtomicU64,
    pub ops: AtomicU64,
    /// Commits the store refused.
    pub failures: AtomicU64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn histogram_buckets_count_their_own_range_and_end_with_infinity() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(100));
        let (sum, count, buckets) = h.buckets();
        assert_eq!(count, 3);
        assert!((sum - 100.0035).abs() < 1e-9, "{sum}");
        assert_eq!(buckets.first(), Some(&(0.001, 1)));
        assert_eq!(buckets.iter().find(|(b, _)| *b == 0.004).map(|(_, c)| *c), Some(1));
        assert_eq!(buckets.last(), Some(&(f64::INFINITY, 1)));
        assert_eq!(buckets.iter().map(|(_, c)| c).sum::<u64>(), 3);
    }

    #[test]
    fn a_backfill_reports_percent_and_eta_once_its_total_is_known() {
        let b = BackfillProgress::default();
        assert_eq!(b.report().state, "none");
        b.active.store(true, Relaxed);
        b.started_ms.store(now_ms() - 2_000, Relaxed);
        b.rows_done.store(500, Relaxed);
        let r = b.report();
        assert_eq!((r.state, r.rows_total, r.percent, r.eta_secs), ("running", None, None, None));
        b.rows_total.store(2_000, Relaxed);
        let r = b.report();
        assert_eq!((r.rows_total, r.percent), (Some(2_000), Some(25.0)));
        // 500 rows in about 2 s: about 6 s for the 1,500 left.
        let eta = r.eta_secs.unwrap();
        assert!((5.0..7.5).contains(&eta), "{eta}");
        b.done.store(true, Relaxed);
        b.ended_ms.store(now_ms(), Relaxed);
        let r = b.report();
        assert_eq!((r.state, r.percent, r.eta_secs), ("done", Some(100.0), None));
    }
}
