//! A real PostgreSQL server for tests (the Postgres sink's target, the SQL fuzzer's oracle),
//! started in a temporary directory from the server binaries `.ci/run` installs.

use std::process::Command;

/// A PostgreSQL server in a temporary directory, stopped when dropped.
pub struct Postgres {
    bin: std::path::PathBuf,
    dir: std::path::PathBuf,
    pub port: u16,
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

    /// Starts one, or `None` (with a note naming `who` is skipped) where PostgreSQL's server
    /// binaries are missing; in CI they must be there.
    pub fn start(who: &str) -> Option<Postgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|d| {
            let mut v: Vec<_> = d.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).filter(|p| p.join("initdb").exists()).collect();
            v.sort();
            v.pop()
        });
        let Some(bin) = bin else {
            assert!(std::env::var("CI").is_err(), "PostgreSQL's server binaries are required in CI (.ci/run installs them)");
            eprintln!("skipping {who}: no PostgreSQL server binaries under /usr/lib/postgresql");
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

    pub async fn client(&self) -> tokio_postgres::Client {
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

