//! Backfill in bounded epochs (issue 11, "Backfill in bounded epochs"): a new view reads its
//! upstreams a bounded number of rows per epoch while the rest of the server keeps committing,
//! so writes to the tables it reads are acknowledged during its CREATE and the view still ends
//! equal to its recomputation; a backfill that fails after some epochs committed leaves nothing.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::support::{bounded, connect, rows, server, temp_dir, verify, Census};

const STEP: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_acknowledged_while_a_join_view_backfills_and_the_view_is_exact() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE big (id BIGINT PRIMARY KEY, g INT, v INT); \
         INSERT INTO big SELECT i, i % 50, i % 1000 FROM generate_series(1, 20000) AS s(i); \
         CREATE TABLE dim (g INT PRIMARY KEY, name TEXT); \
         INSERT INTO dim SELECT i, 'n' || (i % 7) FROM generate_series(0, 49) AS s(i);",
    )
    .await
    .unwrap();
    let created = Arc::new(AtomicBool::new(false));
    let during = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (created, during) = (created.clone(), during.clone());
        let addr = srv.addr;
        tokio::spawn(async move {
            let w = connect(addr).await;
            let mut rng = StdRng::seed_from_u64(11);
            let mut next_id = 100_000;
            while !created.load(Ordering::SeqCst) {
                let k = rng.gen_range(1..20_000);
                let sql = match rng.gen_range(0..5) {
                    0 => format!("UPDATE big SET v = v + 7 WHERE id = {k}"),
                    1 => format!("DELETE FROM big WHERE id = {k}"),
                    2 => {
                        next_id += 1;
                        format!("INSERT INTO big VALUES ({next_id}, {}, {})", k % 60, k % 1000)
                    }
                    3 => format!("UPDATE big SET g = {} WHERE id = {k}", k % 55),
                    _ => format!("UPDATE dim SET name = 'm{}' WHERE g = {}", k % 5, k % 50),
                };
                w.batch_execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
                if !created.load(Ordering::SeqCst) {
                    during.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };
    // About a thousand epochs of 20 rows each.
    c.batch_execute("SET backfill_epoch_rows = 20").await.unwrap();
    let started = std::time::Instant::now();
    bounded(
        STEP,
        "CREATE",
        c.batch_execute(
            "CREATE MATERIALIZED VIEW jv AS SELECT d.name, count(*) AS n, sum(b.v) AS s, min(b.v) AS lo \
             FROM big b JOIN dim d ON b.g = d.g GROUP BY d.name",
        ),
    )
    .await
    .unwrap();
    created.store(true, Ordering::SeqCst);
    bounded(STEP, "writer", writer).await.unwrap();
    // A backfill held in one epoch would block every commit until it ends: at most the one
    // statement waiting then (and one in the view's own epoch) could be acknowledged.
    let during = during.load(Ordering::SeqCst);
    eprintln!("CREATE took {:?}; {during} writes acknowledged meanwhile", started.elapsed());
    assert!(during >= 5, "only {during} writes were acknowledged while the view backfilled");
    verify(&c, "jv").await.unwrap();
    c.batch_execute("UPDATE big SET v = 0 WHERE id < 100; DELETE FROM dim WHERE g = 3").await.unwrap();
    verify(&c, "jv").await.unwrap();
    let n = rows(&c, "SELECT sum(n) FROM jv").await.unwrap();
    let expected = rows(&c, "SELECT count(*) FROM big b JOIN dim d ON b.g = d.g").await.unwrap();
    assert_eq!(n, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_that_fails_after_committing_some_epochs_leaves_nothing() {
    let dir = temp_dir("backfill-fails-late");
    let url = format!("file://{}", dir.display());
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT); \
         INSERT INTO t SELECT i, i % 100 FROM generate_series(1, 3000) AS s(i); \
         SET backfill_epoch_rows = 100",
    )
    .await
    .unwrap();
    // One row in the middle of the table panics; the epochs before it have committed.
    let e = bounded(
        STEP,
        "CREATE",
        c.batch_execute("CREATE MATERIALIZED VIEW bad AS SELECT v, sum(v + eddy_test_panic_if(id = 1500)) AS s FROM t GROUP BY v"),
    )
    .await
    .expect_err("the backfill panics");
    assert_eq!(crate::support::sqlstate(&e), "XX000", "{e:?}");
    let e = rows(&c, "SELECT * FROM bad").await.expect_err("no view");
    assert!(e.starts_with("42P01"), "{e}");
    // The server goes on: writes commit, and the name can be used again.
    c.batch_execute("INSERT INTO t VALUES (5000, 1); CREATE MATERIALIZED VIEW bad AS SELECT v, count(*) AS n FROM t GROUP BY v")
        .await
        .unwrap();
    verify(&c, "bad").await.unwrap();
    drop(c);
    bounded(STEP, "shutdown", srv.shutdown()).await.unwrap();
    let after = Census::open(&url).await;
    assert_eq!(after.orphans(), Vec::<String>::new());
    assert!(after.failures.is_empty(), "failure records remain: {:?}", after.failures);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_epoch_rows_must_be_a_positive_number() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    for bad in ["0", "-3", "'lots'"] {
        let e = c.batch_execute(&format!("SET backfill_epoch_rows = {bad}")).await.expect_err(bad);
        assert_eq!(crate::support::sqlstate(&e), "22023", "{bad}: {e:?}");
    }
    c.batch_execute("SET backfill_epoch_rows = 1").await.unwrap();
}
