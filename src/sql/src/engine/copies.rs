//! Progress of the `COPY ... FROM STDIN` statements of every session: the ones running and the
//! most recent finished ones, for the dashboard and the log. A COPY's data is streamed by the
//! client, so its size is not known ahead: progress is rows and bytes so far and their rates.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use eddy_stream::metrics::now_ms;
use parking_lot::Mutex;

/// How many finished COPYs are remembered.
const RECENT: usize = 8;

/// One COPY's counters, updated by its session.
#[derive(Debug)]
pub struct CopyProgress {
    pub id: u64,
    /// The target table, qualified.
    pub table: String,
    /// Rows accepted and bytes received so far.
    pub rows: AtomicU64,
    pub bytes: AtomicU64,
    /// Milliseconds since the Unix epoch when it started and ended (0: running).
    pub started_ms: u64,
    pub ended_ms: AtomicU64,
    /// It was applied (set before the ticket is dropped; otherwise it ends as `failed`).
    succeeded: AtomicBool,
}

/// A COPY's progress at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyReport {
    pub id: u64,
    pub table: String,
    /// `running`, `done` or `failed`.
    pub state: &'static str,
    pub rows: u64,
    pub bytes: u64,
    pub elapsed_secs: f64,
    pub rows_per_sec: f64,
    pub bytes_per_sec: f64,
    pub started_ms: u64,
}

impl CopyProgress {
    pub fn report(&self) -> CopyReport {
        let ended = self.ended_ms.load(Relaxed);
        let elapsed_ms = if ended > 0 { ended } else { now_ms() }.saturating_sub(self.started_ms);
        let (rows, bytes) = (self.rows.load(Relaxed), self.bytes.load(Relaxed));
        let per_sec = |n: u64| if elapsed_ms > 0 { n as f64 * 1000.0 / elapsed_ms as f64 } else { 0.0 };
        CopyReport {
            id: self.id,
            table: self.table.clone(),
            state: match (ended > 0, self.succeeded.load(Relaxed)) {
                (false, _) => "running",
                (true, true) => "done",
                (true, false) => "failed",
            },
            rows,
            bytes,
            elapsed_secs: elapsed_ms as f64 / 1e3,
            rows_per_sec: per_sec(rows),
            bytes_per_sec: per_sec(bytes),
            started_ms: self.started_ms,
        }
    }
}

#[derive(Debug, Default)]
struct Registry {
    next: u64,
    running: BTreeMap<u64, Arc<CopyProgress>>,
    recent: VecDeque<Arc<CopyProgress>>,
}

/// The COPYs of the server.
#[derive(Debug, Default, Clone)]
pub struct Copies(Arc<Mutex<Registry>>);

impl Copies {
    /// Registers a COPY into `table`; it counts as running until the ticket is dropped.
    pub fn start(&self, table: String) -> CopyTicket {
        let mut r = self.0.lock();
        r.next += 1;
        let progress = Arc::new(CopyProgress {
            id: r.next,
            table,
            rows: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            started_ms: now_ms(),
            ended_ms: AtomicU64::new(0),
            succeeded: AtomicBool::new(false),
        });
        r.running.insert(progress.id, progress.clone());
        CopyTicket { progress, copies: self.clone() }
    }

    /// Running COPYs (oldest first), then the recent finished ones (newest first).
    pub fn reports(&self) -> Vec<CopyReport> {
        let r = self.0.lock();
        r.running.values().chain(r.recent.iter().rev()).map(|p| p.report()).collect()
    }
}

/// A running COPY's handle: its counters, and its registration, ended when dropped (an
/// abandoned COPY — the client went away — ends as `failed`).
#[derive(Debug)]
pub struct CopyTicket {
    pub progress: Arc<CopyProgress>,
    copies: Copies,
}

impl CopyTicket {
    /// Counts data received from the client.
    pub fn received(&self, bytes: usize) {
        self.progress.bytes.fetch_add(bytes as u64, Relaxed);
    }

    /// Counts rows accepted; the total so far.
    pub fn accepted(&self, rows: usize) -> u64 {
        self.progress.rows.fetch_add(rows as u64, Relaxed) + rows as u64
    }

    /// Rows accepted so far.
    pub fn rows(&self) -> u64 {
        self.progress.rows.load(Relaxed)
    }

    /// Records that the COPY was applied.
    pub fn succeeded(&self) {
        self.progress.succeeded.store(true, Relaxed);
    }
}

impl Drop for CopyTicket {
    fn drop(&mut self) {
        self.progress.ended_ms.store(now_ms().max(self.progress.started_ms + 1), Relaxed);
        let mut r = self.copies.0.lock();
        if let Some(p) = r.running.remove(&self.progress.id) {
            r.recent.push_back(p);
            if r.recent.len() > RECENT {
                r.recent.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_runs_until_its_ticket_drops_and_is_remembered_with_its_outcome() {
        let copies = Copies::default();
        let ok = copies.start("public.a".into());
        assert_eq!(ok.accepted(4), 4);
        assert_eq!(ok.accepted(6), 10);
        ok.received(100);
        let bad = copies.start("public.b".into());
        let states: Vec<_> = copies.reports().iter().map(|r| (r.table.clone(), r.state, r.rows)).collect();
        assert_eq!(states, [("public.a".to_string(), "running", 10), ("public.b".to_string(), "running", 0)]);
        ok.succeeded();
        drop(ok);
        drop(bad);
        let states: Vec<_> = copies.reports().iter().map(|r| (r.table.clone(), r.state)).collect();
        assert_eq!(states, [("public.b".to_string(), "failed"), ("public.a".to_string(), "done")]);
        for i in 0..20 {
            drop(copies.start(format!("t{i}")));
        }
        assert_eq!(copies.reports().len(), RECENT);
        assert_eq!(copies.reports()[0].table, "t19");
    }
}
