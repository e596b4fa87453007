//! Protocol behaviour: errors carry SQLSTATEs and leave the session usable, panics are
//! contained, garbage on the socket does not hurt the server, extended-protocol details.

use std::io::Write;

use tokio_postgres::SimpleQueryMessage;

use crate::support::{connect, server, sqlstate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_have_sqlstates_and_the_session_survives_them() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)").await.unwrap();
    let cases = [
        ("SELEC 1", "42601"),
        ("SELECT * FROM nope", "42P01"),
        ("SELECT nope FROM t", "42703"),
        ("CREATE TABLE t (a INT)", "42P07"),
        ("INSERT INTO t VALUES (1, NULL)", "23502"),
        ("INSERT INTO t (id) VALUES (1)", "23502"),
        ("SELECT 1/0", "22012"),
        ("SELECT no_such_function(1)", "42883"),
        ("CREATE TABLE x (a geometry)", "42704"),
        ("DROP TABLE nope", "42P01"),
    ];
    for (sql, code) in cases {
        let e = c.batch_execute(sql).await.expect_err(sql);
        assert_eq!(sqlstate(&e), code, "{sql}: {e:?}");
        // The session is still usable and nothing was written.
        let n: i64 = c.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
        assert_eq!(n, 0, "after {sql}");
    }
    // Wrong parameter count in the extended protocol.
    let e = c.query("SELECT $1::int + $2::int", &[&1i32]).await.expect_err("param count");
    assert!(e.to_string().contains("parameters") || sqlstate(&e) == "08P01", "{e}");
    let one: i32 = c.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_bytes_on_the_socket_do_not_take_the_server_down() {
    let srv = server("memory://").await;
    for junk in [&b"\x00\x00\x00\x08\x04\xd2\x16\x2f"[..], b"GET / HTTP/1.1\r\n\r\n", &[0xff; 64][..], b"\x00\x00\x00\x03"] {
        let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
        let _ = s.write_all(junk);
        drop(s);
    }
    let c = connect(srv.addr).await;
    let v: i32 = c.query_one("SELECT 41 + 1", &[]).await.unwrap().get(0);
    assert_eq!(v, 42);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_statement_is_an_internal_error_not_a_crash() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    let e = c.batch_execute("SELECT eddy_test_panic()").await.expect_err("panics");
    assert_eq!(sqlstate(&e), "XX000", "{e:?}");
    let v: i32 = c.query_one("SELECT 7", &[]).await.unwrap().get(0);
    assert_eq!(v, 7);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_queries_settings_and_transactions_behave_like_postgres() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    let msgs = c.simple_query(";").await.unwrap();
    assert!(msgs.iter().all(|m| !matches!(m, SimpleQueryMessage::Row(_))));
    c.simple_query("-- ping").await.unwrap();
    let v: String = c.query_one("SELECT version()", &[]).await.unwrap().get(0);
    assert!(v.starts_with("PostgreSQL 15.0 (Eddy "), "{v}");
    c.batch_execute("SET application_name = 'x'; SET extra_float_digits = 3").await.unwrap();
    let rows = c.simple_query("SHOW application_name").await.unwrap();
    let SimpleQueryMessage::Row(r) = &rows[1] else { panic!("{rows:?}") };
    assert_eq!(r.get(0), Some("x"));
    c.batch_execute("BEGIN; CREATE TABLE tx (a INT); INSERT INTO tx VALUES (1); SAVEPOINT s1; RELEASE s1; COMMIT").await.unwrap();
    let n: i64 = c.query_one("SELECT count(*) FROM tx", &[]).await.unwrap().get(0);
    assert_eq!(n, 1);
    let iso: String = c.query_one("SHOW TRANSACTION ISOLATION LEVEL", &[]).await.unwrap().get(0);
    assert_eq!(iso, "read committed");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_mode_requires_the_password() {
    let config = eddy_server::ServerConfig {
        listen: "127.0.0.1:0".into(),
        state_store: "memory://".into(),
        password: Some("s3cret".into()),
        ..Default::default()
    };
    let srv = eddy_server::start(config).await.unwrap();
    let base = format!("host=127.0.0.1 port={} user=root dbname=dev", srv.addr.port());
    assert!(tokio_postgres::connect(&format!("{base} password=wrong"), tokio_postgres::NoTls).await.is_err());
    let (c, conn) = tokio_postgres::connect(&format!("{base} password=s3cret"), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let v: i32 = c.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(v, 1);
    srv.shutdown().await.unwrap();
}

/// Execute with max_rows > 0 returns that many rows and PortalSuspended; the next Execute on
/// the same portal continues where it stopped (tokio-postgres `query_portal`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portal_suspension_returns_rows_in_batches() {
    let srv = server("memory://").await;
    let mut c = connect(srv.addr).await;
    c.batch_execute("CREATE TABLE ps (id INT PRIMARY KEY, v TEXT)").await.unwrap();
    let values: Vec<String> = (1..=7).map(|i| format!("({i}, 'v{i}')")).collect();
    c.batch_execute(&format!("INSERT INTO ps VALUES {}", values.join(", "))).await.unwrap();
    let tx = c.transaction().await.unwrap();
    let stmt = tx.prepare("SELECT id, v FROM ps WHERE id > $1 ORDER BY id").await.unwrap();
    let portal = tx.bind(&stmt, &[&1i32]).await.unwrap();
    let mut batches = Vec::new();
    loop {
        let rows = tx.query_portal(&portal, 2).await.unwrap();
        if rows.is_empty() {
            break;
        }
        batches.push(rows.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>());
    }
    assert_eq!(batches, vec![vec![2, 3], vec![4, 5], vec![6, 7]]);
    // A second portal over the same statement starts from the beginning.
    let portal = tx.bind(&stmt, &[&5i32]).await.unwrap();
    let rows = tx.query_portal(&portal, 10).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.get::<_, String>(1)).collect::<Vec<_>>(), ["v6", "v7"]);
    tx.commit().await.unwrap();
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_column_names_follow_postgres_including_repeats() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute("CREATE TABLE names_t (a INT PRIMARY KEY, b TEXT); INSERT INTO names_t VALUES (1, 'x')").await.unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("SELECT 1, 1, 'a' || 'b'", &["?column?", "?column?", "?column?"]),
        ("SELECT a, a, b, a FROM names_t", &["a", "a", "b", "a"]),
        ("SELECT count(*), count(*), sum(a) FROM names_t", &["count", "count", "sum"]),
        ("SELECT a::text, a::int8, a FROM names_t", &["a", "a", "a"]),
        ("SELECT t1.a, t2.a FROM names_t t1 JOIN names_t t2 ON t1.a = t2.a", &["a", "a"]),
        ("SELECT a AS x, b AS x FROM names_t", &["x", "x"]),
        // PostgreSQL 15's names: a subscript keeps the name of what it indexes, value functions
        // without parentheses are named after themselves, a precision does not change a type's.
        ("SELECT arr[1], (ARRAY[1, 2])[2], s.arr[2] FROM (SELECT ARRAY[a, a] AS arr FROM names_t) s", &["arr", "array", "arr"]),
        ("SELECT current_role, CURRENT_SCHEMA, current_catalog, localtime, localtimestamp", &["current_role", "current_schema", "current_catalog", "localtime", "localtimestamp"]),
        ("SELECT * FROM (SELECT current_role, current_schema) s", &["current_role", "current_schema"]),
        ("SELECT CAST('2024-01-01' AS timestamp(1) with time zone), '10:00'::time(0), true, NULL", &["timestamptz", "time", "?column?", "?column?"]),
        ("SELECT substr('hello', 2), substring('hello', 2), overlay('Txxxxas' placing 'hom' from 2 for 4), now() AT TIME ZONE 'UTC'", &["substr", "substring", "overlay", "timezone"]),
    ];
    for (sql, want) in cases {
        let stmt = c.prepare(sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        let got: Vec<&str> = stmt.columns().iter().map(|col| col.name()).collect();
        assert_eq!(&got, want, "{sql}");
        c.query(&stmt, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
    // A relation cannot have two columns of one name.
    let e = c.batch_execute("CREATE TABLE names_c AS SELECT a, a FROM names_t").await.expect_err("duplicate");
    assert_eq!(sqlstate(&e), "42701", "{e:?}");
    let e = c.batch_execute("CREATE MATERIALIZED VIEW names_m AS SELECT b, count(*), count(*) FROM names_t GROUP BY b").await.expect_err("duplicate");
    assert_eq!(sqlstate(&e), "42701", "{e:?}");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enum_types_round_trip_through_a_driver_type_lookup() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')").await.unwrap();
    // tokio-postgres sees an unknown type OID and looks it up in pg_type and pg_enum.
    let stmt = c.prepare("SELECT 'ok'::mood").await.unwrap();
    let ty = stmt.columns()[0].type_().clone();
    assert_eq!(ty.name(), "mood");
    assert_eq!(stmt.columns()[0].name(), "mood");
    match ty.kind() {
        tokio_postgres::types::Kind::Enum(labels) => assert_eq!(labels, &vec!["sad".to_string(), "ok".into(), "happy".into()]),
        other => panic!("{other:?}"),
    }
    let e = c.query("SELECT 'meh'::mood", &[]).await.expect_err("not a label");
    assert_eq!(sqlstate(&e), "22P02", "{e:?}");
    let e = c.batch_execute("CREATE TYPE mood AS ENUM ('x')").await.expect_err("exists");
    assert_eq!(sqlstate(&e), "42710", "{e:?}");
    c.batch_execute("DROP TYPE mood; DROP TYPE IF EXISTS mood").await.unwrap();
    let e = c.batch_execute("DROP TYPE mood").await.expect_err("dropped");
    assert_eq!(sqlstate(&e), "42704", "{e:?}");
    srv.shutdown().await.unwrap();
}
