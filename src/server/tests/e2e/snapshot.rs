//! One snapshot per statement (issue 9 item 7): every part of a query — each scan of the same
//! table, uncorrelated and correlated subqueries (evaluated per outer value), both sides of a
//! self-join — reads the same committed epoch, while other sessions keep committing transfers
//! that move money between accounts (and branches) in transaction blocks. Each query below
//! computes something that is constant at every single snapshot (a difference that is 0, or the
//! total); a query that read two epochs would see a transfer on one side and not the other.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::support::{connect, rows, server};

const ACCOUNTS: i64 = 60;
const INITIAL: i64 = 1000;
/// Queries each checker runs while the transfers go on.
const ROUNDS: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_part_of_a_query_reads_one_snapshot_while_transfers_commit() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    let accounts: Vec<String> = (0..ACCOUNTS).map(|i| format!("({i}, {INITIAL}, {})", i % 6)).collect();
    c.batch_execute(&format!(
        "CREATE TABLE acct (id BIGINT PRIMARY KEY, bal BIGINT NOT NULL, branch INT NOT NULL); INSERT INTO acct VALUES {}",
        accounts.join(", ")
    ))
    .await
    .unwrap();
    let total = ACCOUNTS * INITIAL;
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..3u64 {
        let (stop, committed) = (stop.clone(), committed.clone());
        let mut client = connect(srv.addr).await;
        writers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(w);
            while !stop.load(Ordering::Relaxed) {
                let (from, to, amount) = (rng.gen_range(0..ACCOUNTS), rng.gen_range(0..ACCOUNTS), rng.gen_range(1..50i64));
                let tx = client.transaction().await.unwrap();
                tx.batch_execute(&format!("UPDATE acct SET bal = bal - {amount} WHERE id = {from}")).await.unwrap();
                tx.batch_execute(&format!("UPDATE acct SET bal = bal + {amount} WHERE id = {to}")).await.unwrap();
                tx.commit().await.unwrap();
                committed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // (query, the answer at any one snapshot)
    let checks: Vec<(String, String)> = vec![
        // Two scans of the same table as uncorrelated scalar subqueries.
        (
            "SELECT (SELECT sum(bal) FROM acct WHERE id % 2 = 0) + (SELECT sum(bal) FROM acct WHERE id % 2 = 1)".into(),
            total.to_string(),
        ),
        // A correlated subquery per outer value (per branch) against the outer scan.
        (
            "SELECT sum(s) FROM (SELECT b.branch, (SELECT sum(bal) FROM acct a WHERE a.branch = b.branch) AS s \
             FROM (SELECT DISTINCT branch FROM acct) b) x"
                .into(),
            total.to_string(),
        ),
        // A correlated subquery per outer row: each row equals itself read again.
        ("SELECT count(*) FROM acct o WHERE o.bal <> (SELECT i.bal FROM acct i WHERE i.id = o.id)".into(), "0".into()),
        // Both sides of a self-join.
        ("SELECT sum(l.bal - r.bal) FROM acct l JOIN acct r ON l.id = r.id".into(), "0".into()),
        // EXISTS and IN subqueries beside an aggregate of the same table.
        (
            "SELECT (SELECT sum(bal) FROM acct WHERE id IN (SELECT id FROM acct WHERE branch < 3)) \
             + (SELECT sum(bal) FROM acct o WHERE EXISTS (SELECT 1 FROM acct i WHERE i.id = o.id AND i.branch >= 3))"
                .into(),
            total.to_string(),
        ),
    ];
    let started = Instant::now();
    let mut readers = Vec::new();
    for r in 0..2 {
        let client = connect(srv.addr).await;
        let checks = checks.clone();
        readers.push(tokio::spawn(async move {
            let mut wrong = Vec::new();
            for round in 0..ROUNDS {
                let (sql, expected) = &checks[(round + r) % checks.len()];
                let got = rows(&client, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
                if got != vec![vec![expected.clone()]] {
                    wrong.push(format!("{sql} gave {got:?}, expected {expected}"));
                }
            }
            wrong
        }));
    }
    let mut wrong = Vec::new();
    for r in readers {
        wrong.extend(r.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let transfers = committed.load(Ordering::Relaxed);
    eprintln!("{} checks over {:.1} s while {transfers} transfers committed", 2 * ROUNDS, started.elapsed().as_secs_f64());
    assert!(wrong.is_empty(), "a query read more than one snapshot:\n{}", wrong.join("\n"));
    assert!(transfers > 0, "no transfer committed while the checks ran");
    assert_eq!(rows(&c, "SELECT sum(bal) FROM acct").await.unwrap(), vec![vec![total.to_string()]]);
    drop(c);
    srv.shutdown().await.unwrap();
}
