//! Issue 9's measurements of the trustworthy core:
//! - `txn`: `--clients` sessions (default 32) each running three-statement transactions (two
//!   balance UPDATEs and an INSERT between BEGIN and COMMIT) for `--duration`, with a view over
//!   the balances; prints transactions/s, statements/s and commit latency, and checks that the
//!   money is conserved;
//! - `restart`: loads `--rows` wide rows (default 1M of ~1 KiB: about 1 GB of table state)
//!   and a GROUP BY view, SIGKILLs the server and starts it again on the same directory; prints
//!   the time from start to accepting connections, to the view's first answer and to the first
//!   acknowledged INSERT;
//! - `outage`: an in-process server (production store settings) over a fault-injecting object
//!   store on a local directory, four writers inserting; the store refuses every request for
//!   `--duration` (default 10 s); prints how long after the store healed the first write was
//!   acknowledged again and the views verified.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_storage::testing::FaultyStore;
use tokio_postgres::NoTls;

use super::{copy_into, padded_copy_data, print_latency, Opts, Phase, Server};

/// `txn`: concurrent three-statement transactions.
pub async fn scenario_txn(o: &Opts) {
    const ACCOUNTS: i64 = 10_000;
    println!("\n== txn: {} clients, BEGIN; UPDATE; UPDATE; INSERT; COMMIT for {:?} [issue 9]", o.clients, o.duration);
    let s = Server::start("txn", o).await;
    let c = s.connect().await;
    c.batch_execute(&format!(
        "CREATE TABLE acct (id BIGINT PRIMARY KEY, bal BIGINT NOT NULL); \
         INSERT INTO acct SELECT i, 1000 FROM generate_series(1, {ACCOUNTS}) AS s(i); \
         CREATE TABLE transfer (client INT, seq BIGINT, src BIGINT, dst BIGINT, PRIMARY KEY (client, seq)); \
         CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n, sum(bal) AS money FROM acct"
    ))
    .await
    .unwrap();
    let mut conns = Vec::new();
    for _ in 0..o.clients {
        conns.push(s.connect().await);
    }
    let phase = Phase::begin(&s);
    let deadline = Instant::now() + o.duration;
    let mut tasks = Vec::new();
    for (id, mut client) in conns.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let debit = client.prepare("UPDATE acct SET bal = bal - 1 WHERE id = $1").await.unwrap();
            let credit = client.prepare("UPDATE acct SET bal = bal + 1 WHERE id = $1").await.unwrap();
            let log = client.prepare("INSERT INTO transfer VALUES ($1, $2, $3, $4)").await.unwrap();
            let (mut latencies, mut failed) = (Vec::new(), 0u64);
            let mut seq = 0i64;
            let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ id as u64;
            while Instant::now() < deadline {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let (src, dst) = ((rng % ACCOUNTS as u64) as i64 + 1, ((rng >> 20) % ACCOUNTS as u64) as i64 + 1);
                let t = Instant::now();
                let result = async {
                    let tx = client.transaction().await?;
                    tx.execute(&debit, &[&src]).await?;
                    tx.execute(&credit, &[&dst]).await?;
                    tx.execute(&log, &[&(id as i32), &seq, &src, &dst]).await?;
                    tx.commit().await
                }
                .await;
                match result {
                    Ok(()) => latencies.push(t.elapsed()),
                    Err(e) => {
                        if failed == 0 {
                            eprintln!("client {id}: transaction failed: {e}");
                        }
                        failed += 1;
                    }
                }
                seq += 1;
            }
            (latencies, failed)
        }));
    }
    let (mut latencies, mut failed) = (Vec::new(), 0);
    for t in tasks {
        let (l, f) = t.await.unwrap();
        latencies.extend(l);
        failed += f;
    }
    let wall = phase.end(&s);
    let n = latencies.len();
    println!(
        "  RESULT {n} transactions committed in {wall:.2} s = {:.0} transactions/s, {:.0} statements/s (3 per transaction; {failed} failed)",
        n as f64 / wall,
        3.0 * n as f64 / wall
    );
    print_latency("transaction latency (BEGIN .. COMMIT)", &mut latencies);
    let money: String = c.query_one("SELECT money::text FROM total", &[]).await.unwrap().get(0);
    let logged: i64 = c.query_one("SELECT count(*) FROM transfer", &[]).await.unwrap().get(0);
    println!("  check: money in the view {money} (expected {}), transfers logged {logged} (expected {n})", ACCOUNTS * 1000);
    drop(c);
    s.stop();
}

/// Polls `f` every 10 ms until it succeeds; returns the time since `t0`.
async fn first_success<F, Fut>(t0: Instant, limit: Duration, what: &str, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    loop {
        if f().await {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < limit, "{what}: no success within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `restart`: SIGKILL with a large state, then time to serve again.
pub async fn scenario_restart(o: &Opts) {
    let pad = if o.pad == 0 { 1000 } else { o.pad };
    println!("\n== restart: {} rows of ~{pad} bytes and a view, SIGKILL, start again [issue 9]", o.rows);
    let s = Server::start("restart", o).await;
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, a INT, b TEXT, c DOUBLE PRECISION); \
         CREATE MATERIALIZED VIEW by_a AS SELECT a, count(*) AS n, sum(c) AS s, max(length(b)) AS w FROM t GROUP BY a",
    )
    .await
    .unwrap();
    let per_copy = 200_000;
    let mut from = 0;
    while from < o.rows {
        let to = (from + per_copy).min(o.rows);
        copy_into(&c, "COPY t FROM STDIN", padded_copy_data(from, to, pad)).await;
        from = to;
    }
    c.batch_execute("FLUSH").await.unwrap();
    let groups: i64 = c.query_one("SELECT count(*) FROM by_a", &[]).await.unwrap().get(0);
    drop(c);
    let bytes = dir_bytes(&s.dir);
    println!("  loaded: {} rows, view of {groups} groups, state directory {:.2} GB", o.rows, bytes as f64 / 1e9);
    let s = s.restart_after_sigkill(o).await;
    let t0 = s.started;
    let conn_str = s.conn_str();
    let accept = first_success(t0, Duration::from_secs(600), "connect", || async { tokio_postgres::connect(&conn_str, NoTls).await.is_ok() }).await;
    let c = s.connect().await;
    let view = first_success(t0, Duration::from_secs(600), "view", || async { c.query_one("SELECT count(*) FROM by_a", &[]).await.is_ok() }).await;
    let write = first_success(t0, Duration::from_secs(600), "insert", || async {
        c.batch_execute("INSERT INTO t VALUES (-1, 1, 'after the restart', 1.0)").await.is_ok()
    })
    .await;
    let n: i64 = c.query_one("SELECT sum(n)::bigint FROM by_a", &[]).await.unwrap().get(0);
    println!(
        "  RESULT SIGKILL -> accepting connections {:.2} s, view answered {:.2} s, first INSERT acknowledged {:.2} s (with {:.2} GB of state)",
        accept.as_secs_f64(),
        view.as_secs_f64(),
        write.as_secs_f64(),
        bytes as f64 / 1e9
    );
    println!("  check: the view counts {n} rows (expected {})", o.rows + 1);
    let (hwm, _) = s.memory_mib();
    println!("  server peak RSS after the restart {hwm:.0} MiB");
    drop(c);
    s.stop();
}

/// Bytes of all files under `dir`.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// `outage`: the object store is down for `--duration`; time to recover after it heals.
pub async fn scenario_outage(o: &Opts) {
    let outage = o.duration;
    println!("\n== outage: the object store refuses every request for {outage:?} under 4 writers [issue 9]");
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = std::path::PathBuf::from(format!("/tmp/eddy-bench-outage-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let local = Arc::new(eddy_storage::object_store::local::LocalFileSystem::new_with_prefix(&dir).unwrap());
    let faulty = FaultyStore::new(local, 7);
    let config = eddy_server::ServerConfig {
        listen: "127.0.0.1:0".into(),
        state_store: format!("file://{}", dir.display()),
        object_store: Some(faulty.as_object_store()),
        ..eddy_server::ServerConfig::default()
    };
    let srv = eddy_server::start(config).await.expect("server starts");
    let conn_str = format!("host=127.0.0.1 port={} user=root dbname=dev", srv.addr.port());
    let connect = || async {
        let (client, conn) = tokio_postgres::connect(&conn_str, NoTls).await.expect("connect");
        tokio::spawn(conn);
        client
    };
    let c = connect().await;
    c.batch_execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, g INT NOT NULL, v BIGINT NOT NULL); \
         CREATE MATERIALIZED VIEW by_g AS SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g; \
         INSERT INTO t SELECT i, i % 100, i FROM generate_series(1, 100000) AS s(i)",
    )
    .await
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU64::new(1_000_000));
    // The time of each acknowledged write, from the start.
    let t0 = Instant::now();
    let acks = Arc::new(parking_lot::Mutex::new(Vec::<Duration>::new()));
    let failures = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for _ in 0..4 {
        let client = connect().await;
        let (stop, next, acks, failures) = (stop.clone(), next.clone(), acks.clone(), failures.clone());
        writers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let id = next.fetch_add(1, Ordering::Relaxed);
                let sql = format!("INSERT INTO t VALUES ({id}, {}, {id})", id % 100);
                match client.batch_execute(&sql).await {
                    Ok(()) => acks.lock().push(t0.elapsed()),
                    Err(_) => {
                        failures.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = acks.lock().len();
    let down = t0.elapsed();
    faulty.set_down(true);
    tokio::time::sleep(outage).await;
    faulty.set_down(false);
    let healed = t0.elapsed();
    let during = acks.lock().iter().filter(|t| **t > down + Duration::from_millis(500)).count();
    let limit = Duration::from_secs(300);
    let first_ack = loop {
        if let Some(t) = acks.lock().iter().find(|t| **t > healed) {
            break *t - healed;
        }
        assert!(t0.elapsed() - healed < limit, "no write acknowledged within {limit:?} after the store healed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        let _ = w.await;
    }
    let after = acks.lock().iter().filter(|t| **t > healed).count();
    let verified = c.batch_execute("VERIFY MATERIALIZED VIEW by_g").await;
    println!(
        "  RESULT store down {:.1} s: first write acknowledged {:.2} s after it healed ({before} writes before the outage, {during} during it, {after} in the 3 s after the first; {} statements failed)",
        (healed - down).as_secs_f64(),
        first_ack.as_secs_f64(),
        failures.load(Ordering::Relaxed)
    );
    println!("  check: VERIFY MATERIALIZED VIEW by_g after the outage: {}", if verified.is_ok() { "equal".to_string() } else { format!("{verified:?}") });
    drop(c);
    let _ = srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
