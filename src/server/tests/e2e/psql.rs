//! A psql script run non-interactively (psql is the client most users start with).

use std::process::Command;

use crate::support::{server, temp_dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_psql_script_runs_including_copy() {
    if Command::new("psql").arg("--version").output().is_err() {
        panic!("psql is required for this test (apt-get install postgresql-client)");
    }
    let srv = server("memory://").await;
    let dir = temp_dir("psql");
    std::fs::write(dir.join("data.csv"), "id,name\n1,alpha\n2,\"be,ta\"\n3,\n").unwrap();
    let script = format!(
        "CREATE TABLE p (id INT PRIMARY KEY, name TEXT);\n\
         \\copy p FROM '{}' WITH (FORMAT csv, HEADER true)\n\
         INSERT INTO p VALUES (4, 'delta');\n\
         UPDATE p SET name = upper(name) WHERE id >= 2;\n\
         DELETE FROM p WHERE id = 4;\n\
         SELECT id, coalesce(name, '<null>') AS name FROM p ORDER BY id;\n",
        dir.join("data.csv").display()
    );
    std::fs::write(dir.join("script.sql"), script).unwrap();
    let addr = srv.addr;
    let out = tokio::task::spawn_blocking(move || {
        Command::new("psql")
            .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string(), "-U", "root", "-d", "dev"])
            .args(["-X", "-v", "ON_ERROR_STOP=1", "-A", "-t", "-f"])
            .arg(dir.join("script.sql"))
            .output()
            .expect("psql runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "psql failed: {stderr}\n{stdout}");
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains('|')).collect();
    assert_eq!(lines, vec!["1|alpha", "2|BE,TA", "3|<null>"], "stdout: {stdout}");
    assert!(stdout.contains("COPY 3"), "stdout: {stdout}");
    srv.shutdown().await.unwrap();
}

/// Runs psql meta-commands against `addr` and returns stdout (fails on any error).
async fn psql_commands(addr: std::net::SocketAddr, commands: &[&str]) -> String {
    let mut args: Vec<String> = vec!["-h".into(), addr.ip().to_string(), "-p".into(), addr.port().to_string()];
    args.extend(["-U", "root", "-d", "dev", "-X", "-v", "ON_ERROR_STOP=1"].map(String::from));
    for c in commands {
        args.push("-c".into());
        args.push(c.to_string());
    }
    let out = tokio::task::spawn_blocking(move || Command::new("psql").args(&args).output().expect("psql runs")).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "psql failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_describe_commands_list_and_describe_relations() {
    if Command::new("psql").arg("--version").output().is_err() {
        panic!("psql is required for this test (apt-get install postgresql-client)");
    }
    let srv = server("memory://").await;
    let c = crate::support::connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE t1 (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL DEFAULT 'x', amount NUMERIC(10,2), ts TIMESTAMPTZ); \
         CREATE SCHEMA s2; CREATE TABLE s2.other (a BIGINT)",
    )
    .await
    .unwrap();
    let out = psql_commands(srv.addr, &["\\d", "\\dt", "\\dv", "\\dm", "\\dn", "\\l", "\\du", "\\d t1", "\\d s2.other", "\\di"]).await;
    for want in [
        " public | t1   | table | root",
        " public | root",
        " s2     | root",
        " dev  | root  | UTF8",
        " root      | Superuser",
        "Table \"public.t1\"",
        " id     | integer                  |           | not null | ",
        " name   | character varying(20)    |           | not null | 'x'",
        " amount | numeric(10,2)            |           |          | ",
        " ts     | timestamp with time zone |           |          | ",
        "\"t1_pkey\" PRIMARY KEY, btree (id)",
        "Table \"s2.other\"",
        " a      | bigint |",
        " public | t1_pkey | index | root  | t1",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // Catalog relations are described like any table, with PostgreSQL's type names.
    let out = psql_commands(srv.addr, &["\\d pg_catalog.pg_class"]).await;
    assert!(out.contains(" relkind             | \"char\""), "{out}");
    assert!(out.contains(" oid                 | oid"), "{out}");
    srv.shutdown().await.unwrap();
}

/// `\d+` on a table and on a materialized view: storage columns, and the view's definition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_describe_plus_shows_storage_and_the_view_definition() {
    let srv = server("memory://").await;
    let c = crate::support::connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE t1 (id INT PRIMARY KEY, name TEXT NOT NULL, amount NUMERIC(10,2)); \
         CREATE MATERIALIZED VIEW m1 AS SELECT name, count(*) AS n, sum(amount) AS total FROM t1 GROUP BY name",
    )
    .await
    .unwrap();
    let out = psql_commands(srv.addr, &["\\d+ t1", "\\d+ m1", "\\dm"]).await;
    for want in [
        "Table \"public.t1\"",
        " id     | integer       |           | not null |         | plain    |",
        " amount | numeric(10,2) |           |          |         | extended |",
        "\"t1_pkey\" PRIMARY KEY, btree (id)",
        "Materialized view \"public.m1\"",
        " n      | bigint        |           |          |         | plain    |",
        " total  | numeric(20,2) |",
        "View definition:",
        " SELECT name, count(*) AS n, sum(amount) AS total FROM t1 GROUP BY name;",
        " public | m1   | materialized view | root",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    srv.shutdown().await.unwrap();
}

/// Every `sql` block of the README, in order, replayed through psql as a user would type it
/// (with the `orders.csv` its `\copy` reads): each statement must succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_tour_runs_as_written() {
    if Command::new("psql").arg("--version").output().is_err() {
        panic!("psql is required for this test (apt-get install postgresql-client)");
    }
    let readme = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let mut script = String::new();
    let mut in_sql = false;
    for line in readme.lines() {
        match (in_sql, line.trim_end()) {
            (false, "```sql") => in_sql = true,
            (true, "```") => in_sql = false,
            (true, l) => {
                script.push_str(l);
                script.push('\n');
            }
            _ => {}
        }
    }
    assert!(script.contains("CREATE MATERIALIZED VIEW"), "no sql blocks found in the README");
    let srv = server("memory://").await;
    let dir = temp_dir("readme");
    std::fs::write(dir.join("orders.csv"), "id,customer,amount\n10,dee,4.00\n11,ada,2.50\n").unwrap();
    std::fs::write(dir.join("tour.sql"), &script).unwrap();
    let addr = srv.addr;
    let out = tokio::task::spawn_blocking(move || {
        Command::new("psql")
            .current_dir(&dir)
            .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string(), "-U", "root", "-d", "dev"])
            .args(["-X", "-v", "ON_ERROR_STOP=1", "-f", "tour.sql"])
            .output()
            .expect("psql runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the README tour failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("COPY 2"), "{stdout}");
    // VERIFY in the tour answers OK.
    assert!(stdout.lines().any(|l| l.trim() == "OK"), "{stdout}");
    srv.shutdown().await.unwrap();
}

/// `COPY ... TO STDOUT` and psql's `\copy ... to stdout`: a table, a column list and a query, in
/// text and CSV (with a header), escaped as PostgreSQL writes them; then the rows read back
/// by `COPY FROM STDIN` into a second table are the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_to_stdout_writes_text_and_csv_that_copy_from_reads_back() {
    let srv = server("memory://").await;
    let c = crate::support::connect(srv.addr).await;
    c.batch_execute(
        "CREATE TABLE src (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2)); \
         INSERT INTO src VALUES (1, 'plain', 1.5), (2, 'tab\there', NULL), (3, 'comma, \"quoted\"', -2), (4, '', 0)",
    )
    .await
    .unwrap();
    let out = psql_commands(srv.addr, &["COPY (SELECT * FROM src ORDER BY id) TO STDOUT"]).await;
    assert_eq!(out, "1\tplain\t1.50\n2\ttab\\there\t\\N\n3\tcomma, \"quoted\"\t-2.00\n4\t\t0.00\n", "{out:?}");
    let out = psql_commands(srv.addr, &["\\copy (SELECT id, name FROM src WHERE id > 1 ORDER BY id) to stdout with (format csv, header)"]).await;
    assert_eq!(out, "id,name\n2,tab\there\n3,\"comma, \"\"quoted\"\"\"\n4,\"\"\n", "{out:?}");
    let out = psql_commands(srv.addr, &["COPY src (id) TO STDOUT"]).await;
    let mut ids: Vec<&str> = out.lines().collect();
    ids.sort();
    assert_eq!(ids, ["1", "2", "3", "4"]);
    // What COPY TO wrote, COPY FROM reads back.
    let dir = temp_dir("copy-round-trip");
    let file = dir.join("src.csv");
    let path = file.display().to_string();
    psql_commands(srv.addr, &[&format!("\\copy src to '{path}' with (format csv)")]).await;
    c.batch_execute("CREATE TABLE dst (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2))").await.unwrap();
    psql_commands(srv.addr, &[&format!("\\copy dst from '{path}' with (format csv)")]).await;
    let diff = crate::support::rows(&c, "SELECT count(*) FROM (SELECT * FROM src EXCEPT SELECT * FROM dst) d").await.unwrap();
    assert_eq!(diff, [["0"]]);
    let same = crate::support::rows(&c, "SELECT count(*) FROM dst WHERE name = '' AND id = 4").await.unwrap();
    assert_eq!(same, [["1"]], "an empty string stays an empty string, not NULL");
    // Files on the server are refused: COPY writes to the client. Options it would not honour
    // are refused rather than ignored, and so are contradictory ones.
    for (sql, code) in [
        ("COPY src TO '/tmp/x'", "0A000"),
        ("COPY src TO STDOUT WITH (FORMAT csv, FORCE_QUOTE (id))", "0A000"),
        ("COPY src TO STDOUT WITH (FORMAT csv, ESCAPE '\\')", "0A000"),
        ("COPY src TO STDOUT WITH (FORMAT csv, DELIMITER '\"')", "22023"),
        ("COPY (SUBSCRIBE src) FROM STDIN", "42601"),
    ] {
        let e = c.simple_query(sql).await.unwrap_err();
        assert_eq!(crate::support::sqlstate(&e), code, "{sql}: {e}");
    }
    srv.shutdown().await.unwrap();
}

/// A CHECK constraint holds for COPY as for INSERT: one violating row fails the whole COPY
/// with 23514 and leaves nothing behind; a clean COPY then lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_enforces_check_constraints_atomically() {
    use futures::SinkExt;
    let srv = server("memory://").await;
    let c = crate::support::connect(srv.addr).await;
    c.batch_execute("CREATE TABLE chk (id INT PRIMARY KEY, qty INT CHECK (qty >= 0))").await.unwrap();
    let copy = |data: &'static str| {
        let c = &c;
        async move {
            let sink = c.copy_in("COPY chk FROM STDIN").await?;
            futures::pin_mut!(sink);
            sink.send(bytes::Bytes::from_static(data.as_bytes())).await?;
            sink.finish().await
        }
    };
    let err = copy("1\t5\n2\t-1\n3\t7\n").await.expect_err("a negative qty violates the check");
    assert_eq!(crate::support::sqlstate(&err), "23514", "{err:?}");
    assert!(err.to_string().contains("chk_qty_check") || format!("{err:?}").contains("chk_qty_check"), "{err:?}");
    assert_eq!(crate::support::rows(&c, "SELECT count(*) FROM chk").await.unwrap(), vec![vec!["0".to_string()]]);
    assert_eq!(copy("1\t5\n2\t\\N\n").await.unwrap(), 2);
    assert_eq!(crate::support::rows(&c, "SELECT count(*) FROM chk").await.unwrap(), vec![vec!["2".to_string()]]);
    srv.shutdown().await.unwrap();
}
