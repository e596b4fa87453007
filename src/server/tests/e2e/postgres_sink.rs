//! The Postgres sink (issue 15) against a real PostgreSQL server started by the test: a view's
//! changes upserted into a PostgreSQL table, through updates, deletes and a SIGKILL of Eddy;
//! afterwards the PostgreSQL table equals the view. PostgreSQL's server binaries are required
//! under CI (`.ci/run` installs them) and the test is skipped without them otherwise.

use std::process::Command;
use std::time::Duration;

use crate::support::{connect, eventually, rows, spawn_eddy, sqlstate, temp_dir};

const DEADLINE: Duration = Duration::from_secs(120);

/// A PostgreSQL server in a temporary directory, stopped when dropped.
struct Postgres {
    bin: std::path::PathBuf,
    dir: std::path::PathBuf,
    port: u16,
    as_postgres: bool,
}

impl Postgres {
    fn run(&self, tool: &str, args: &[String]) -> bool {
        let exe = self.bin.join(tool).display().to_string();
        let status = if self.as_postgres {
            let line = std::iter::once(exe).chain(args.iter().map(|a| format!("'{a}'"))).collect::<Vec<_>>().join(" ");
            Command::new("su").args(["postgres", "-c", &line]).stdout(std::process::Stdio::null()).status()
        } else {
            Command::new(exe).args(args).stdout(std::process::Stdio::null()).status()
        };
        status.map(|s| s.success()).unwrap_or(false)
    }

    fn start() -> Option<Postgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|d| {
            let mut v: Vec<_> = d.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).filter(|p| p.join("initdb").exists()).collect();
            v.sort();
            v.pop()
        });
        let Some(bin) = bin else {
            assert!(std::env::var("CI").is_err(), "PostgreSQL's server binaries are required in CI (.ci/run installs them)");
            eprintln!("skipping postgres sink test: no PostgreSQL server binaries under /usr/lib/postgresql");
            return None;
        };
        let root = Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false);
        let dir = std::env::temp_dir().join(format!("eddy-pg-{}-{}", std::process::id(), rand_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        if root {
            assert!(Command::new("chown").args(["-R", "postgres", &dir.display().to_string()]).status().unwrap().success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let pg = Postgres { bin, dir: dir.clone(), port, as_postgres: root };
        let data = dir.join("data").display().to_string();
        assert!(pg.run("initdb", &["-D".into(), data.clone(), "-U".into(), "postgres".into(), "--auth=trust".into()]), "initdb");
        let opts = format!("-p {port} -k {} -c listen_addresses=127.0.0.1", dir.display());
        assert!(pg.run("pg_ctl", &["-D".into(), data, "-o".into(), opts, "-w".into(), "-l".into(), dir.join("log").display().to_string(), "start".into()]), "pg_ctl start");
        Some(pg)
    }

    async fn client(&self) -> tokio_postgres::Client {
        let (c, conn) = tokio_postgres::connect(&format!("host=127.0.0.1 port={} user=postgres dbname=postgres", self.port), tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        c
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data").display().to_string();
        self.run("pg_ctl", &["-D".into(), data, "-m".into(), "immediate".into(), "stop".into()]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos() as u64).unwrap_or(0)
}

async fn pg_rows(pg: &tokio_postgres::Client) -> Vec<(i64, i64, i64)> {
    pg.query("SELECT g, n, s FROM per_g_copy ORDER BY g", &[]).await.unwrap().iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect()
}

async fn eddy_rows(c: &tokio_postgres::Client) -> Vec<(i64, i64, i64)> {
    rows(c, "SELECT g, n, s FROM per_g ORDER BY g").await.unwrap().iter().map(|r| (r[0].parse().unwrap(), r[1].parse().unwrap(), r[2].parse().unwrap())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sink_keeps_a_real_postgres_table_equal_to_the_view_across_sigkill() {
    let Some(pg) = Postgres::start() else { return };
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
