//! Workload benchmarks for issues 2, 3 and 4 (not tests: nothing here asserts on time).
//!
//! Every scenario starts a fresh release `eddy` server as a separate process on a free port with
//! `--state-store file:///tmp/eddy-bench-...` (a new directory each run), drives it with
//! tokio-postgres, prints throughput / latency percentiles, the server's peak RSS (`VmHWM` from
//! `/proc/<pid>/status`) and the CPU seconds used by server and client (so a client bottleneck is
//! visible), then kills the server and removes the directory.
//!
//! ```text
//! CARGO_TARGET_DIR=/work/target-bench nice -n 19 cargo bench -p eddy-server --bench workload -- [SCENARIO...] [--rows N] [--clients N] ...
//! ```
//! Scenarios: `copy`, `insert-latency`, `insert-concurrent`, `copy-mv`, `point-query`, `connect`,
//! `join`, `hop`, `topn`, `copy-flat` and `copy-flat-mv` (issue 8: peak RSS through one large
//! COPY, without and with views; `--pad N` widens each row for multi-gigabyte COPYs), `bids` (issue 12's COPY of 1M bids with one view: `--views`,
//! `--parallelism`), `txn`, `restart` and `outage` (issue 9: 3-statement transactions from
//! `--clients` sessions, SIGKILL to serving with ~1 GB of state, recovery after a store outage),
//! `all` (default). See `benches/README.md`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::SinkExt;
use tokio_postgres::{Client, NoTls, Statement};

#[path = "workload/bids.rs"]
mod bids;
#[path = "workload/operators.rs"]
mod operators;
#[path = "workload/recovery.rs"]
mod recovery;

#[derive(Clone, Debug)]
struct Opts {
    scenarios: Vec<String>,
    rows: usize,
    /// `None`: the scenario's default (1 COPY statement; 10 for `topn`).
    copy_batches: Option<usize>,
    inserts: usize,
    clients: usize,
    duration: Duration,
    mv_rows: usize,
    barrier_interval_ms: Option<u64>,
    block_cache_mb: Option<u64>,
    memory_mb: Option<u64>,
    verify: bool,
    keep_dir: bool,
    /// `bids`: actors per fragment of the view (`SET streaming_parallelism`; 0: one per core).
    parallelism: u16,
    /// `bids`: the views to run (empty: all).
    views: Vec<String>,
    /// `copy-flat*`: characters added to each row's text column (wide rows make a COPY of many
    /// gigabytes with few keys).
    pad: usize,
}

fn parse_args() -> Opts {
    let mut o = Opts {
        scenarios: vec![],
        rows: 1_000_000,
        copy_batches: None,
        inserts: 2_000,
        clients: 32,
        duration: Duration::from_secs(10),
        mv_rows: 100_000,
        barrier_interval_ms: None,
        block_cache_mb: None,
        memory_mb: None,
        verify: false,
        keep_dir: false,
        parallelism: 0,
        views: vec![],
        pad: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().unwrap_or_else(|| panic!("{name} needs a value"));
        match a.as_str() {
            "--bench" => {} // passed by `cargo bench`
            "--rows" => o.rows = val("--rows").parse().unwrap(),
            "--copy-batches" => o.copy_batches = Some(val("--copy-batches").parse::<usize>().unwrap().max(1)),
            "--inserts" => o.inserts = val("--inserts").parse().unwrap(),
            "--clients" => o.clients = val("--clients").parse().unwrap(),
            "--duration" => o.duration = Duration::from_secs_f64(val("--duration").parse().unwrap()),
            "--mv-rows" => o.mv_rows = val("--mv-rows").parse().unwrap(),
            "--barrier-interval-ms" => o.barrier_interval_ms = Some(val("--barrier-interval-ms").parse().unwrap()),
            "--block-cache-mb" => o.block_cache_mb = Some(val("--block-cache-mb").parse().unwrap()),
            "--memory-mb" => o.memory_mb = Some(val("--memory-mb").parse().unwrap()),
            "--verify" => o.verify = true,
            "--parallelism" => o.parallelism = val("--parallelism").parse().unwrap(),
            "--views" => o.views = val("--views").split(',').map(str::to_string).collect(),
            "--keep-dir" => o.keep_dir = true,
            "--pad" => o.pad = val("--pad").parse().unwrap(),
            s if s.starts_with("--") => panic!("unknown flag {s}"),
            s => o.scenarios.push(s.to_string()),
        }
    }
    if o.scenarios.is_empty() || o.scenarios.iter().any(|s| s == "all") {
        o.scenarios = ["copy", "insert-latency", "insert-concurrent", "copy-mv", "point-query", "connect", "join", "hop", "topn"]
            .map(String::from)
            .to_vec();
    }
    o
}

// ---------------------------------------------------------------------------------------------
// The server process

struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
    keep_dir: bool,
    /// When the process was spawned.
    started: Instant,
}

fn eddy_bin() -> PathBuf {
    if let Ok(p) = std::env::var("EDDY_BIN") {
        return p.into();
    }
    env!("CARGO_BIN_EXE_eddy").into()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Server {
    async fn start(name: &str, opts: &Opts) -> Server {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let dir = PathBuf::from(format!("/tmp/eddy-bench-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = Server::spawn(dir, free_port(), opts);
        s.ready().await;
        println!(
            "  server: pid {} port {} state-store file://{} (log {})",
            s.child.id(),
            s.port,
            s.dir.display(),
            s.dir.with_extension("log").display()
        );
        s
    }

    /// Starts `eddy` on `dir` and `port` without waiting for it.
    fn spawn(dir: PathBuf, port: u16, opts: &Opts) -> Server {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.with_extension("log")).unwrap();
        let mut cmd = Command::new(eddy_bin());
        cmd.arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--state-store")
            .arg(format!("file://{}", dir.display()));
        if let Some(ms) = opts.barrier_interval_ms {
            cmd.arg("--barrier-interval-ms").arg(ms.to_string());
        }
        if let Some(mb) = opts.block_cache_mb {
            cmd.arg("--block-cache-mb").arg(mb.to_string());
        }
        if let Some(mb) = opts.memory_mb {
            cmd.arg("--memory-mb").arg(mb.to_string());
        }
        let started = Instant::now();
        let child = cmd.stdout(Stdio::from(log.try_clone().unwrap())).stderr(Stdio::from(log)).spawn().expect("start eddy");
        Server { child, port, dir, keep_dir: opts.keep_dir, started }
    }

    /// Waits until the server accepts connections.
    async fn ready(&self) {
        loop {
            if tokio_postgres::connect(&self.conn_str(), NoTls).await.is_ok() {
                break;
            }
            assert!(self.started.elapsed() < Duration::from_secs(600), "eddy did not start; see {}", self.dir.with_extension("log").display());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGKILLs the server and starts it again on the same directory and port (not waiting).
    async fn restart_after_sigkill(mut self, opts: &Opts) -> Server {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
        let (dir, port) = (self.dir.clone(), self.port);
        Server::spawn(dir, port, opts)
    }

    fn conn_str(&self) -> String {
        format!("host=127.0.0.1 port={} user=root dbname=dev", self.port)
    }

    async fn connect(&self) -> Client {
        let (client, conn) = tokio_postgres::connect(&self.conn_str(), NoTls).await.expect("connect");
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                eprintln!("connection error: {e}");
            }
        });
        client
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// (VmHWM, VmRSS) in MiB.
    fn memory_mib(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .map(|kb| kb / 1024.0)
                .unwrap_or(f64::NAN)
        };
        (field("VmHWM:"), field("VmRSS:"))
    }

    fn cpu_seconds(&self) -> f64 {
        proc_cpu_seconds(&format!("/proc/{}/stat", self.pid()))
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = std::fs::remove_file(self.dir.with_extension("log"));
        }
    }
}

/// utime + stime of a process (all threads) in seconds.
fn proc_cpu_seconds(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the `(comm)` which may contain spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime field 15.
    let ticks = |i: usize| f.get(i - 3).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(14) + ticks(15)) / 100.0 // CLK_TCK is 100 on Linux
}

/// CPU accounting for one measured phase.
struct Phase {
    t0: Instant,
    server_cpu0: f64,
    client_cpu0: f64,
}

impl Phase {
    fn begin(s: &Server) -> Phase {
        Phase { t0: Instant::now(), server_cpu0: s.cpu_seconds(), client_cpu0: proc_cpu_seconds("/proc/self/stat") }
    }
    /// Prints wall time, CPU use of server and client, and memory; returns wall seconds.
    fn end(&self, s: &Server) -> f64 {
        let wall = self.t0.elapsed().as_secs_f64();
        let scpu = s.cpu_seconds() - self.server_cpu0;
        let ccpu = proc_cpu_seconds("/proc/self/stat") - self.client_cpu0;
        let (hwm, rss) = s.memory_mib();
        println!(
            "  wall {wall:.3} s | server cpu {scpu:.2} s ({:.0}% of one core) | client cpu {ccpu:.2} s ({:.0}%) | server peak RSS (VmHWM) {hwm:.0} MiB, RSS now {rss:.0} MiB",
            100.0 * scpu / wall,
            100.0 * ccpu / wall
        );
        wall
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn print_latency(label: &str, lat: &mut [Duration]) {
    lat.sort();
    let mean = lat.iter().map(|d| d.as_secs_f64()).sum::<f64>() / lat.len() as f64 * 1000.0;
    println!(
        "  {label}: n={} p50 {:.2} ms | p90 {:.2} ms | p99 {:.2} ms | max {:.2} ms | mean {:.2} ms",
        lat.len(),
        pct(lat, 50.0),
        pct(lat, 90.0),
        pct(lat, 99.0),
        pct(lat, 100.0),
        mean
    );
}

// ---------------------------------------------------------------------------------------------
// Data

const CREATE_T: &str = "CREATE TABLE t (id BIGINT PRIMARY KEY, a INT, b TEXT, c DOUBLE PRECISION)";

/// COPY text rows `id \t a \t b \t c` for ids in [from, to): a = id % 100000 (100K distinct),
/// b = 'g' || (id % 10) (10 distinct), c = a float. Split into ~64 KiB CopyData messages.
fn copy_data(from: usize, to: usize) -> Vec<Bytes> {
    padded_copy_data(from, to, 0)
}

/// [`copy_data`] with `pad` more characters in column b of every row (varied per row, so the
/// store cannot share them).
fn padded_copy_data(from: usize, to: usize, pad: usize) -> Vec<Bytes> {
    use std::fmt::Write;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    copy_rows(from, to, |id, buf| {
        let _ = write!(buf, "{id}\t{}\tg{}", id % 100_000, id % 10);
        buf.extend((0..pad).map(|i| ALPHABET[(id.wrapping_mul(31) + i * 7) % ALPHABET.len()] as char));
        let _ = writeln!(buf, "\t{}.{}", id % 1000, id % 7);
    })
}

/// COPY text for ids in [from, to), one line per id written by `line`, split into ~64 KiB
/// CopyData messages.
fn copy_rows(from: usize, to: usize, line: impl Fn(usize, &mut String)) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut buf = String::with_capacity(70_000);
    for id in from..to {
        line(id, &mut buf);
        if buf.len() >= 65_536 {
            out.push(Bytes::from(std::mem::take(&mut buf)));
            buf.reserve(70_000);
        }
    }
    if !buf.is_empty() {
        out.push(Bytes::from(buf));
    }
    out
}

async fn copy_in(client: &Client, data: Vec<Bytes>) -> u64 {
    copy_into(client, "COPY t (id, a, b, c) FROM STDIN", data).await
}

async fn copy_into(client: &Client, copy_sql: &str, data: Vec<Bytes>) -> u64 {
    let sink = client.copy_in(copy_sql).await.expect("COPY starts");
    futures::pin_mut!(sink);
    for chunk in data {
        sink.feed(chunk).await.expect("CopyData");
    }
    sink.finish().await.expect("COPY completes")
}

/// COPY `rows` rows in `batches` statements; prints rows/s. Data is generated before timing.
async fn timed_copy(s: &Server, client: &Client, rows: usize, batches: usize, label: &str) {
    let per = rows.div_ceil(batches);
    let data: Vec<Vec<Bytes>> = (0..batches).map(|i| copy_data(i * per, ((i + 1) * per).min(rows))).collect();
    let bytes: usize = data.iter().flatten().map(|b| b.len()).sum();
    println!("  {label}: {rows} rows ({:.1} MiB of COPY text) in {batches} COPY statement(s)", bytes as f64 / 1048576.0);
    let phase = Phase::begin(s);
    let mut n = 0;
    for d in data {
        n += copy_in(client, d).await;
    }
    let wall = phase.end(s);
    println!("  RESULT {label}: {n} rows in {wall:.3} s = {:.0} rows/s", n as f64 / wall);
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// Issue 2: COPY of N rows (4 columns) into a table.
async fn scenario_copy(o: &Opts) {
    println!("\n== copy: COPY {} rows into t(id BIGINT PK, a INT, b TEXT, c DOUBLE) [issue 2]", o.rows);
    let s = Server::start("copy", o).await;
    let c = s.connect().await;
    c.batch_execute(CREATE_T).await.unwrap();
    timed_copy(&s, &c, o.rows, o.copy_batches.unwrap_or(1), "copy").await;
    let n: i64 = c.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
    println!("  check: SELECT count(*) FROM t = {n}");
    drop(c);
    s.stop();
}

/// Issue 8, item 3: one COPY of `--rows` rows, generated as they are sent (the client holds
/// none), into t, and with `views` into t feeding a 100K-group view and a projection view.
/// Prints the server's peak RSS after every tenth of the rows: a COPY whose memory does not
/// grow with its size keeps it flat.
async fn scenario_copy_flat(o: &Opts, views: bool) {
    let label = if views { "copy-flat-mv" } else { "copy-flat" };
    println!("\n== {label}: one COPY of {} rows into t(id BIGINT PK, a INT, b TEXT, c DOUBLE){} [issue 8]", o.rows, if views { " feeding 2 views" } else { "" });
    let s = Server::start(label, o).await;
    let c = s.connect().await;
    c.batch_execute(CREATE_T).await.unwrap();
    if views {
        c.batch_execute(
            "CREATE MATERIALIZED VIEW by_a AS SELECT a, count(*) AS n, sum(c) AS s FROM t GROUP BY a; \
             CREATE MATERIALIZED VIEW some AS SELECT id, b FROM t WHERE id % 10 = 3",
        )
        .await
        .unwrap();
    }
    let phase = Phase::begin(&s);
    let sink = c.copy_in("COPY t (id, a, b, c) FROM STDIN").await.expect("COPY starts");
    futures::pin_mut!(sink);
    let tenth = o.rows.div_ceil(10);
    let mut sent = 0usize;
    for i in 0..10 {
        // Generated a slice at a time, so the client never holds more than ~64 MiB of it.
        let (from, to) = (i * tenth, ((i + 1) * tenth).min(o.rows));
        let step = (64 << 20) / (30 + o.pad);
        for lo in (from..to).step_by(step.max(1)) {
            for chunk in padded_copy_data(lo, (lo + step).min(to), o.pad) {
                sent += chunk.len();
                sink.feed(chunk).await.expect("CopyData");
            }
        }
        let (hwm, rss) = s.memory_mib();
        println!(
            "  {:>3}% sent ({:.2} GiB) at {:.1} s: server peak RSS {hwm:.0} MiB, RSS now {rss:.0} MiB",
            (i + 1) * 10,
            sent as f64 / (1u64 << 30) as f64,
            phase.t0.elapsed().as_secs_f64()
        );
    }
    let n = sink.finish().await.expect("COPY completes");
    let wall = phase.end(&s);
    println!("  RESULT {label}: {n} rows ({:.2} GiB of COPY text) in {wall:.3} s = {:.0} rows/s, {:.1} MiB/s", sent as f64 / (1u64 << 30) as f64, n as f64 / wall, sent as f64 / 1048576.0 / wall);
    drop(c);
    s.stop();
}

/// Issue 2: sequential single-row INSERT latency from one client (prepared statement).
async fn scenario_insert_latency(o: &Opts) {
    println!("\n== insert-latency: {} sequential single-row INSERTs, one client [issue 2]", o.inserts);
    let s = Server::start("insert-latency", o).await;
    let c = s.connect().await;
    c.batch_execute(CREATE_T).await.unwrap();
    let stmt = c.prepare("INSERT INTO t (id, a, b, c) VALUES ($1, $2, $3, $4)").await.unwrap();
    for i in 0..50i64 {
        c.execute(&stmt, &[&(1_000_000_000 + i), &1i32, &"warmup", &0.5f64]).await.unwrap();
    }
    let mut lat = Vec::with_capacity(o.inserts);
    let phase = Phase::begin(&s);
    for i in 0..o.inserts as i64 {
        let t = Instant::now();
        c.execute(&stmt, &[&i, &((i % 100_000) as i32), &"x", &(i as f64)]).await.unwrap();
        lat.push(t.elapsed());
    }
    let wall = phase.end(&s);
    print_latency("RESULT INSERT latency (prepared)", &mut lat);
    println!("  RESULT {:.0} statements/s from one client", o.inserts as f64 / wall);
    // The same through the simple query protocol, for comparison.
    let mut lat = Vec::with_capacity(500);
    for i in 0..500i64 {
        let sql = format!("INSERT INTO t (id, a, b, c) VALUES ({}, 1, 'y', 1.5)", 2_000_000_000 + i);
        let t = Instant::now();
        c.simple_query(&sql).await.unwrap();
        lat.push(t.elapsed());
    }
    print_latency("INSERT latency (simple query, 500)", &mut lat);
    drop(c);
    s.stop();
}

/// Issue 2: N clients each inserting single rows as fast as they can for a fixed duration.
async fn scenario_insert_concurrent(o: &Opts) {
    println!("\n== insert-concurrent: {} clients, single-row INSERTs for {:?} [issue 2]", o.clients, o.duration);
    let s = Server::start("insert-concurrent", o).await;
    let c = s.connect().await;
    c.batch_execute(CREATE_T).await.unwrap();
    let sql = "INSERT INTO t (id, a, b, c) VALUES ($1, $2, $3, $4)";
    let (lat, n, wall) = run_clients(&s, o.clients, o.duration, sql, |client, stmt, id, seq| async move {
        let key = (id as i64) * 100_000_000 + seq as i64;
        client.execute(&stmt, &[&key, &(seq as i32), &"z", &1.0f64]).await.unwrap();
    })
    .await;
    let mut lat = lat;
    println!("  RESULT {n} INSERTs in {wall:.3} s = {:.0} statements/s ({} clients)", n as f64 / wall, o.clients);
    print_latency("INSERT latency under concurrency", &mut lat);
    let cnt: i64 = c.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
    println!("  check: SELECT count(*) FROM t = {cnt} (expected {n})");
    drop(c);
    s.stop();
}

/// Issue 3: COPY into a table that feeds a 100K-group view and a 10-group view; then single-row
/// INSERT latency (= epoch commit latency seen by a client) with the views attached.
async fn scenario_copy_mv(o: &Opts) {
    println!("\n== copy-mv: COPY {} rows into t feeding GROUP BY views of 100K and 10 groups [issue 3]", o.rows);
    let s = Server::start("copy-mv", o).await;
    let c = s.connect().await;
    c.batch_execute(CREATE_T).await.unwrap();
    // Prefer the GROUP BY expression form; fall back to columns with that cardinality.
    let expr_ok = c
        .batch_execute("CREATE MATERIALIZED VIEW g100k AS SELECT id % 100000 AS k, count(*) AS n, sum(c) AS s FROM t GROUP BY id % 100000")
        .await;
    match expr_ok {
        Ok(()) => println!("  g100k: GROUP BY id % 100000 (expression accepted)"),
        Err(e) => {
            println!("  GROUP BY expression refused ({e}); using column a (100K distinct values)");
            c.batch_execute("CREATE MATERIALIZED VIEW g100k AS SELECT a AS k, count(*) AS n, sum(c) AS s FROM t GROUP BY a").await.unwrap();
        }
    }
    c.batch_execute("CREATE MATERIALIZED VIEW g10 AS SELECT b, count(*) AS n, sum(c) AS s, avg(c) AS av FROM t GROUP BY b").await.unwrap();
    timed_copy(&s, &c, o.rows, o.copy_batches.unwrap_or(1), "copy-mv").await;
    let n100k: i64 = c.query_one("SELECT count(*) FROM g100k", &[]).await.unwrap().get(0);
    let sum100k: i64 = c.query_one("SELECT sum(n)::BIGINT FROM g100k", &[]).await.unwrap().get(0);
    let n10: i64 = c.query_one("SELECT count(*) FROM g10", &[]).await.unwrap().get(0);
    let sum10: i64 = c.query_one("SELECT sum(n)::BIGINT FROM g10", &[]).await.unwrap().get(0);
    println!("  check: g100k has {n100k} groups, sum(n) = {sum100k}; g10 has {n10} groups, sum(n) = {sum10}");

    // Epoch commit latency as seen by a client: single-row INSERTs (each one early-barrier epoch)
    // while both views are attached and populated.
    let stmt = c.prepare("INSERT INTO t (id, a, b, c) VALUES ($1, $2, $3, $4)").await.unwrap();
    let mut lat = Vec::with_capacity(o.inserts);
    let phase = Phase::begin(&s);
    for i in 0..o.inserts as i64 {
        let id = o.rows as i64 + i;
        let t = Instant::now();
        c.execute(&stmt, &[&id, &((id % 100_000) as i32), &format!("g{}", id % 10), &1.0f64]).await.unwrap();
        lat.push(t.elapsed());
    }
    phase.end(&s);
    print_latency("RESULT epoch commit latency (single-row INSERT with 2 views attached)", &mut lat);
    drop(c);
    s.stop();
}

/// Issue 4: N clients running a point query on a materialized view.
async fn scenario_point_query(o: &Opts) {
    println!(
        "\n== point-query: {} clients, SELECT * FROM mv WHERE k = $1 for {:?}, mv has {} groups [issue 4]",
        o.clients, o.duration, o.mv_rows.min(100_000)
    );
    let s = Server::start("point-query", o).await;
    let c = s.connect().await;
    c.batch_execute(CREATE_T).await.unwrap();
    copy_in(&c, copy_data(0, o.mv_rows)).await;
    c.batch_execute("CREATE MATERIALIZED VIEW mv AS SELECT a AS k, count(*) AS n, sum(c) AS s FROM t GROUP BY a").await.unwrap();
    let groups = o.mv_rows.min(100_000) as u64;
    // One client first: the latency without contention.
    let sql = "SELECT * FROM mv WHERE k = $1";
    let (mut lat, n, wall) = run_clients(&s, 1, Duration::from_secs(3), sql, move |client, stmt, _id, seq| async move {
        let k = (seq.wrapping_mul(2654435761) % groups) as i32;
        let rows = client.query(&stmt, &[&k]).await.unwrap();
        assert_eq!(rows.len(), 1, "k = {k}");
    })
    .await;
    println!("  1 client: {n} queries in {wall:.2} s = {:.0} queries/s", n as f64 / wall);
    print_latency("point query latency, 1 client", &mut lat);
    let (mut lat, n, wall) = run_clients(&s, o.clients, o.duration, sql, move |client, stmt, id, seq| async move {
        let k = ((seq + (id as u64) * 7919).wrapping_mul(2654435761) % groups) as i32;
        let rows = client.query(&stmt, &[&k]).await.unwrap();
        assert_eq!(rows.len(), 1, "k = {k}");
    })
    .await;
    println!("  RESULT {} clients: {n} queries in {wall:.2} s = {:.0} queries/s", o.clients, n as f64 / wall);
    print_latency("RESULT point query latency", &mut lat);
    drop(c);
    s.stop();
}

/// Issue 4 (reference point for the Python/JDBC figures): tokio-postgres connect to first row.
async fn scenario_connect(o: &Opts) {
    println!("\n== connect: tokio-postgres connection setup to first row (SELECT 1) [issue 4]");
    let s = Server::start("connect", o).await;
    let mut lat = Vec::new();
    for i in 0..120 {
        let t = Instant::now();
        let (client, conn) = tokio_postgres::connect(&s.conn_str(), NoTls).await.unwrap();
        let h = tokio::spawn(conn);
        let _ = client.simple_query("SELECT 1").await.unwrap();
        let e = t.elapsed();
        drop(client);
        let _ = h.await;
        if i >= 20 {
            lat.push(e);
        }
    }
    print_latency("RESULT tokio-postgres connect to first row (100 after 20 warm-up)", &mut lat);
    s.stop();
}

/// Runs `clients` connections, each preparing `sql` once and then calling
/// `op(client, statement, client_id, seq)` in a loop until `duration` has passed. Returns all
/// latencies, the count and the wall time.
async fn run_clients<F, Fut>(s: &Server, clients: usize, duration: Duration, sql: &str, op: F) -> (Vec<Duration>, usize, f64)
where
    F: Fn(Arc<Client>, Statement, usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let mut conns = Vec::new();
    for _ in 0..clients {
        let c = s.connect().await;
        let stmt = c.prepare(sql).await.expect("prepare");
        conns.push((Arc::new(c), stmt));
    }
    let phase = Phase::begin(s);
    let deadline = Instant::now() + duration;
    let mut handles = Vec::new();
    for (id, (client, stmt)) in conns.into_iter().enumerate() {
        let op = op.clone();
        handles.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut seq = 0u64;
            while Instant::now() < deadline {
                let t = Instant::now();
                op(client.clone(), stmt.clone(), id, seq).await;
                lat.push(t.elapsed());
                seq += 1;
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    let wall = phase.end(s);
    let n = all.len();
    (all, n, wall)
}

fn main() {
    let o = parse_args();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!("eddy workload bench: {} | {cores} cores | scenarios {:?}", eddy_bin().display(), o.scenarios);
    // A small client runtime: two worker threads are plenty for 32 connections and keep the
    // client's CPU share visible in the per-phase report.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        for sc in o.scenarios.clone() {
            match sc.as_str() {
                "copy" => scenario_copy(&o).await,
                "insert-latency" => scenario_insert_latency(&o).await,
                "insert-concurrent" => scenario_insert_concurrent(&o).await,
                "copy-mv" => scenario_copy_mv(&o).await,
                "copy-flat" => scenario_copy_flat(&o, false).await,
                "copy-flat-mv" => scenario_copy_flat(&o, true).await,
                "point-query" => scenario_point_query(&o).await,
                "connect" => scenario_connect(&o).await,
                "join" => operators::scenario_join(&o).await,
                "hop" => operators::scenario_hop(&o).await,
                "topn" => operators::scenario_topn(&o).await,
                "bids" => bids::scenario_bids(&o).await,
                "txn" => recovery::scenario_txn(&o).await,
                "restart" => recovery::scenario_restart(&o).await,
                "outage" => recovery::scenario_outage(&o).await,
                other => panic!("unknown scenario {other}"),
            }
        }
    });
}
