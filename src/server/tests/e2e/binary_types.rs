//! Every supported type round-trips through binary parameters and binary results
//! (tokio-postgres uses the binary format for both).

use tokio_postgres::types::ToSql;

use crate::support::{connect, server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_round_trips_in_binary_format() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE types (id INT PRIMARY KEY, b BOOLEAN, i2 SMALLINT, i8 BIGINT, f4 REAL, f8 DOUBLE PRECISION, \
         n NUMERIC(12,3), t TEXT, vc VARCHAR(10), d DATE, tm TIME, ts TIMESTAMP, tz TIMESTAMPTZ, iv INTERVAL, by BYTEA, j JSONB)",
    )
    .await
    .unwrap();
    c.batch_execute(
        "INSERT INTO types VALUES (1, true, -7, 9000000000, 1.5, -2.25, 12345.678, 'héllo', 'abc', '2024-02-29', '13:14:15.5', \
         '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05+00', '1 year 2 mons 3 days 04:05:06', '\\x00ff', '{\"b\": 1, \"a\": [1, 2]}')",
    )
    .await
    .unwrap();
    let r = c.query_one("SELECT b, i2, i8, f4, f8, t, vc, d, tm, ts, tz, by FROM types WHERE id = $1", &[&1i32]).await.unwrap();
    assert!(r.get::<_, bool>(0));
    assert_eq!(r.get::<_, i16>(1), -7);
    assert_eq!(r.get::<_, i64>(2), 9_000_000_000);
    assert_eq!(r.get::<_, f32>(3), 1.5);
    assert_eq!(r.get::<_, f64>(4), -2.25);
    assert_eq!(r.get::<_, String>(5), "héllo");
    assert_eq!(r.get::<_, String>(6), "abc");
    // Dates and times are checked through their text rendering (no chrono feature in tests).
    let text = c.simple_query("SELECT d, tm, ts, tz, iv, n, j, by FROM types").await.unwrap();
    let tokio_postgres::SimpleQueryMessage::Row(row) = &text[1] else { panic!("{text:?}") };
    let got: Vec<&str> = (0..8).map(|i| row.get(i).unwrap()).collect();
    assert_eq!(
        got,
        vec![
            "2024-02-29",
            "13:14:15.5",
            "2024-01-02 03:04:05.123456",
            "2024-01-02 03:04:05+00",
            "1 year 2 mons 3 days 04:05:06",
            "12345.678",
            "{\"a\": [1, 2], \"b\": 1}",
            "\\x00ff"
        ]
    );
    assert_eq!(r.get::<_, Vec<u8>>(11), vec![0u8, 255]);
    // Binary parameters of every integer/float/text/bool type, inserted then read back.
    c.execute(
        "INSERT INTO types (id, b, i2, i8, f4, f8, t) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[&2i32 as &(dyn ToSql + Sync), &false, &3i16, &-4i64, &0.25f32, &1e300f64, &"x"],
    )
    .await
    .unwrap();
    let r = c.query_one("SELECT b, i2, i8, f4, f8, t FROM types WHERE id = 2", &[]).await.unwrap();
    assert!(!r.get::<_, bool>(0));
    assert_eq!(r.get::<_, i16>(1), 3);
    assert_eq!(r.get::<_, i64>(2), -4);
    assert_eq!(r.get::<_, f32>(3), 0.25);
    assert_eq!(r.get::<_, f64>(4), 1e300);
    assert_eq!(r.get::<_, String>(5), "x");
    // Binary bytea parameter.
    c.execute("INSERT INTO types (id, by) VALUES ($1, $2)", &[&3i32 as &(dyn ToSql + Sync), &vec![1u8, 2, 3]]).await.unwrap();
    let r = c.query_one("SELECT by FROM types WHERE id = 3", &[]).await.unwrap();
    assert_eq!(r.get::<_, Vec<u8>>(0), vec![1u8, 2, 3]);
    srv.shutdown().await.unwrap();
}

/// List columns go out in PostgreSQL's binary array format (dimensions, NULL flag, element OID,
/// bounds, length-prefixed elements): tokio-postgres decodes them into vectors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrays_round_trip_in_binary_format() {
    let srv = server("memory://").await;
    let c = connect(srv.addr).await;
    let row = c
        .query_one(
            "SELECT make_array(1, 2, NULL) AS i4, make_array(CAST(7 AS BIGINT)) AS i8, \
             make_array('x', 'y z', NULL, '') AS t, make_array(true, false) AS b, make_array(CAST(1.5 AS DOUBLE PRECISION), CAST(-2.25 AS DOUBLE PRECISION)) AS f8, \
             make_array(CAST(12.50 AS NUMERIC(10,2))) AS num, array_remove(make_array(1), 1) AS empty, current_schemas(true) AS s",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Vec<Option<i32>>>("i4"), vec![Some(1), Some(2), None]);
    assert_eq!(row.get::<_, Vec<i64>>("i8"), vec![7]);
    assert_eq!(row.get::<_, Vec<Option<String>>>("t"), vec![Some("x".into()), Some("y z".into()), None, Some(String::new())]);
    assert_eq!(row.get::<_, Vec<bool>>("b"), vec![true, false]);
    assert_eq!(row.get::<_, Vec<f64>>("f8"), vec![1.5, -2.25]);
    assert_eq!(row.get::<_, Vec<i32>>("empty"), Vec::<i32>::new());
    assert_eq!(row.columns()[5].type_(), &tokio_postgres::types::Type::NUMERIC_ARRAY);
    assert_eq!(row.get::<_, Vec<String>>("s"), vec!["pg_catalog".to_string(), "public".to_string()]);
    // Catalog array columns too (pg_index.indkey is int2[]).
    c.batch_execute("CREATE TABLE arr_t (a INT, b INT, PRIMARY KEY (b, a))").await.unwrap();
    let row = c
        .query_one("SELECT indkey FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE c.relname = 'arr_t'", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Vec<i16>>(0), vec![2, 1]);
    srv.shutdown().await.unwrap();
}
