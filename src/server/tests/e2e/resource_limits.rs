//! Issue 10, item 2: resource limits as PostgreSQL enforces them: message size
//! (`--max-message-bytes`, 54000 before the message is buffered), connections
//! (`--max-connections`, 53300), per-query memory (`--query-memory-mb`, 53200),
//! `statement_timeout` (57014) and `idle_in_transaction_session_timeout` (FATAL 25P03).

use std::time::Duration;

use crate::raw::{bind, execute, parse, query, sync, Raw};
use crate::support::{connect, eventually, server_with, sqlstate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_max_message_bytes_is_refused_before_it_is_read() {
    let srv = server_with(|c| c.limits.max_message_bytes = 1 << 20).await;
    // Only the header of a 2 MiB query is sent: the refusal cannot wait for the body.
    let mut r = Raw::connect(srv.addr);
    let mut header = vec![b'Q'];
    header.extend(((2 << 20) + 4i32).to_be_bytes());
    header.extend(b"SELECT '");
    r.send(&header);
    let errors = Raw::errors(&r.until_closed());
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!((errors[0].severity.as_str(), errors[0].code.as_str()), ("FATAL", "54000"), "{errors:?}");
    assert!(errors[0].message.contains("exceeds the limit"), "{errors:?}");
    // A message under the limit is served.
    let c = connect(srv.addr).await;
    let sql = format!("SELECT length('{}')", "x".repeat(900_000));
    let n: i32 = c.query_one(&sql, &[]).await.unwrap().get(0);
    assert_eq!(n, 900_000);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_max_connections_are_refused_with_53300() {
    let srv = server_with(|c| c.limits.max_connections = 2).await;
    let conn_str = format!("host=127.0.0.1 port={} user=root dbname=dev", srv.addr.port());
    let first = connect(srv.addr).await;
    let second = connect(srv.addr).await;
    let e = match tokio_postgres::connect(&conn_str, tokio_postgres::NoTls).await {
        Ok(_) => panic!("a third connection was accepted"),
        Err(e) => e,
    };
    assert_eq!(sqlstate(&e), "53300", "{e:?}");
    assert!(e.as_db_error().is_some_and(|d| d.message() == "sorry, too many clients already"), "{e:?}");
    // Cancel requests do not count as clients.
    first.cancel_token().cancel_query(tokio_postgres::NoTls).await.unwrap();
    // A slot comes back when a client leaves.
    drop(second);
    let third = eventually(Duration::from_secs(30), || {
        let conn_str = conn_str.clone();
        async move {
            let (c, conn) = tokio_postgres::connect(&conn_str, tokio_postgres::NoTls).await.ok()?;
            tokio::spawn(conn);
            Some(c)
        }
    })
    .await;
    let v: i32 = third.query_one("SELECT 3", &[]).await.unwrap().get(0);
    assert_eq!(v, 3);
    let v: i32 = first.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(v, 1);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_over_its_memory_budget_fails_with_53200_and_the_server_carries_on() {
    let srv = server_with(|c| c.limits.query_memory_bytes = 16 << 20).await;
    let c = connect(srv.addr).await;
    // A hash join's build side cannot spill: 3 million keys need far more than 16 MiB.
    let join = "SELECT count(*) FROM generate_series(1, 3000000) a(x) JOIN generate_series(1, 3000000) b(y) ON a.x = b.y";
    let e = c.simple_query(join).await.expect_err("over budget");
    assert_eq!(sqlstate(&e), "53200", "{e:?}");
    let e = c.query(join, &[]).await.expect_err("over budget, extended protocol");
    assert_eq!(sqlstate(&e), "53200", "{e:?}");
    let n: i64 = c.query_one("SELECT count(*) FROM generate_series(1, 100000) a(x) JOIN generate_series(1, 100000) b(y) ON a.x = b.y", &[]).await.unwrap().get(0);
    assert_eq!(n, 100_000);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_cancels_a_long_query_with_57014() {
    let srv = server_with(|_| {}).await;
    let c = connect(srv.addr).await;
    c.batch_execute("SET statement_timeout = '300ms'").await.unwrap();
    let forever = "SELECT count(*) FROM generate_series(1, 1000000000000)";
    let e = c.simple_query(forever).await.expect_err("times out");
    assert_eq!(sqlstate(&e), "57014", "{e:?}");
    assert!(e.as_db_error().is_some_and(|d| d.message().contains("statement timeout")), "{e:?}");
    let e = c.query(forever, &[]).await.expect_err("times out, extended protocol");
    assert_eq!(sqlstate(&e), "57014", "{e:?}");
    // Rows already streaming are cut off too (read and dropped as they come).
    let mut r = Raw::connect(srv.addr);
    r.round_trip(&query("SET statement_timeout = '300ms'"));
    r.send(&query("SELECT * FROM generate_series(1, 1000000000000)"));
    let (mut rows, mut errors) = (0u64, Vec::new());
    while let Some((tag, body)) = r.next() {
        match tag {
            b'D' => rows += 1,
            b'E' => errors.push(crate::raw::error_fields(&body)),
            b'Z' => break,
            _ => {}
        }
    }
    assert!(rows > 0, "rows were streaming before the timeout");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].code, "57014", "{errors:?}");
    r.assert_alive();
    // Quick statements are unaffected, and 0 turns the timeout off.
    let v: i32 = c.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(v, 1);
    c.batch_execute("SET statement_timeout = 0").await.unwrap();
    let n: i64 = c.query_one("SELECT count(*) FROM generate_series(1, 100000)", &[]).await.unwrap().get(0);
    assert_eq!(n, 100_000);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_in_transaction_session_timeout_ends_the_session_with_25p03() {
    let srv = server_with(|_| {}).await;
    let mut r = Raw::connect(srv.addr);
    r.round_trip(&query("SET idle_in_transaction_session_timeout = '200ms'"));
    let msgs = r.round_trip(&query("BEGIN"));
    assert_eq!(msgs.last().map(|(_, b)| b.clone()), Some(b"T".to_vec()), "in a transaction block: {msgs:?}");
    // The server ends the session on its own; the client only waits.
    let errors = Raw::errors(&r.until_closed());
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!((errors[0].severity.as_str(), errors[0].code.as_str()), ("FATAL", "25P03"), "{errors:?}");
    // Other sessions are unaffected.
    let c = connect(srv.addr).await;
    let v: i32 = c.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(v, 1);
    srv.shutdown().await.unwrap();
}

/// A client that stops reading stops its query: the server does not buffer the result. A
/// hundred million rows (well over a gigabyte on the wire) are asked for and one is read; the
/// server's memory stays flat while it waits, and other clients are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_stream_with_backpressure_to_a_client_that_stops_reading() {
    let eddy = crate::process::Eddy::start("backpressure", &[]);
    let c = connect(eddy.addr).await;
    c.query_one("SELECT count(*) FROM generate_series(1, 100000)", &[]).await.unwrap();
    let before = eddy.rss_kib();
    let sql = "SELECT generate_series, 'padding padding padding' FROM generate_series(1, 100000000)";
    // Simple protocol, and extended (whose Execute used to collect every row before sending).
    let mut simple = Raw::connect(eddy.addr);
    simple.send(&query(sql));
    assert_eq!(simple.next().map(|m| m.0), Some(b'T'));
    assert_eq!(simple.next().map(|m| m.0), Some(b'D'));
    let mut extended = Raw::connect(eddy.addr);
    extended.send(&[parse(sql, &[]), bind(&[], &[], &[]), execute(0), sync()].concat());
    assert_eq!(extended.next().map(|m| m.0), Some(b'1'));
    assert_eq!(extended.next().map(|m| m.0), Some(b'2'));
    assert_eq!(extended.next().map(|m| m.0), Some(b'D'));
    // Observe (not synchronize): a server that buffered would grow by tens of MB a second.
    let mut peak = before;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        peak = peak.max(eddy.rss_kib());
    }
    let v: i32 = c.query_one("SELECT 7", &[]).await.unwrap().get(0);
    assert_eq!(v, 7);
    assert!(peak < before + 64 * 1024, "server RSS grew from {before} KiB to {peak} KiB while the client was not reading");
    drop((simple, extended));
    let v: i32 = c.query_one("SELECT 8", &[]).await.unwrap().get(0);
    assert_eq!(v, 8);
}

/// The server turns transparent huge pages off for itself (`main.rs`): with them, mimalloc's
/// arenas become resident 2 MiB at a time and a 5M-row COPY peaked ~100 MiB higher. Older
/// kernels do not show the flag in `/proc/<pid>/status`; there is nothing to read then.
#[test]
fn the_server_runs_without_transparent_huge_pages() {
    let eddy = crate::process::Eddy::start("no-thp", &[]);
    match eddy.status_field("THP_enabled") {
        Some(v) => assert_eq!(v, "0", "THP_enabled of the server process"),
        None => eprintln!("this kernel does not report THP_enabled; nothing to check"),
    }
}
