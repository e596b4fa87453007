//! Temporal filters (issue 13): rows of `WHERE ts > now() - INTERVAL ...` views expire, and
//! rows of `WHERE ts <= now()` views appear, as time passes — also across a SIGKILL, when the
//! time came while the server was down. Polled with generous deadlines; no timing asserted.

use std::time::Duration;

use crate::support::{bounded, connect, eventually, rows, spawn_eddy, temp_dir};

const STEP: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_appear_and_expire_as_time_passes_and_across_a_restart() {
    let dir = temp_dir("temporal");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    let setup = "CREATE TABLE ev (id INT PRIMARY KEY, ts TIMESTAMPTZ);
        CREATE MATERIALIZED VIEW recent AS SELECT id FROM ev WHERE ts > now() - INTERVAL '2' SECOND;
        CREATE MATERIALIZED VIEW due AS SELECT id FROM ev WHERE ts <= now();
        CREATE MATERIALIZED VIEW due_count AS SELECT count(*) AS n FROM ev WHERE ts <= now() AND ts > now() - INTERVAL '1' HOUR;
        INSERT INTO ev VALUES (1, now()), (2, now() + INTERVAL '2' SECOND), (3, now() + INTERVAL '1' HOUR), (4, now() - INTERVAL '2' HOUR);";
    bounded(STEP, "setup", c.batch_execute(setup)).await.unwrap();
    let ids = |sql: &'static str| {
        let c = &c;
        async move { rows(c, sql).await.unwrap().into_iter().map(|r| r[0].clone()).collect::<Vec<_>>() }
    };
    // Row 2 comes due, row 1 expires (its two seconds pass).
    eventually(STEP, || async { (ids("SELECT id FROM due ORDER BY 1").await == ["1", "2", "4"]).then_some(()) }).await;
    eventually(STEP, || async { (ids("SELECT id FROM recent ORDER BY 1").await == ["2", "3"]).then_some(()) }).await;
    eventually(STEP, || async { (ids("SELECT n FROM due_count").await == ["2"]).then_some(()) }).await;
    // Row 5 comes due around the restart (its second passes while the process is down or
    // starting): the restored filter applies what came due since its committed time.
    bounded(STEP, "insert", c.batch_execute("INSERT INTO ev VALUES (5, now() + INTERVAL '1' SECOND)")).await.unwrap();
    assert_eq!(ids("SELECT id FROM due ORDER BY 1").await, ["1", "2", "4"]);
    drop(c);
    drop(proc); // SIGKILL
    let (_proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    let ids = |sql: &'static str| {
        let c = &c;
        async move { rows(c, sql).await.unwrap().into_iter().map(|r| r[0].clone()).collect::<Vec<_>>() }
    };
    eventually(STEP, || async { (ids("SELECT id FROM due ORDER BY 1").await == ["1", "2", "4", "5"]).then_some(()) }).await;
    eventually(STEP, || async { (ids("SELECT id FROM recent ORDER BY 1").await == ["3"]).then_some(()) }).await;
    eventually(STEP, || async { (ids("SELECT n FROM due_count").await == ["3"]).then_some(()) }).await;
}
