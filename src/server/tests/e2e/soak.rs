//! Soak under load (issue 10): 32 clients mix transfers in transaction blocks, inserts and
//! deletes, view reads and DDL for `EDDY_SOAK_SECS` (default 60). Transfers keep the total
//! balance constant, so every read of the `total` view must see exactly the initial total
//! (atomic commits, one snapshot per statement); no statement may fail with XX000; every view
//! equals its recomputation at the end. Freshness probes upsert a client's sequence number and
//! read it back from a view until it shows (insert-to-visible time). Prints statements/s,
//! p50/p99 latency, freshness, errors by SQLSTATE and the process RSS over time.
//!
//! The server is in-process by default. `EDDY_SOAK_BIN=/path/to/eddy` runs the soak against
//! that binary instead (a release build, on a durable local store), with its own RSS sampled:
//! `EDDY_SOAK_BIN=target/release/eddy EDDY_SOAK_SECS=600 cargo test -p eddy-server --test e2e
//! soak -- --nocapture` is the 10-minute soak of issue 10.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::process::Eddy;
use crate::support::{connect, rows, server, temp_dir, verify};
use eddy_server::ServerHandle;

const ACCOUNTS: i64 = 200;
const INITIAL: i64 = 1000;

/// The server under test: in this process, or a separate `eddy` binary.
enum Target {
    InProcess(ServerHandle),
    Binary(Eddy),
}

impl Target {
    async fn start() -> Self {
        match std::env::var("EDDY_SOAK_BIN") {
            Ok(bin) => {
                let dir = temp_dir("soak-bin");
                let store = format!("file://{}", dir.join("state").display());
                Target::Binary(Eddy::launch(&bin, "soak-bin-log", &["--state-store", &store]))
            }
            Err(_) => Target::InProcess(server("memory://").await),
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        match self {
            Target::InProcess(s) => s.addr,
            Target::Binary(e) => e.addr,
        }
    }

    /// The server's resident memory in KiB (the whole test process when in-process).
    fn rss_kib(&self) -> u64 {
        match self {
            Target::InProcess(_) => std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
                .unwrap_or(0),
            Target::Binary(e) => e.rss_kib(),
        }
    }
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    /// Insert-to-visible times of the freshness probes.
    freshness_us: Vec<u64>,
    errors: BTreeMap<String, u64>,
    broken: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_clients_mixing_dml_transactions_reads_and_ddl_keep_views_exact() {
    let secs: u64 = std::env::var("EDDY_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let srv = Arc::new(Target::start().await);
    let c = connect(srv.addr()).await;
    let accounts: Vec<String> = (0..ACCOUNTS).map(|i| format!("({i}, {INITIAL}, {})", i % 10)).collect();
    c.batch_execute(&format!(
        "CREATE TABLE acct (id BIGINT PRIMARY KEY, bal BIGINT NOT NULL, branch INT NOT NULL);
         CREATE TABLE note (id BIGINT PRIMARY KEY, acct BIGINT, body TEXT);
         INSERT INTO acct VALUES {};
         CREATE MATERIALIZED VIEW total AS SELECT sum(bal) AS s, count(*) AS n FROM acct;
         CREATE MATERIALIZED VIEW per_branch AS SELECT branch, sum(bal) AS s FROM acct GROUP BY branch;
         CREATE MATERIALIZED VIEW noted AS SELECT a.branch, count(n.id) AS notes FROM acct a LEFT JOIN note n ON n.acct = a.id GROUP BY a.branch;
         CREATE MATERIALIZED VIEW richest AS SELECT id, bal FROM acct ORDER BY bal DESC, id LIMIT 5;
         CREATE TABLE ping (client INT PRIMARY KEY, seq BIGINT NOT NULL);
         CREATE MATERIALIZED VIEW pings AS SELECT client, seq FROM ping;",
        accounts.join(", ")
    ))
    .await
    .unwrap();
    let expected_total = (ACCOUNTS * INITIAL).to_string();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let rss = Arc::new(Mutex::new(vec![srv.rss_kib()]));
    let sampler = {
        let (rss, srv) = (rss.clone(), srv.clone());
        // Every 2 s, or 60 samples over a long soak.
        let every = Duration::from_secs((secs / 60).max(2));
        tokio::spawn(async move {
            while Instant::now() < deadline {
                tokio::time::sleep(every).await;
                rss.lock().push(srv.rss_kib());
            }
        })
    };
    let mut clients = Vec::new();
    for client in 0..32u64 {
        let (tally, addr, expected_total) = (tally.clone(), srv.addr(), expected_total.clone());
        clients.push(tokio::spawn(async move {
            let c = connect(addr).await;
            let mut rng = StdRng::seed_from_u64(client);
            let mut next_note = client * 1_000_000;
            let mut probe = 0i64;
            while Instant::now() < deadline {
                let started = Instant::now();
                let pick = rng.gen_range(0..100);
                let result = if pick < 40 {
                    let (a, b, amount) = (rng.gen_range(0..ACCOUNTS), rng.gen_range(0..ACCOUNTS), rng.gen_range(1..50));
                    c.batch_execute(&format!(
                        "BEGIN; UPDATE acct SET bal = bal - {amount} WHERE id = {a}; UPDATE acct SET bal = bal + {amount} WHERE id = {b}; COMMIT"
                    ))
                    .await
                    .map(|_| ())
                } else if pick < 55 {
                    next_note += 1;
                    c.batch_execute(&format!("INSERT INTO note VALUES ({next_note}, {}, 'n')", rng.gen_range(0..ACCOUNTS))).await.map(|_| ())
                } else if pick < 62 {
                    c.batch_execute(&format!("DELETE FROM note WHERE acct = {}", rng.gen_range(0..ACCOUNTS))).await.map(|_| ())
                } else if pick < 65 {
                    // Freshness: the upserted sequence number shows in the view within a deadline.
                    probe += 1;
                    let seq = probe;
                    let upsert = format!("INSERT INTO ping VALUES ({client}, {seq}) ON CONFLICT (client) DO UPDATE SET seq = excluded.seq");
                    match c.batch_execute(&upsert).await {
                        Ok(()) => {
                            let acked = Instant::now();
                            let read = format!("SELECT seq FROM pings WHERE client = {client}");
                            loop {
                                if rows(&c, &read).await.is_ok_and(|r| r == vec![vec![seq.to_string()]]) {
                                    tally.lock().freshness_us.push(acked.elapsed().as_micros() as u64);
                                    break;
                                }
                                if acked.elapsed() > Duration::from_secs(60) {
                                    tally.lock().broken.push(format!("ping {seq} of client {client} not visible after 60 s"));
                                    break;
                                }
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                } else if pick < 97 {
                    match rows(&c, "SELECT s, n FROM total").await {
                        Ok(r) if r == vec![vec![expected_total.clone(), ACCOUNTS.to_string()]] => Ok(()),
                        Ok(r) => {
                            tally.lock().broken.push(format!("total read {r:?}"));
                            Ok(())
                        }
                        Err(e) => {
                            *tally.lock().errors.entry(e.split(':').next().unwrap_or("?").to_string()).or_default() += 1;
                            Ok(())
                        }
                    }
                } else {
                    let v = format!("tmp_{client}");
                    c.batch_execute(&format!("CREATE MATERIALIZED VIEW {v} AS SELECT branch, max(bal) AS top FROM acct GROUP BY branch; DROP MATERIALIZED VIEW {v}"))
                        .await
                        .map(|_| ())
                };
                let elapsed = started.elapsed().as_micros() as u64;
                let failed = {
                    let mut t = tally.lock();
                    t.latencies_us.push(elapsed);
                    match &result {
                        Err(e) => {
                            let code = e.as_db_error().map(|d| d.code().code().to_string()).unwrap_or_else(|| "connection".into());
                            if code == "XX000" || code == "connection" {
                                t.broken.push(format!("{code}: {e:?}"));
                            }
                            *t.errors.entry(code).or_default() += 1;
                            true
                        }
                        Ok(()) => false,
                    }
                };
                if failed {
                    // A failed block leaves the session in it: end it.
                    let _ = c.batch_execute("ROLLBACK").await;
                }
            }
        }));
    }
    for h in clients {
        h.await.unwrap();
    }
    sampler.abort();
    for v in ["total", "per_branch", "noted", "richest", "pings"] {
        verify(&c, v).await.unwrap();
    }
    assert_eq!(rows(&c, "SELECT s FROM total").await.unwrap(), vec![vec![expected_total.clone()]]);
    let (mut lat, mut fresh, errors, broken) = {
        let t = tally.lock();
        (t.latencies_us.clone(), t.freshness_us.clone(), t.errors.clone(), t.broken.clone())
    };
    lat.sort_unstable();
    fresh.sort_unstable();
    let pct = |v: &[u64], p: f64| v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1))).copied().unwrap_or(0);
    println!(
        "soak: {secs} s, 32 clients, {} statements ({:.0}/s), p50 {} ms, p99 {} ms, insert-to-visible p50 {} ms p99 {} ms max {} ms ({} probes), errors {:?}, RSS KiB over time {:?}",
        lat.len(),
        lat.len() as f64 / secs as f64,
        pct(&lat, 0.5) / 1000,
        pct(&lat, 0.99) / 1000,
        pct(&fresh, 0.5) / 1000,
        pct(&fresh, 0.99) / 1000,
        fresh.last().copied().unwrap_or(0) / 1000,
        fresh.len(),
        errors,
        rss.lock().clone()
    );
    assert!(!fresh.is_empty(), "no freshness probe ran");
    assert!(broken.is_empty(), "broken invariants or internal errors:\n{}", broken.join("\n"));
    drop(c);
    match Arc::try_unwrap(srv) {
        Ok(Target::InProcess(srv)) => srv.shutdown().await.unwrap(),
        Ok(Target::Binary(mut eddy)) => {
            assert!(eddy.alive(), "the server process died");
            let log = eddy.log_text();
            assert!(!log.contains("panicked"), "the server logged a panic:\n{log}");
        }
        Err(_) => panic!("the RSS sampler still holds the server"),
    }
}
