//! Issue 8, item 3 ("memory stays flat for a 10 GB COPY"): a statement whose changes for the
//! views downstream of its table exceed the write budget moves them to a temporary file until
//! it commits (`eddy_stream::change_log`). The views must come out exactly as if nothing had
//! spilled, and a statement or transaction that fails or rolls back must leave them untouched.
//! The server runs with `--memory-mb 32`, so the write budget is its floor of 8 MiB, and the
//! changes of a 250K rows spill.

use std::time::Duration;

use futures::SinkExt;
use tokio_postgres::Client;

use crate::support::{bounded, connect, rows, server_with, sqlstate, verify};

const STEP: Duration = Duration::from_secs(120);

/// COPYs rows `id \t id % 50 \t 'row id'` for `ids` in one statement.
async fn copy(c: &Client, ids: impl Iterator<Item = i64>, extra: &str) -> Result<u64, tokio_postgres::Error> {
    let sink = c.copy_in("COPY t FROM STDIN").await?;
    futures::pin_mut!(sink);
    let mut text = String::new();
    for id in ids {
        text.push_str(&format!("{id}\t{}\trow {id}\n", id % 50));
        if text.len() > 1 << 16 {
            sink.send(bytes::Bytes::from(std::mem::take(&mut text))).await?;
        }
    }
    text.push_str(extra);
    sink.send(bytes::Bytes::from(text)).await?;
    sink.finish().await
}

async fn one(c: &Client, sql: &str) -> String {
    rows(c, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"))[0][0].clone()
}

/// The views' contents in a form to compare.
async fn snapshot(c: &Client) -> (String, String, String) {
    (
        one(c, "SELECT count(*) || '/' || sum(n) || '/' || max(hi) FROM groups").await,
        one(c, "SELECT count(*) || '/' || coalesce(sum(id), 0) FROM some").await,
        one(c, "SELECT count(*) FROM t").await,
    )
}

async fn check_views(c: &Client) {
    for v in ["groups", "some"] {
        bounded(STEP, "VERIFY", verify(c, v)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_larger_than_the_write_budget_spill_their_view_changes_and_stay_atomic() {
    let srv = server_with(|c| c.memory_bytes = 32 << 20).await;
    let c = connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, g INT, s TEXT); \
         CREATE MATERIALIZED VIEW groups AS SELECT g, count(*) AS n, max(s) AS hi FROM t GROUP BY g; \
         CREATE MATERIALIZED VIEW some AS SELECT id, s FROM t WHERE id % 10 = 3",
    )
    .await
    .unwrap();

    // A COPY whose last row repeats one of its keys fails whole: nothing of its 250K rows (whose
    // changes had spilled) reaches a view.
    let spilled = eddy_stream::change_log::spilled_bytes();
    let e = bounded(STEP, "failing COPY", copy(&c, 0..250_000, "5\t5\tagain\n")).await.unwrap_err();
    assert_eq!(sqlstate(&e), "23505", "{e}");
    assert!(eddy_stream::change_log::spilled_bytes() > spilled, "250K rows' changes for two views did not spill");
    assert_eq!(snapshot(&c).await, ("NULL".into(), "0/0".into(), "0".into()));

    let spilled = eddy_stream::change_log::spilled_bytes();
    assert_eq!(bounded(STEP, "COPY", copy(&c, 0..250_000, "")).await.unwrap(), 250_000);
    assert!(eddy_stream::change_log::spilled_bytes() > spilled, "250K rows' changes for two views did not spill");
    check_views(&c).await;
    let loaded = snapshot(&c).await;
    assert_eq!(loaded, ("50/250000/row 99999".into(), format!("25000/{}", (0..250_000i64).filter(|i| i % 10 == 3).sum::<i64>()), "250000".into()));

    // A transaction of 300K changes that rolls back leaves the views as they were (its writes
    // never left the session).
    c.batch_execute("BEGIN; UPDATE t SET s = 'updated' WHERE id < 200000; DELETE FROM t WHERE id >= 300000; ROLLBACK").await.unwrap();
    assert_eq!(snapshot(&c).await, loaded);

    // The same transaction committed reaches both views whole: the table stages its 150K
    // changes (250K change rows) at COMMIT, spilling them.
    let spilled = eddy_stream::change_log::spilled_bytes();
    c.batch_execute("BEGIN; UPDATE t SET g = g + 1, s = 'updated' WHERE id < 100000; DELETE FROM t WHERE id >= 200000; COMMIT")
        .await
        .unwrap();
    assert!(eddy_stream::change_log::spilled_bytes() > spilled, "a transaction's 150K changes did not spill");
    check_views(&c).await;
    assert_eq!(one(&c, "SELECT count(*) || '/' || sum(n) FROM groups").await, "51/200000");
    assert_eq!(one(&c, "SELECT count(*) FROM some WHERE s = 'updated'").await, "10000");
    assert_eq!(one(&c, "SELECT count(*) FROM some").await, "20000");
    drop(c);
    srv.shutdown().await.unwrap();
}

/// Issue 11, item 2: one statement (one epoch) that changes more groups than the operators'
/// memory budget holds. Its changed groups are flushed before the barrier (output early, state
/// to a run of the epoch), leave the cache, and are read back from that run within the epoch and,
/// until the epoch commits, by the next statement's; the budget holds throughout and the view
/// is exactly its recomputation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epoch_with_more_groups_than_the_budget_flushes_them_and_stays_exact() {
    let srv = server_with(|c| c.memory_bytes = 32 << 20).await;
    let c = connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, g INT, s TEXT); \
         CREATE MATERIALIZED VIEW per_row AS SELECT id, count(*) AS n, sum(g) AS total, max(s) AS hi FROM t GROUP BY id",
    )
    .await
    .unwrap();
    let budget = srv.engine.store.operator_memory().clone();
    let flushed = eddy_stream::cache::flushed_entries();
    // 120K groups of ~1 KB each against a 16 MiB budget for the operators' caches.
    assert_eq!(bounded(STEP, "COPY", copy(&c, 0..120_000, "")).await.unwrap(), 120_000);
    assert!(eddy_stream::cache::flushed_entries() > flushed, "no group was flushed before its barrier");
    assert!(budget.used() < 2 * budget.limit(), "operator caches hold {} bytes for a budget of {}", budget.used(), budget.limit());
    check_view(&c).await;
    // Every group changes again in one statement: each is read back (from the committed
    // snapshot, or the run of the epoch still committing), retracted and re-emitted.
    c.batch_execute("UPDATE t SET g = g + 1, s = s || '!' WHERE id % 2 = 0; DELETE FROM t WHERE id % 7 = 0").await.unwrap();
    assert!(budget.used() < 2 * budget.limit(), "operator caches hold {} bytes for a budget of {}", budget.used(), budget.limit());
    check_view(&c).await;
    let kept = (0..120_000i64).filter(|i| i % 7 != 0);
    let total: i64 = kept.clone().map(|i| i % 50 + i64::from(i % 2 == 0)).sum();
    assert_eq!(one(&c, "SELECT count(*) || '/' || sum(n) || '/' || sum(total) FROM per_row").await, format!("{0}/{0}/{total}", kept.count()));
    assert_eq!(one(&c, "SELECT hi FROM per_row WHERE id = 10").await, "row 10!");
    drop(c);
    srv.shutdown().await.unwrap();
}

async fn check_view(c: &Client) {
    bounded(STEP, "VERIFY", verify(c, "per_row")).await.unwrap();
}

/// A transaction block keeps its writes in the session until COMMIT, so they count against the
/// session's memory (`--query-memory-mb`): a statement that would take the block past it fails
/// with 53200 and aborts the block, and the server carries on. The same COPY outside a block
/// streams through the table's writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_block_past_the_session_memory_fails_with_53200_while_the_same_copy_outside_streams() {
    let srv = server_with(|c| c.limits.query_memory_bytes = 8 << 20).await;
    let c = connect(srv.addr).await;
    c.batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g INT, s TEXT)").await.unwrap();
    c.batch_execute("BEGIN; INSERT INTO t VALUES (-1, 0, 'in the block')").await.unwrap();
    let e = bounded(STEP, "COPY in a block", copy(&c, 0..200_000, "")).await.unwrap_err();
    assert_eq!(sqlstate(&e), "53200", "{e}");
    assert!(format!("{e:?}").contains("transaction block would hold"), "{e:?}");
    // The block is aborted: statements fail until ROLLBACK, which ends it with nothing applied.
    let e = c.batch_execute("INSERT INTO t VALUES (-2, 0, 'x')").await.unwrap_err();
    assert_eq!(sqlstate(&e), "25P02", "{e}");
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(one(&c, "SELECT count(*) FROM t").await, "0");
    assert_eq!(bounded(STEP, "COPY", copy(&c, 0..200_000, "")).await.unwrap(), 200_000);
    // A block within the limit commits.
    c.batch_execute("BEGIN; UPDATE t SET s = 'small' WHERE id < 1000; COMMIT").await.unwrap();
    assert_eq!(one(&c, "SELECT count(*) FROM t WHERE s = 'small'").await, "1000");
    drop(c);
    srv.shutdown().await.unwrap();
}
