//! Server-wide resource limits (issue 10): how large one message may be, how many bytes of
//! large messages may be buffered and processed at once, how many clients may be connected,
//! and the PostgreSQL timeouts (`statement_timeout`, `idle_in_transaction_session_timeout`)
//! read from each session's settings. Configured in `config`; enforced by the
//! connection loop `conn` (messages, connections, idle timeout) and `wire` (statements).

use std::sync::Arc;
use std::time::Duration;

use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use eddy_common::error::sqlstate;
use eddy_common::EddyError;
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Messages at least this large share the server-wide large-message budget.
pub const LARGE_MESSAGE: usize = 1 << 20;

/// Copies of a large statement's text that exist while it is parsed, rewritten, planned and
/// optimized (tokens, syntax tree, rewritten trees, plan literals and their clones): measured
/// at ~15 for a 20 MB `SELECT length('...')` (32 clients sending them peaked at 1.9 GiB when
/// each was charged its size once).
pub const PROCESSING_COPIES: usize = 16;

/// Largest `--max-message-bytes` accepted: PostgreSQL's own ceiling (1 GiB - 1).
pub const MAX_MESSAGE_CEILING: usize = (1 << 30) - 1;

/// The limits a server enforces, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest frontend message (query text, Parse, Bind, COPY data) in bytes; a larger one is
    /// refused with `54000` before it is buffered, and the connection is closed.
    pub max_message_bytes: usize,
    /// Concurrent client connections; one more is refused with `53300`.
    pub max_connections: usize,
    /// Memory one query's operators may hold (DataFusion memory pool); above it a query
    /// spills where DataFusion can, else fails with `53200`.
    pub query_memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_message_bytes: 64 << 20, max_connections: 100, query_memory_bytes: 512 << 20 }
    }
}

/// The limits' shared state: permits for connections and for large messages in flight.
#[derive(Debug)]
pub struct Admission {
    /// The configured limits.
    pub limits: Limits,
    /// One permit per client connection.
    connections: Arc<Semaphore>,
    /// KiB of memory for buffering and processing large messages, across all connections:
    /// twice `max_message_bytes`. A message is charged [`PROCESSING_COPIES`] times its size
    /// (at most the whole budget, so any allowed message can run alone), so however many
    /// clients send huge queries at once, the server holds and plans a bounded amount.
    large_kib: Arc<Semaphore>,
    /// Size of `large_kib`.
    large_budget_kib: u32,
}

impl Admission {
    /// State for `limits`.
    pub fn new(limits: Limits) -> Arc<Self> {
        let budget = (limits.max_message_bytes.saturating_mul(2) / 1024).clamp(1, u32::MAX as usize) as u32;
        Arc::new(Self {
            connections: Arc::new(Semaphore::new(limits.max_connections)),
            large_kib: Arc::new(Semaphore::new(budget as usize)),
            large_budget_kib: budget,
            limits,
        })
    }

    /// Client connections open now.
    pub fn connections(&self) -> usize {
        self.limits.max_connections.saturating_sub(self.connections.available_permits())
    }

    /// A connection slot, or `None` when `max_connections` clients are connected.
    pub fn connection(&self) -> Option<OwnedSemaphorePermit> {
        self.connections.clone().try_acquire_owned().ok()
    }

    /// Waits until a message of `len` bytes may be buffered; small messages never wait.
    pub async fn message(&self, len: usize) -> Option<OwnedSemaphorePermit> {
        if len < LARGE_MESSAGE {
            return None;
        }
        let kib = (len.saturating_mul(PROCESSING_COPIES).div_ceil(1024)).min(self.large_budget_kib as usize) as u32;
        self.large_kib.clone().acquire_many_owned(kib).await.ok()
    }
}

/// A PostgreSQL time setting (`statement_timeout`, ...): a number of milliseconds, or a number
/// with a unit (`us`, `ms`, `s`, `min`, `h`, `d`). `0` (or anything unparsable) disables it.
pub fn parse_timeout(value: &str) -> Option<Duration> {
    let v = value.trim().trim_matches('\'').trim();
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+')).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: f64 = num.parse().ok()?;
    let ms = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" => n,
        "us" => n / 1000.0,
        "s" => n * 1000.0,
        "min" => n * 60_000.0,
        "h" => n * 3_600_000.0,
        "d" => n * 86_400_000.0,
        _ => return None,
    };
    (ms >= 1.0 && ms.is_finite()).then(|| Duration::from_millis(ms.min(i32::MAX as f64) as u64))
}

/// `57014`, as PostgreSQL reports a statement stopped by `statement_timeout`.
pub fn statement_timeout_error() -> EddyError {
    EddyError::user(sqlstate::QUERY_CANCELED, "canceling statement due to statement timeout")
}

/// `stream`, ending with [`statement_timeout_error`] if `deadline` passes before it does.
pub fn with_deadline(stream: SendableRecordBatchStream, deadline: Option<Instant>) -> SendableRecordBatchStream {
    let Some(deadline) = deadline else { return stream };
    let schema = stream.schema();
    let state = (stream, Box::pin(tokio::time::sleep_until(deadline)), false);
    let timed = futures::stream::unfold(state, |(mut stream, mut sleep, expired)| async move {
        if expired {
            return None;
        }
        tokio::select! {
            biased;
            _ = &mut sleep => {
                let e = DataFusionError::External(Box::new(statement_timeout_error()));
                Some((Err(e), (stream, sleep, true)))
            }
            item = stream.next() => item.map(|i| (i, (stream, sleep, false))),
        }
    });
    Box::pin(RecordBatchStreamAdapter::new(schema, timed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_like_postgres() {
        assert_eq!(parse_timeout("0"), None);
        assert_eq!(parse_timeout("250"), Some(Duration::from_millis(250)));
        assert_eq!(parse_timeout("'5s'"), Some(Duration::from_secs(5)));
        assert_eq!(parse_timeout("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_timeout("2min"), Some(Duration::from_secs(120)));
        assert_eq!(parse_timeout("100 ms"), Some(Duration::from_millis(100)));
        assert_eq!(parse_timeout("-1"), None);
        assert_eq!(parse_timeout("soon"), None);
    }

    #[tokio::test]
    async fn connections_beyond_the_limit_are_refused_and_slots_come_back() {
        let a = Admission::new(Limits { max_connections: 2, ..Limits::default() });
        let (p1, p2) = (a.connection(), a.connection());
        assert!(p1.is_some() && p2.is_some());
        assert!(a.connection().is_none());
        drop(p1);
        assert!(a.connection().is_some());
    }

    #[tokio::test]
    async fn large_messages_share_a_budget_small_ones_do_not_wait() {
        let a = Admission::new(Limits { max_message_bytes: 4 << 20, ..Limits::default() });
        assert!(a.message(100).await.is_none());
        // The budget is 2 x 4 MiB; a message costs 16 times its size, at most all of it.
        let first = a.message(4 << 20).await;
        assert!(first.is_some(), "the largest message runs alone");
        let second = tokio::time::timeout(Duration::from_millis(50), a.message(1 << 20)).await;
        assert!(second.is_err(), "a second large message waits");
        drop(first);
        let (x, y) = (a.message(1 << 19).await, a.message(1 << 20).await);
        assert!(x.is_none() && y.is_some(), "small messages never wait; a 1 MiB one takes 16 MiB, capped");
        let third = tokio::time::timeout(Duration::from_millis(50), a.message(1 << 20)).await;
        assert!(third.is_err());
    }
}
