//! The Postgres sink (issue 15) against a real PostgreSQL server started by the test: a view's
//! changes upserted into a PostgreSQL table, through updates, deletes and a SIGKILL of Eddy;
//! afterwards the PostgreSQL table equals the view. PostgreSQL's server binaries are required
//! under CI (`.ci/run` installs them) and the test is skipped without them otherwise.

use std::time::Duration;

use crate::postgres::Postgres;
use crate::support::{connect, eventually, rows, spawn_eddy, sqlstate, temp_dir};

const DEADLINE: Duration = Duration::from_secs(120);

async fn pg_rows(pg: &tokio_postgres::Client) -> Vec<(i64, i64, i64)> {
    pg.query("SELECT g, n, s FROM per_g_copy ORDER BY g", &[]).await.unwrap().iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect()
}

async fn eddy_rows(c: &tokio_postgres::Client) -> Vec<(i64, i64, i64)> {
    rows(c, "SELECT g, n, s FROM per_g ORDER BY g").await.unwrap().iter().map(|r| (r[0].parse().unwrap(), r[1].parse().unwrap(), r[2].parse().unwrap())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sink_keeps_a_real_postgres_table_equal_to_the_view_across_sigkill() {
    let Some(pg) = Postgres::start("the postgres sink test") else { return };
    let target = pg.client().await;
    target.batch_execute("CREATE TABLE per_g_copy (g BIGINT PRIMARY KEY, n BIGINT NOT NULL, s BIGINT)").await.unwrap();
    let dir = temp_dir("postgres-sink");
    let url = format!("file://{}", dir.display());
    let (proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    c.batch_execute("CREATE TABLE ev (id INT PRIMARY KEY, g INT)").await.unwrap();
    c.batch_execute("INSERT INTO ev SELECT i, i % 5 FROM generate_series(1, 200) i").await.unwrap();
    c.batch_execute("CREATE MATERIALIZED VIEW per_g AS SELECT g::bigint AS g, count(*) AS n, sum(id)::bigint AS s FROM ev GROUP BY g").await.unwrap();
    let port = pg.port;
    let err = c
        .batch_execute(&format!("CREATE SINK bad FROM per_g WITH (connector = 'postgres', host = '127.0.0.1', port = '{port}', user = 'postgres', database = 'postgres', table = 'nosuch')"))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22023", "{err:?}");
    c.batch_execute(&format!(
        "CREATE SINK to_pg FROM per_g WITH (connector = 'postgres', host = '127.0.0.1', port = '{port}', user = 'postgres', database = 'postgres', table = 'per_g_copy', primary_key = 'g')"
    ))
    .await
    .unwrap();
    eventually(DEADLINE, || async { (pg_rows(&target).await == eddy_rows(&c).await).then_some(()) }).await;
    assert_eq!(pg_rows(&target).await.len(), 5);

    // Updates, a group that disappears, and a SIGKILL right after.
    c.batch_execute("UPDATE ev SET g = 7 WHERE g = 3").await.unwrap();
    c.batch_execute("DELETE FROM ev WHERE g = 4").await.unwrap();
    c.batch_execute("INSERT INTO ev SELECT i, i % 3 FROM generate_series(201, 400) i").await.unwrap();
    drop(c);
    drop(proc);
    let (_proc, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    c.batch_execute("UPDATE ev SET g = 1 WHERE id % 10 = 0").await.unwrap();
    let want = eddy_rows(&c).await;
    assert!(want.iter().all(|r| r.0 != 3 && r.0 != 4), "{want:?}");
    eventually(DEADLINE, || async { (pg_rows(&target).await == want).then_some(()) }).await;
    let sinks = rows(&c, "SHOW SINKS").await.unwrap();
    assert_eq!((sinks[0][0].as_str(), sinks[0][1].as_str(), sinks[0][2].as_str(), sinks[0][3].as_str()), ("to_pg", "postgres", "per_g_copy", "running"));
    let _ = std::fs::remove_dir_all(&dir);
}
