//! `eddy bench nexmark`: the Nexmark queries of `sql/nexmark/` over nexmark sources (or bids
//! from a CSV file), each from a clean state directory in a process of its own, with durable
//! checkpoints every second (`--barrier-interval-ms`). It measures from `CREATE MATERIALIZED
//! VIEW` until every source reader of the view has read its whole input and the epoch holding
//! the last of it has committed, and prints per query: events (rows read from the sources),
//! events/s, events per CPU-second of the process, peak RSS, state bytes on disk, p99 barrier
//! latency (cut → durable commit) and p99 freshness (an epoch's start → its commit: how stale a
//! view can be). `--json` prints one object per line.
//!
//! This is a benchmark, not a test: it asserts nothing about time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use eddy_common::{EddyError, Result};
use eddy_sql::frontend::output::Output;
use eddy_sql::frontend::session::Session;
use futures::StreamExt;

use crate::config::ServerConfig;

/// The queries of `sql/nexmark/`, by name.
const QUERIES: &[(&str, &str)] = &[
    ("q0", include_str!("../../../sql/nexmark/q0.sql")),
    ("q1", include_str!("../../../sql/nexmark/q1.sql")),
    ("q2", include_str!("../../../sql/nexmark/q2.sql")),
    ("q3", include_str!("../../../sql/nexmark/q3.sql")),
    ("q4", include_str!("../../../sql/nexmark/q4.sql")),
    ("q5", include_str!("../../../sql/nexmark/q5.sql")),
    ("q6", include_str!("../../../sql/nexmark/q6.sql")),
    ("q7", include_str!("../../../sql/nexmark/q7.sql")),
    ("q8", include_str!("../../../sql/nexmark/q8.sql")),
    ("q9", include_str!("../../../sql/nexmark/q9.sql")),
    ("q10", include_str!("../../../sql/nexmark/q10.sql")),
    ("q13", include_str!("../../../sql/nexmark/q13.sql")),
    ("q14", include_str!("../../../sql/nexmark/q14.sql")),
    ("q15", include_str!("../../../sql/nexmark/q15.sql")),
    ("q16", include_str!("../../../sql/nexmark/q16.sql")),
    ("q17", include_str!("../../../sql/nexmark/q17.sql")),
    ("q18", include_str!("../../../sql/nexmark/q18.sql")),
    ("q19", include_str!("../../../sql/nexmark/q19.sql")),
    ("q20", include_str!("../../../sql/nexmark/q20.sql")),
    ("q21", include_str!("../../../sql/nexmark/q21.sql")),
    ("q22", include_str!("../../../sql/nexmark/q22.sql")),
    ("agg", "CREATE MATERIALIZED VIEW nexmark_agg AS SELECT auction, count(*) AS n, max(price) AS top FROM bid GROUP BY auction;"),
    // A sliding-window aggregate (each bid in 5 windows); with --watermark-secs closed windows
    // leave the operator's state, and `hop-eowc` emits each once.
    (
        "hop",
        "CREATE MATERIALIZED VIEW nexmark_hop AS SELECT auction, window_start, count(*) AS n, max(price) AS top \
         FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) GROUP BY auction, window_start;",
    ),
    (
        "hop-eowc",
        "CREATE MATERIALIZED VIEW nexmark_hop AS SELECT auction, window_start, count(*) AS n, max(price) AS top \
         FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) GROUP BY auction, window_start EMIT ON WINDOW CLOSE;",
    ),
];

/// Queries that read only bids (the ones `--csv` can run).
const BID_ONLY: &[&str] = &["q0", "q1", "q2", "q5", "q7", "q10", "q14", "q15", "q16", "q17", "q18", "q21", "q22", "agg", "hop", "hop-eowc"];

const BID_COLUMNS: &str = "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR";

/// Options of `eddy bench nexmark`.
#[derive(Debug, Clone)]
pub struct NexmarkOptions {
    /// Events in the generated stream (all three types together).
    pub events: u64,
    /// Queries to run (names of [`QUERIES`]).
    pub queries: Vec<String>,
    /// Read bids from this headerless CSV file instead of generating them.
    pub csv: Option<PathBuf>,
    /// One JSON object per line.
    pub json: bool,
    /// Checkpoint interval.
    pub barrier_interval: Duration,
    /// `--memory-mb` of the engine.
    pub memory_mb: Option<u64>,
    /// Splits of each generated source.
    pub splits: u64,
    /// Directory for the state directories (default: the system temp dir).
    pub dir: Option<PathBuf>,
    /// A watermark `N` seconds behind `date_time` on every source.
    pub watermark_secs: Option<u64>,
    /// Actors per fragment of the view (`SET streaming_parallelism`; 0: one per core).
    pub parallelism: u16,
}

/// What one query measured.
#[derive(Debug, Clone)]
pub struct Measured {
    pub query: String,
    pub events: u64,
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub peak_rss_bytes: u64,
    pub state_bytes: u64,
    pub barrier_p99_ms: f64,
    pub freshness_p99_ms: f64,
    pub epochs: usize,
}

impl Measured {
    fn json(&self) -> String {
        format!(
            "{{\"query\":\"{}\",\"events\":{},\"seconds\":{:.3},\"events_per_sec\":{:.0},\"cpu_seconds\":{:.3},\"events_per_cpu_sec\":{:.0},\"peak_rss_bytes\":{},\"state_bytes\":{},\"barrier_p99_ms\":{:.1},\"freshness_p99_ms\":{:.1},\"epochs\":{}}}",
            self.query,
            self.events,
            self.seconds,
            self.events as f64 / self.seconds.max(1e-9),
            self.cpu_seconds,
            self.events as f64 / self.cpu_seconds.max(1e-9),
            self.peak_rss_bytes,
            self.state_bytes,
            self.barrier_p99_ms,
            self.freshness_p99_ms,
            self.epochs
        )
    }

    fn from_json(line: &str) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        Some(Measured {
            query: v["query"].as_str()?.to_string(),
            events: v["events"].as_u64()?,
            seconds: v["seconds"].as_f64()?,
            cpu_seconds: v["cpu_seconds"].as_f64()?,
            peak_rss_bytes: v["peak_rss_bytes"].as_u64()?,
            state_bytes: v["state_bytes"].as_u64()?,
            barrier_p99_ms: v["barrier_p99_ms"].as_f64()?,
            freshness_p99_ms: v["freshness_p99_ms"].as_f64()?,
            epochs: v["epochs"].as_u64()? as usize,
        })
    }
}

/// Runs every query in a child process of its own (so each starts from a clean state and its
/// peak RSS is its own) and prints the results.
pub fn run_nexmark(options: &NexmarkOptions, child_args: &dyn Fn(&str) -> Vec<String>) -> Result<()> {
    let queries = resolve_queries(options)?;
    if !options.json {
        println!(
            "{:<6} {:>10} {:>9} {:>12} {:>14} {:>9} {:>11} {:>11} {:>13}",
            "query", "events", "seconds", "events/s", "events/cpu-s", "rss MiB", "state MiB", "barrier p99", "freshness p99"
        );
    }
    let exe = std::env::current_exe().map_err(|e| EddyError::external(format!("cannot find the eddy binary: {e}")))?;
    for q in queries {
        let out = std::process::Command::new(&exe)
            .args(child_args(&q))
            .env("EDDY_LOG", std::env::var("EDDY_LOG").unwrap_or_else(|_| "warn,slatedb=error".into()))
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| EddyError::external(format!("cannot run the benchmark of {q}: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(m) = text.lines().find_map(Measured::from_json) else {
            eprintln!("eddy bench: {q} failed ({}): {text}", out.status);
            continue;
        };
        if options.json {
            println!("{}", m.json());
        } else {
            println!(
                "{:<6} {:>10} {:>9.2} {:>12.0} {:>14.0} {:>9.0} {:>11.1} {:>9.1}ms {:>11.1}ms",
                m.query,
                m.events,
                m.seconds,
                m.events as f64 / m.seconds.max(1e-9),
                m.events as f64 / m.cpu_seconds.max(1e-9),
                m.peak_rss_bytes as f64 / (1 << 20) as f64,
                m.state_bytes as f64 / (1 << 20) as f64,
                m.barrier_p99_ms,
                m.freshness_p99_ms
            );
        }
    }
    Ok(())
}

fn resolve_queries(options: &NexmarkOptions) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for q in &options.queries {
        if q == "all" {
            let all = QUERIES.iter().map(|(n, _)| *n).filter(|n| options.csv.is_none() || BID_ONLY.contains(n));
            out.extend(all.map(String::from));
            continue;
        }
        if !QUERIES.iter().any(|(n, _)| n == q) {
            let names: Vec<&str> = QUERIES.iter().map(|(n, _)| *n).collect();
            return Err(EddyError::user("22023", format!("unknown query {q} (queries: {})", names.join(", "))));
        }
        if options.csv.is_some() && !BID_ONLY.contains(&q.as_str()) {
            return Err(EddyError::user("22023", format!("{q} reads auctions or persons; --csv supplies only bids")));
        }
        out.push(q.clone());
    }
    Ok(out)
}

/// CPU seconds the process has used (user + system).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut u) != 0 {
            return 0.0;
        }
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    }
}

/// The process's peak resident set (`VmHWM`), in bytes.
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

async fn exec(session: &mut Session, sql: &str) -> Result<()> {
    for stmt in session.parse(sql)? {
        match session.execute(&stmt, vec![]).await? {
            Output::Rows { mut stream, .. } | Output::Returned { mut stream, .. } => while stream.next().await.is_some() {},
            _ => {}
        }
    }
    Ok(())
}

/// Runs one query in this process and prints its [`Measured`] as JSON.
pub async fn run_one(options: &NexmarkOptions, query: &str, base: ServerConfig) -> Result<()> {
    let sql = QUERIES.iter().find(|(n, _)| *n == query).map(|(_, s)| *s).ok_or_else(|| EddyError::user("22023", format!("unknown query {query}")))?;
    let parent = options.dir.clone().unwrap_or_else(std::env::temp_dir);
    let dir = parent.join(format!("eddy-bench-{query}-{}", std::process::id()));
    // A leftover from an interrupted run would not be a clean state.
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| EddyError::external(format!("cannot clear {}: {e}", dir.display())))?;
    }
    let mut config = base;
    config.listen = "127.0.0.1:0".into();
    config.state_store = format!("file://{}", dir.display());
    config.barrier_interval = options.barrier_interval;
    if let Some(mb) = options.memory_mb {
        config.memory_bytes = mb.max(16) << 20;
        config.block_cache_bytes = config.memory_bytes / 16;
    }
    let handle = crate::start(config).await?;
    let engine = handle.engine.clone();
    let mut session = Session::new(engine.clone(), "root", 0);
    let n = options.events;
    let splits = options.splits.max(1);
    let sources = match &options.csv {
        Some(path) => format!(
            "CREATE SOURCE bid ({BID_COLUMNS}) WITH (connector = 'posix_fs', path = '{}') FORMAT PLAIN ENCODE CSV (without_header = 'true')",
            path.display().to_string().replace('\'', "''")
        ),
        None => format!(
            "CREATE SOURCE person (id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR, state VARCHAR, date_time TIMESTAMP, extra VARCHAR) \
             WITH (connector = 'nexmark', nexmark.table.type = 'Person', nexmark.event.num = '{n}', nexmark.split.num = '{splits}');
             CREATE SOURCE auction (id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR) \
             WITH (connector = 'nexmark', nexmark.table.type = 'Auction', nexmark.event.num = '{n}', nexmark.split.num = '{splits}');
             CREATE SOURCE bid ({BID_COLUMNS}) WITH (connector = 'nexmark', nexmark.table.type = 'Bid', nexmark.event.num = '{n}', nexmark.split.num = '{splits}');
             CREATE TABLE side_input (key BIGINT PRIMARY KEY, value VARCHAR);
             INSERT INTO side_input SELECT i, 'value ' || i FROM generate_series(0, 9999) AS s(i)"
        ),
    };
    let sources = match options.watermark_secs {
        // Each source's column list gains the clause before its closing parenthesis.
        Some(w) => {
            let clause = format!("WATERMARK FOR date_time AS date_time - INTERVAL '{w}' SECOND)");
            sources
                .replace("date_time TIMESTAMP, extra VARCHAR)", &format!("date_time TIMESTAMP, extra VARCHAR, {clause}"))
                .replace("category BIGINT, extra VARCHAR)", &format!("category BIGINT, extra VARCHAR, {clause}"))
        }
        None => sources,
    };
    exec(&mut session, &sources).await?;
    exec(&mut session, &format!("SET streaming_parallelism = {}", options.parallelism)).await?;
    let (t0, cpu0) = (Instant::now(), cpu_seconds());
    exec(&mut session, sql).await?;
    let view = engine.catalog().tables().filter(|t| t.is_view()).map(|t| t.id).max().ok_or_else(|| EddyError::internal("the query created no view"))?;
    let (events, finished) = loop {
        let readers: Vec<_> = engine.source_readers().into_iter().filter(|(_, r)| r.view == view).collect();
        if let Some(e) = engine.barrier.failure(view) {
            return Err(e);
        }
        let last = readers.iter().map(|(_, r)| r.stats.finished_epoch.load(std::sync::atomic::Ordering::Relaxed)).collect::<Vec<_>>();
        if !readers.is_empty() && last.iter().all(|e| *e > 0) {
            let until = last.iter().copied().max().unwrap_or(0);
            if engine.store.committed_epoch().0 >= until {
                let events: u64 = readers.iter().map(|(_, r)| r.stats.rows.load(std::sync::atomic::Ordering::Relaxed)).sum();
                break (events, Instant::now());
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let seconds = finished.duration_since(t0).as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let epochs: Vec<_> = engine.barrier.recent_epochs().into_iter().filter(|e| e.cut >= t0 && e.ops > 0).collect();
    let barrier = percentile(epochs.iter().map(|e| e.committed.duration_since(e.cut).as_secs_f64() * 1e3).collect(), 0.99);
    let freshness = percentile(epochs.iter().map(|e| e.committed.duration_since(e.opened).as_secs_f64() * 1e3).collect(), 0.99);
    let peak = peak_rss_bytes();
    let state = dir_bytes(&dir);
    let m = Measured {
        query: query.to_string(),
        events,
        seconds,
        cpu_seconds: cpu,
        peak_rss_bytes: peak,
        state_bytes: state,
        barrier_p99_ms: barrier,
        freshness_p99_ms: freshness,
        epochs: epochs.len(),
    };
    println!("{}", m.json());
    drop(session);
    if let Err(e) = handle.shutdown().await {
        eprintln!("eddy bench: shutdown after {query}: {e}");
    }
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        eprintln!("eddy bench: cannot remove {}: {e}", dir.display());
    }
    Ok(())
}
