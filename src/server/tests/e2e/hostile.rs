//! Issue 10, item 1: each input that used to crash the server, sent to a live one. Each test
//! reproduces one crash (most aborted the whole process) and checks the answer PostgreSQL gives
//! instead, and that the session (or at least the server) carries on.

use crate::raw::{bind, cstr, execute, msg, parse, query, sync, Raw};
use crate::support::{connect, server, sqlstate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parameter_number_beyond_65535_is_42p02_not_a_huge_allocation() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    // Used to abort: "memory allocation of 2399999999976 bytes failed".
    for sql in ["SELECT $99999999999", "SELECT $70000", "SELECT $1 + $65536"] {
        let e = c.prepare(sql).await.expect_err(sql);
        assert_eq!(sqlstate(&e), "42P02", "{sql}: {e:?}");
    }
    // Within the limit, a parameter Bind does not supply is 08P01.
    let e = c.query("SELECT $1::int + $2::int", &[&1i32]).await.expect_err("one missing");
    assert!(sqlstate(&e) == "08P01" || e.to_string().contains("parameters"), "{e:?}");
    let v: i32 = c.query_one("SELECT $1::int", &[&7i32]).await.unwrap().get(0);
    assert_eq!(v, 7);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_max_rows_is_a_count_never_an_allocation_size() {
    let srv = server("memory://").await;
    let mut r = Raw::connect(srv.addr);
    // 2^30 used to pre-allocate 40 GiB and abort; -1 panicked ("capacity overflow").
    for max_rows in [1 << 30, -1, i32::MAX, i32::MIN] {
        let mut m = parse("SELECT generate_series FROM generate_series(1, 3)", &[]);
        m.extend(bind(&[], &[], &[]));
        m.extend(execute(max_rows));
        m.extend(sync());
        let msgs = r.round_trip(&m);
        assert_eq!(Raw::first_values(&msgs), ["1", "2", "3"], "max_rows {max_rows}: {msgs:?}");
        assert!(msgs.iter().any(|(t, _)| *t == b'C'), "completes: {msgs:?}");
    }
    // A positive max_rows still suspends the portal.
    let mut m = parse("SELECT generate_series FROM generate_series(1, 3)", &[]);
    m.extend(bind(&[], &[], &[]));
    m.extend(execute(2));
    m.extend(sync());
    let msgs = r.round_trip(&m);
    assert_eq!(Raw::first_values(&msgs), ["1", "2"]);
    assert!(msgs.iter().any(|(t, _)| *t == b's'), "PortalSuspended: {msgs:?}");
    r.assert_alive();
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_series_stops_before_overflow_and_streams() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    // Used to overflow: a panic in debug builds, an endless series (and an abort) in release.
    let rows = c.query("SELECT * FROM generate_series(1, 9223372036854775807, 4611686018427387904)", &[]).await.unwrap();
    let got: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(got, vec![1, 4611686018427387905]);
    let rows = c.query("SELECT * FROM generate_series(-9223372036854775808, -9223372036854775807, -1)", &[]).await.unwrap();
    assert!(rows.is_empty());
    let rows = c.query("SELECT * FROM generate_series(9223372036854775806, 9223372036854775807)", &[]).await.unwrap();
    assert_eq!(rows.len(), 2);
    let rows = c.query("SELECT * FROM range(1, 9223372036854775807, 4611686018427387904)", &[]).await.unwrap();
    assert_eq!(rows.len(), 2);
    let e = c.query("SELECT * FROM generate_series(1, 10, 0)", &[]).await.expect_err("zero step");
    assert_eq!(sqlstate(&e), "42601", "{e:?}");
    // Long series are generated a batch at a time.
    let n: i64 = c.query_one("SELECT count(*) FROM generate_series(1, 3000000)", &[]).await.unwrap().get(0);
    assert_eq!(n, 3_000_000);
    srv.shutdown().await.unwrap();
}

/// The deep statements run (they overflowed a worker's stack and aborted the process);
/// statements past the documented depth are refused with 54001; the session survives both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_statements_run_up_to_the_depth_limit_and_are_refused_beyond_it() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    let plus = format!("SELECT {}", vec!["1"; 2000].join(" + "));
    let n: i32 = c.query_one(&plus, &[]).await.unwrap().get(0);
    assert_eq!(n, 2000);
    let concat = format!("SELECT length({})", vec!["'a'"; 2000].join(" || "));
    let n: i32 = c.query_one(&concat, &[]).await.unwrap().get(0);
    assert_eq!(n, 2000);
    let union = vec!["SELECT 1 AS x"; 1000].join(" UNION ALL ");
    let n: i64 = c.query_one(&format!("SELECT count(*) FROM ({union}) u"), &[]).await.unwrap().get(0);
    assert_eq!(n, 1000);
    let nested = format!("SELECT {}1{}::text", "(".repeat(1000), ")".repeat(1000));
    let n: String = c.query_one(&nested, &[]).await.unwrap().get(0);
    assert_eq!(n, "1");
    let calls = format!("SELECT {}-1{}::text", "abs(".repeat(100), ")".repeat(100));
    let n: String = c.query_one(&calls, &[]).await.unwrap().get(0);
    assert_eq!(n, "1");
    let arrays = format!("SELECT {}1{}", "ARRAY[".repeat(6), "]".repeat(6));
    c.simple_query(&arrays).await.unwrap();
    // PostgreSQL's 6 array dimensions, refused before planning (1,000 levels took minutes).
    let e = c.simple_query(&format!("SELECT {}1{}", "ARRAY[".repeat(1000), "]".repeat(1000))).await.expect_err("too many dimensions");
    assert_eq!(sqlstate(&e), "54000", "{e:?}");
    let subqueries = format!("SELECT {}1{}", "(SELECT ".repeat(12), ")".repeat(12));
    c.simple_query(&subqueries).await.unwrap();
    let too_deep = [
        format!("SELECT {}", vec!["1"; 100_000].join("+")),
        format!("SELECT {}", vec!["'a'"; 5000].join("||")),
        vec!["SELECT 1"; 5000].join(" UNION ALL "),
        format!("SELECT {}1{}", "(".repeat(100_000), ")".repeat(100_000)),
        format!("SELECT {}1{}", "abs(".repeat(50_000), ")".repeat(50_000)),
        format!("SELECT {}1{}", "(SELECT ".repeat(13), ")".repeat(13)),
    ];
    for sql in &too_deep {
        let e = c.simple_query(sql).await.expect_err("too deep");
        assert_eq!(sqlstate(&e), "54001", "{}...: {e:?}", &sql[..40]);
        let v: i32 = c.query_one("SELECT 41 + 1", &[]).await.unwrap().get(0);
        assert_eq!(v, 42);
    }
    srv.shutdown().await.unwrap();
}

/// Malformed frontend messages are errors for that message; the connection carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_are_errors_and_the_connection_survives() {
    let srv = server("memory://").await;
    let mut r = Raw::connect(srv.addr);
    let mut claims_65535 = cstr("");
    claims_65535.extend(cstr("SELECT 1"));
    claims_65535.extend(65535u16.to_be_bytes());
    let mut bind_past_end = cstr("");
    bind_past_end.extend(cstr(""));
    bind_past_end.extend(0u16.to_be_bytes());
    bind_past_end.extend(1u16.to_be_bytes());
    bind_past_end.extend(1000i32.to_be_bytes());
    bind_past_end.extend(b"12");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (msg(b'P', &claims_65535), "08P01"),
        (msg(b'P', b"no terminators at all"), "08P01"),
        ([parse("SELECT $1::int", &[]), msg(b'B', &bind_past_end)].concat(), "08P01"),
        ([parse("SELECT $1::int", &[]), bind(&[0, 1], &[Some(b"1")], &[])].concat(), "08P01"),
        ([parse("SELECT $1::int", &[]), bind(&[9], &[Some(b"1")], &[])].concat(), "22023"),
        ([parse("SELECT 1, 2", &[]), bind(&[], &[], &[0, 1, 0]), execute(0)].concat(), "08P01"),
        (msg(b'D', b"Xname\0"), "08P01"),
        (msg(b'E', b"\0\0"), "08P01"),
    ];
    for (bytes, code) in cases {
        let msgs = r.round_trip(&[bytes.clone(), sync()].concat());
        let errors = Raw::errors(&msgs);
        assert_eq!(errors.len(), 1, "{bytes:?}: {msgs:?}");
        assert_eq!((errors[0].severity.as_str(), errors[0].code.as_str()), ("ERROR", code), "{bytes:?}: {errors:?}");
        r.assert_alive();
    }
    // Query text that is not UTF-8 is 22021; `€€` is a syntax error, not a dropped connection.
    let msgs = r.round_trip(&msg(b'Q', b"SELECT '\xff\xfe'\0"));
    assert_eq!(Raw::errors(&msgs)[0].code, "22021", "{msgs:?}");
    r.assert_alive();
    let msgs = r.round_trip(&query("€€"));
    assert_eq!(Raw::errors(&msgs)[0].code, "42601", "{msgs:?}");
    r.assert_alive();
    // Execute with max_rows -1 on a good portal returns every row.
    let msgs = r.round_trip(&[parse("SELECT 5", &[]), bind(&[], &[], &[]), execute(-1), sync()].concat());
    assert_eq!(Raw::first_values(&msgs), ["5"]);
    srv.shutdown().await.unwrap();
}

/// A frame whose length cannot be trusted ends that connection (FATAL, as in PostgreSQL);
/// nothing else is affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lying_lengths_and_unknown_message_types_end_only_their_connection() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    let mut negative = vec![b'Q'];
    negative.extend((-5i32).to_be_bytes());
    let mut too_short = vec![b'P'];
    too_short.extend(2i32.to_be_bytes());
    let mut sync_too_long = vec![b'S'];
    sync_too_long.extend(1_000_000i32.to_be_bytes());
    for bytes in [negative, too_short, sync_too_long, msg(b'Z', b""), msg(0xff, b"junk")] {
        let mut r = Raw::connect(srv.addr);
        r.send(&bytes);
        let msgs = r.until_closed();
        let errors = Raw::errors(&msgs);
        assert_eq!(errors.len(), 1, "{bytes:?}: {msgs:?}");
        assert_eq!((errors[0].severity.as_str(), errors[0].code.as_str()), ("FATAL", "08P01"), "{errors:?}");
        let v: i32 = c.query_one("SELECT 1", &[]).await.unwrap().get(0);
        assert_eq!(v, 1);
    }
    // Startup packets: too short, too long, not protocol 3, no terminator.
    for bytes in [
        vec![0, 0, 0, 4, 0, 0, 0, 0],
        [&100_000i32.to_be_bytes()[..], &[0; 4]].concat(),
        [&12i32.to_be_bytes()[..], &0x0002_0000i32.to_be_bytes(), b"\0\0\0\0"].concat(),
        [&14i32.to_be_bytes()[..], &196_608i32.to_be_bytes(), b"user\0x"].concat(),
    ] {
        let mut r = Raw::open(srv.addr);
        r.send(&bytes);
        let errors = Raw::errors(&r.until_closed());
        assert!(errors.iter().all(|e| e.severity == "FATAL"), "{bytes:?}: {errors:?}");
    }
    let v: i32 = c.query_one("SELECT 2", &[]).await.unwrap().get(0);
    assert_eq!(v, 2);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_parameters_that_do_not_decode_are_22p03() {
    let srv = server("memory://").await;
    let mut r = Raw::connect(srv.addr);
    // A numeric of eight 0xFF bytes used to be XX000 "decoding parameter $1 panicked".
    let ff = [0xffu8; 8];
    let cases: Vec<(u32, Vec<u8>, &str)> = vec![
        (1700, ff.to_vec(), "22P03"),
        (23, vec![1, 2, 3], "22P03"),
        // An int4[] claiming 2^31 - 1 elements in 24 bytes.
        (1007, [1i32, 0, 23, i32::MAX, 1, 4].iter().flat_map(|v| v.to_be_bytes()).collect(), "22P03"),
        (1114, i64::MAX.to_be_bytes().to_vec(), "22003"),
    ];
    for (oid, value, code) in cases {
        let m = [parse("SELECT $1", &[oid]), bind(&[1], &[Some(&value)], &[]), execute(0), sync()].concat();
        let msgs = r.round_trip(&m);
        let errors = Raw::errors(&msgs);
        assert_eq!(errors.len(), 1, "oid {oid}: {msgs:?}");
        assert_eq!(errors[0].code, code, "oid {oid}: {errors:?}");
        assert!(errors[0].message.contains("$1"), "names the parameter: {errors:?}");
        r.assert_alive();
    }
    srv.shutdown().await.unwrap();
}

/// A statement whose planning runs for seconds (DataFusion's optimizer is exponential in joins
/// on nested COALESCE conditions) no longer stalls other sessions: their queries are answered
/// while it plans. Before, the busy worker held the IO driver and another connection's
/// `SELECT 1` waited for the whole planning (8 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_plan_does_not_stall_other_sessions() {
    let srv = server("memory://").await;
    let heavy = connect(srv.addr).await;
    let other = connect(srv.addr).await;
    heavy.batch_execute("CREATE TABLE t (v INT)").await.unwrap();
    let mut from = "t".to_string();
    let mut merged = "t.v".to_string();
    for i in 1..17 {
        from.push_str(&format!(" FULL JOIN t t{i} ON {merged} = t{i}.v"));
        merged = format!("coalesce({merged}, t{i}.v)");
    }
    let slow = format!("EXPLAIN SELECT count(*) FROM {from}");
    let planning = heavy.simple_query(&slow);
    tokio::pin!(planning);
    // The slow statement is on its way before the other session starts asking.
    tokio::select! {
        biased;
        done = &mut planning => panic!("the slow plan finished first: {:?}", done.map(|m| m.len())),
        _ = tokio::task::yield_now() => {}
    }
    let answered = async {
        for _ in 0..20 {
            let v: i32 = other.query_one("SELECT 1", &[]).await.unwrap().get(0);
            assert_eq!(v, 1);
        }
    };
    tokio::select! {
        done = &mut planning => panic!("other sessions waited for the slow plan: {:?}", done.map(|m| m.len())),
        _ = answered => {}
    }
    planning.await.unwrap();
    srv.shutdown().await.unwrap();
}
