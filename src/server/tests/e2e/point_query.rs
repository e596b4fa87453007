//! Prepared point queries (issue 12): a prepared statement pinning a relation's whole key is
//! answered by a key lookup after its first execution. Each answer must be the one planning
//! gives: checked against the same query with literals (planned every time) through updates,
//! deletes, DROP and re-CREATE under the same name, another schema on the search path, a
//! transaction block's own writes, a view whose rows fail to evaluate, and NULL or
//! out-of-range parameters.

use tokio_postgres::types::Type;

use crate::support::{connect, rows, server};

/// The rows of a prepared statement, as text.
async fn prepared(c: &tokio_postgres::Client, stmt: &tokio_postgres::Statement, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> Vec<Vec<String>> {
    let out = c.query(stmt, params).await.unwrap();
    out.iter()
        .map(|r| {
            (0..r.len())
                .map(|i| match r.columns()[i].type_() {
                    &Type::INT8 => r.get::<_, Option<i64>>(i).map_or("NULL".into(), |v| v.to_string()),
                    &Type::INT4 => r.get::<_, Option<i32>>(i).map_or("NULL".into(), |v| v.to_string()),
                    &Type::NUMERIC | &Type::TEXT => r.get::<_, Option<String>>(i).unwrap_or_else(|| "NULL".into()),
                    other => panic!("unexpected column type {other}"),
                })
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_point_queries_answer_what_planning_would() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE pt (id BIGINT PRIMARY KEY, a INT, v INT);
         INSERT INTO pt SELECT i, i % 50, i FROM generate_series(1, 500) AS s(i);
         CREATE MATERIALIZED VIEW pmv AS SELECT a AS k, count(*) AS n, sum(v) AS s FROM pt GROUP BY a;
         CREATE TABLE two (a INT, b TEXT, v INT, PRIMARY KEY (a, b));
         INSERT INTO two VALUES (1, 'x', 10), (1, 'y', 11), (2, 'x', 20);",
    )
    .await
    .unwrap();
    let by_key = c.prepare("SELECT * FROM pmv WHERE k = $1").await.unwrap();
    let renamed = c.prepare("SELECT s AS total, k FROM pmv m WHERE m.k = $1").await.unwrap();
    let table = c.prepare("SELECT v, a FROM pt WHERE id = $1").await.unwrap();
    let composite = c.prepare("SELECT v FROM two WHERE $2 = b AND a = $1").await.unwrap();
    let wide = c.prepare_typed("SELECT n FROM pmv WHERE k = $1", &[Type::INT8]).await.unwrap();
    // Not a point query (a condition beyond the key): planned every time, still right.
    let extra = c.prepare("SELECT n FROM pmv WHERE k = $1 AND n > 5").await.unwrap();
    assert_eq!(renamed.columns().iter().map(|c| c.name()).collect::<Vec<_>>(), ["total", "k"]);
    for round in 0..4 {
        for k in [0i32, 7, 49, 50, -1] {
            let literal = |sql: &str| sql.replace("$1", &k.to_string());
            for _ in 0..2 {
                assert_eq!(prepared(&c, &by_key, &[&k]).await, rows(&c, &literal("SELECT * FROM pmv WHERE k = $1")).await.unwrap(), "round {round}, k {k}");
                assert_eq!(prepared(&c, &renamed, &[&k]).await, rows(&c, &literal("SELECT s, k FROM pmv WHERE k = $1")).await.unwrap());
                assert_eq!(prepared(&c, &wide, &[&i64::from(k)]).await, rows(&c, &literal("SELECT n FROM pmv WHERE k = $1")).await.unwrap());
                assert_eq!(prepared(&c, &extra, &[&k]).await, rows(&c, &literal("SELECT n FROM pmv WHERE k = $1 AND n > 5")).await.unwrap());
                let id = i64::from(k) * 3 + 1;
                assert_eq!(prepared(&c, &table, &[&id]).await, rows(&c, &format!("SELECT v, a FROM pt WHERE id = {id}")).await.unwrap());
            }
        }
        for (a, b) in [(1i32, "x"), (1, "y"), (2, "y"), (3, "x")] {
            assert_eq!(prepared(&c, &composite, &[&a, &b]).await, rows(&c, &format!("SELECT v FROM two WHERE a = {a} AND b = '{b}'")).await.unwrap());
        }
        // Change what the lookups see.
        c.batch_execute(&format!(
            "UPDATE pt SET v = v + 1000 WHERE a = {}; DELETE FROM pt WHERE a = {}; INSERT INTO pt VALUES ({}, 49, 5); UPDATE two SET v = v + 1 WHERE a = 1;",
            round * 7,
            round * 3 + 1,
            10_000 + round
        ))
        .await
        .unwrap();
    }
    // NULL matches nothing.
    assert!(prepared(&c, &by_key, &[&None::<i32>]).await.is_empty());
    assert!(prepared(&c, &wide, &[&None::<i64>]).await.is_empty());

    // The same name for a new view: the new definition answers.
    c.batch_execute("DROP MATERIALIZED VIEW pmv; CREATE MATERIALIZED VIEW pmv AS SELECT a AS k, count(*) * 100 AS n, min(v) AS s FROM pt GROUP BY a").await.unwrap();
    assert_eq!(prepared(&c, &by_key, &[&7i32]).await, rows(&c, "SELECT * FROM pmv WHERE k = 7").await.unwrap());
    assert_eq!(prepared(&c, &wide, &[&7i64]).await, rows(&c, "SELECT n FROM pmv WHERE k = 7").await.unwrap());

    // Another schema first on the search path: its relation of that name answers.
    c.batch_execute(
        "CREATE SCHEMA other; CREATE TABLE other.pt (id BIGINT PRIMARY KEY, a INT, v INT); INSERT INTO other.pt VALUES (4, -4, -40); SET search_path = other, public",
    )
    .await
    .unwrap();
    assert_eq!(prepared(&c, &table, &[&4i64]).await, [["-40", "-4"]]);
    c.batch_execute("SET search_path = public").await.unwrap();
    assert_eq!(prepared(&c, &table, &[&4i64]).await, rows(&c, "SELECT v, a FROM pt WHERE id = 4").await.unwrap());

    // A transaction block sees its own writes.
    assert_eq!(prepared(&c, &table, &[&5i64]).await, [["5", "5"]]);
    c.batch_execute("BEGIN; UPDATE pt SET v = -1 WHERE id = 5").await.unwrap();
    assert_eq!(prepared(&c, &table, &[&5i64]).await, [["-1", "5"]]);
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(prepared(&c, &table, &[&5i64]).await, [["5", "5"]]);

    // A view whose input rows fail to evaluate answers with the failure, then recovers.
    c.batch_execute("CREATE TABLE z (id INT PRIMARY KEY, v INT); CREATE MATERIALIZED VIEW zq AS SELECT id, 100 / v AS q FROM z; INSERT INTO z VALUES (1, 5)").await.unwrap();
    let zq = c.prepare("SELECT q FROM zq WHERE id = $1").await.unwrap();
    assert_eq!(prepared(&c, &zq, &[&1i32]).await, [["20"]]);
    assert_eq!(prepared(&c, &zq, &[&1i32]).await, [["20"]]);
    c.batch_execute("INSERT INTO z VALUES (2, 0)").await.unwrap();
    let e = c.query(&zq, &[&1i32]).await.expect_err("a failing view answers with its failure");
    assert_eq!(e.code().map(|c| c.code()), Some("22012"), "{e:?}");
    c.batch_execute("DELETE FROM z WHERE id = 2").await.unwrap();
    assert_eq!(prepared(&c, &zq, &[&1i32]).await, [["20"]]);
}

/// Parameters have the types the client declares at Parse, as in PostgreSQL (they were
/// re-typed from their context: a float8 compared with an integer column was truncated).
/// A key pinned by a parameter declared a smaller or larger integer type is still a point
/// query, and answers as planning would (out of range: no row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_parameter_types_are_the_parameters_types() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute("CREATE TABLE dt (id INT PRIMARY KEY, x INT); INSERT INTO dt VALUES (1, 4), (2, 5), (3, 6);").await.unwrap();
    let doubled = c.prepare_typed("SELECT $1 * 2", &[Type::FLOAT8]).await.unwrap();
    assert_eq!(doubled.params(), &[Type::FLOAT8]);
    let got: f64 = c.query_one(&doubled, &[&1.5f64]).await.unwrap().get(0);
    assert_eq!(got, 3.0);
    let below = c.prepare_typed("SELECT id FROM dt WHERE x < $1 ORDER BY id", &[Type::FLOAT8]).await.unwrap();
    let ids: Vec<i32> = c.query(&below, &[&4.5f64]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(ids, [1]);
    let insert = c.prepare_typed("INSERT INTO dt VALUES ($1, $2)", &[Type::INT8, Type::FLOAT8]).await.unwrap();
    c.execute(&insert, &[&4i64, &4.6f64]).await.unwrap();
    let limited = c.prepare_typed("SELECT x FROM dt ORDER BY id DESC LIMIT $1", &[Type::INT8]).await.unwrap();
    let xs: Vec<i32> = c.query(&limited, &[&1i64]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(xs, [5], "4.6 is stored rounded, as PostgreSQL's assignment cast does");
    for (ty, key) in [(Type::INT2, 2i64), (Type::INT8, 3), (Type::INT8, 1 << 40)] {
        let point = c.prepare_typed("SELECT x FROM dt WHERE id = $1", std::slice::from_ref(&ty)).await.unwrap();
        for _ in 0..3 {
            let rows = match ty {
                Type::INT2 => c.query(&point, &[&(key as i16)]).await.unwrap(),
                _ => c.query(&point, &[&key]).await.unwrap(),
            };
            let xs: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
            let want: Vec<i32> = match key {
                2 => vec![5],
                3 => vec![6],
                _ => vec![],
            };
            assert_eq!(xs, want, "{ty} {key}");
        }
    }
}
