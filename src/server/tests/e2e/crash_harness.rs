//! Crash harness (issue 11, item 7): a real `eddy` process with tables, views and a source
//! view under concurrent DML from several clients (multi-row INSERTs, COPY, UPDATE, DELETE) is
//! SIGKILLed at a random moment and restarted, `EDDY_CRASH_KILLS` times (default 20). After
//! every restart:
//! * every acknowledged row is there and no acknowledged delete came back (`lost`),
//! * no row is there twice (`dup`: the views' counts against the table),
//! * every statement in flight at the kill was applied entirely or not at all (`partial`),
//! * every view equals its recomputation (`view_mismatch`, via VERIFY), and the source view
//!   counted each generated row once.
//!
//! It prints `kills=N lost=0 dup=0 partial=0 view_mismatch=0 recovery_ms p50=… max=…`. The kill
//! moments come from a seeded generator (`EDDY_CRASH_SEED`); nothing waits on time to
//! synchronize: the kill lands wherever the clients are.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::SinkExt;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use tokio_postgres::Client;

use crate::support::{bounded, connect, eventually, rows, spawn_eddy, temp_dir, verify};

const STEP: Duration = Duration::from_secs(120);

/// What a client knows about its statements: rows acknowledged present, rows acknowledged
/// deleted, and the statements whose outcome the kill left unknown (their row ids).
#[derive(Default)]
struct Ledger {
    present: BTreeMap<i64, i64>,
    deleted: std::collections::BTreeSet<i64>,
    in_flight: Vec<Vec<i64>>,
    /// Rows whose DELETE was sent but not acknowledged.
    deleting: std::collections::BTreeSet<i64>,
}

async fn exec(c: &Client, sql: &str) {
    bounded(STEP, sql, c.batch_execute(sql)).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

/// One client's work until `stop`: each statement's ids are registered as in flight before it
/// is sent and moved to the ledger once acknowledged.
async fn client_loop(c: Client, client: i64, ledger: Arc<Mutex<Ledger>>, stop: Arc<AtomicBool>, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut next = 0i64;
    while !stop.load(Ordering::Relaxed) {
        let kind = rng.gen_range(0..10);
        let base = (client << 40) + next;
        let result = match kind {
            // A multi-row INSERT.
            0..=4 => {
                let n = rng.gen_range(1..20);
                next += n;
                let ids: Vec<i64> = (base..base + n).collect();
                ledger.lock().in_flight.push(ids.clone());
                let values: Vec<String> = ids.iter().map(|i| format!("({i}, {}, {})", i % 7, i % 1000)).collect();
                let r = c.batch_execute(&format!("INSERT INTO log VALUES {}", values.join(", "))).await;
                let mut l = ledger.lock();
                l.in_flight.retain(|f| f != &ids);
                if r.is_ok() {
                    for i in ids {
                        l.present.insert(i, i % 1000);
                    }
                }
                r.map(|_| ())
            }
            // A COPY of a few hundred rows.
            5 | 6 => {
                let n = rng.gen_range(100..600);
                next += n;
                let ids: Vec<i64> = (base..base + n).collect();
                ledger.lock().in_flight.push(ids.clone());
                let r = async {
                    let sink = c.copy_in("COPY log FROM STDIN").await?;
                    futures::pin_mut!(sink);
                    let text: String = ids.iter().map(|i| format!("{i}\t{}\t{}\n", i % 7, i % 1000)).collect();
                    sink.send(bytes::Bytes::from(text)).await?;
                    sink.finish().await
                }
                .await;
                let mut l = ledger.lock();
                l.in_flight.retain(|f| f != &ids);
                if r.is_ok() {
                    for i in ids {
                        l.present.insert(i, i % 1000);
                    }
                }
                r.map(|_| ())
            }
            // An UPDATE of one acknowledged row (its amount becomes -1).
            7 => {
                let pick = { ledger.lock().present.keys().next_back().copied() };
                let Some(id) = pick else { continue };
                let r = c.batch_execute(&format!("UPDATE log SET amount = -1 WHERE id = {id}")).await;
                if r.is_ok() {
                    ledger.lock().present.insert(id, -1);
                }
                r.map(|_| ())
            }
            // A DELETE of one acknowledged row of this client.
            _ => {
                let pick = { ledger.lock().present.range(client << 40..(client + 1) << 40).next().map(|(k, _)| *k) };
                let Some(id) = pick else { continue };
                ledger.lock().deleting.insert(id);
                let r = c.batch_execute(&format!("DELETE FROM log WHERE id = {id}")).await;
                if r.is_ok() {
                    let mut l = ledger.lock();
                    l.deleting.remove(&id);
                    l.present.remove(&id);
                    l.deleted.insert(id);
                }
                r.map(|_| ())
            }
        };
        if result.is_err() {
            // The server went away: whatever was in flight stays unknown.
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sigkills_under_concurrent_dml_lose_duplicate_and_half_apply_nothing() {
    let kills: usize = std::env::var("EDDY_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let seed: u64 = std::env::var("EDDY_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = temp_dir("crash-harness");
    let url = format!("file://{}", dir.display());
    let (mut proc, mut addr) = spawn_eddy(&url);
    {
        let c = connect(addr).await;
        exec(
            &c,
            "CREATE TABLE log (id BIGINT PRIMARY KEY, k INT, amount INT);
             CREATE MATERIALIZED VIEW by_k AS SELECT k, count(*) AS n, sum(amount) AS total FROM log GROUP BY k;
             CREATE MATERIALIZED VIEW negative AS SELECT id FROM log WHERE amount < 0;
             CREATE TABLE keys (k INT PRIMARY KEY, name TEXT);
             INSERT INTO keys SELECT i, 'key ' || i FROM generate_series(0, 6) AS s(i);
             CREATE MATERIALIZED VIEW joined AS SELECT keys.name, count(*) AS n FROM log JOIN keys ON log.k = keys.k GROUP BY keys.name;
             CREATE SOURCE seq (id BIGINT) WITH (connector = 'datagen', fields.id.kind = 'sequence', fields.id.start = '1', datagen.rows.per.second = '5000');
             CREATE MATERIALIZED VIEW seq_count AS SELECT count(*) AS n, count(DISTINCT id) AS d, max(id) AS top FROM seq",
        )
        .await;
    }
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let (mut lost, mut dup, mut partial, mut mismatch) = (0usize, 0usize, 0usize, 0usize);
    let mut recovery_ms: Vec<u128> = Vec::new();
    for round in 0..kills {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for client in 1..=3i64 {
            let c = connect(addr).await;
            let id = client + 10 * round as i64;
            tasks.push(tokio::spawn(client_loop(c, id, ledger.clone(), stop.clone(), seed ^ id as u64)));
        }
        // Let the clients and the source run for a random while, then kill wherever they are.
        tokio::time::sleep(Duration::from_millis(rng.gen_range(50..700))).await;
        drop(proc);
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            bounded(STEP, "client after the kill", t).await.unwrap();
        }
        let started = Instant::now();
        let (p, a) = spawn_eddy(&url);
        let c = eventually(STEP, || async {
            let c = connect(a).await;
            rows(&c, "SELECT 1").await.ok().map(|_| c)
        })
        .await;
        recovery_ms.push(started.elapsed().as_millis());
        (proc, addr) = (p, a);

        // The table against the ledger.
        let stored: BTreeMap<i64, i64> = rows(&c, "SELECT id, amount FROM log")
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r[0].parse().unwrap(), r[1].parse().unwrap()))
            .collect();
        {
            let mut l = ledger.lock();
            // A DELETE in flight at the kill may have committed: then the row is known deleted.
            for id in std::mem::take(&mut l.deleting) {
                if !stored.contains_key(&id) {
                    l.present.remove(&id);
                    l.deleted.insert(id);
                }
            }
            for (id, amount) in &l.present {
                match stored.get(id) {
                    Some(a) if a == amount => {}
                    Some(a) if *amount == -1 || *a == -1 => {} // an UPDATE in flight at the kill
                    _ => lost += 1,
                }
            }
            lost += l.deleted.iter().filter(|id| stored.contains_key(id)).count();
            for f in std::mem::take(&mut l.in_flight) {
                let there = f.iter().filter(|id| stored.contains_key(id)).count();
                if there != 0 && there != f.len() {
                    partial += 1;
                }
                // An unacknowledged statement that did commit: its rows are now known.
                if there == f.len() {
                    for id in f {
                        l.present.insert(id, stored[&id]);
                    }
                }
            }
}
        // No row twice: the views count what the table holds.
        let counted: i64 = rows(&c, "SELECT coalesce(sum(n), 0) FROM by_k").await.unwrap()[0][0].parse().unwrap();
        if counted != stored.len() as i64 {
            dup += 1;
        }
        for v in ["by_k", "negative", "joined"] {
            if let Err(e) = bounded(STEP, "VERIFY", verify(&c, v)).await {
                eprintln!("round {round}: {e}");
                mismatch += 1;
            }
        }
        let s = rows(&c, "SELECT n, d, coalesce(top, 0) FROM seq_count").await.unwrap();
        if s[0][0] != s[0][1] || s[0][0] != s[0][2] {
            eprintln!("round {round}: the source view counted {s:?}");
            dup += 1;
        }
    }
    recovery_ms.sort_unstable();
    let p50 = recovery_ms.get(recovery_ms.len() / 2).copied().unwrap_or(0);
    let max = recovery_ms.last().copied().unwrap_or(0);
    println!("kills={kills} lost={lost} dup={dup} partial={partial} view_mismatch={mismatch} recovery_ms p50={p50} max={max} seed={seed}");
    assert_eq!((lost, dup, partial, mismatch), (0, 0, 0, 0), "seed {seed}");
    drop(proc);
    let _ = std::fs::remove_dir_all(dir);
}
