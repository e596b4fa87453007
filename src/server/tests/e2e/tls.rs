//! TLS on the PostgreSQL port (issue 10 item 6): a server started with `--tls-cert`/`--tls-key`
//! (a self-signed certificate made with the `openssl` tool) serves psql, psycopg 3 and pgjdbc
//! connecting with `sslmode=require`, over an encrypted session (psycopg reports it); plain
//! connections still work; a server without them refuses `sslmode=require` clients.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{server, server_with, temp_dir};

/// A self-signed certificate and its key for `localhost`, or `None` (skipped outside CI) when
/// the `openssl` tool is missing.
fn self_signed(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output();
    match made {
        Ok(o) if o.status.success() => Some((cert, key)),
        other => {
            assert!(std::env::var("CI").is_err(), "openssl is required in CI: {other:?}");
            eprintln!("skipping TLS: no openssl ({other:?})");
            None
        }
    }
}

/// Runs `program args`; its stdout, or the failure with stderr.
fn run(program: &str, args: &[String]) -> Result<String, String> {
    let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string());
    if out.status.success() { Ok(stdout) } else { Err(format!("{stdout}{stderr}")) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_psycopg_and_pgjdbc_connect_with_sslmode_require() {
    let dir = temp_dir("tls");
    let Some((cert, key)) = self_signed(&dir) else { return };
    let tls = server_with(|c| {
        c.tls_cert = Some(cert.clone());
        c.tls_key = Some(key.clone());
    })
    .await;
    let plain = server("memory://").await;
    let conninfo = |port: u16, mode: &str| format!("host=127.0.0.1 port={port} user=root dbname=dev sslmode={mode}");
    let (tls_port, plain_port) = (tls.addr.port(), plain.addr.port());

    let outcome = tokio::task::spawn_blocking(move || {
        // psql: a statement over TLS; the same without TLS on the TLS server; refused by a
        // server without TLS.
        let psql = |info: String, sql: &str| run("psql", &[info, "-X".into(), "-A".into(), "-t".into(), "-c".into(), sql.into()]);
        assert_eq!(psql(conninfo(tls_port, "require"), "SELECT 40 + 2").map(|s| s.trim().to_string()), Ok("42".into()));
        assert_eq!(psql(conninfo(tls_port, "disable"), "SELECT 'plain'").map(|s| s.trim().to_string()), Ok("plain".into()));
        let refused = psql(conninfo(plain_port, "require"), "SELECT 1").expect_err("sslmode=require must fail without TLS");
        assert!(refused.contains("SSL"), "{refused}");

        // psycopg 3 reports the session as encrypted.
        let script = format!(
            "import psycopg\nwith psycopg.connect('{}') as c:\n    assert c.pgconn.ssl_in_use, 'not encrypted'\n    assert c.execute('SELECT 7').fetchone()[0] == 7\nprint('psycopg tls ok')",
            conninfo(tls_port, "require")
        );
        match run("python3", &["-c".into(), script]) {
            Ok(out) => assert!(out.contains("psycopg tls ok"), "{out}"),
            Err(e) if e.contains("No module named 'psycopg'") => {
                assert!(std::env::var("CI").is_err(), "psycopg is required in CI: {e}");
                eprintln!("skipping psycopg over TLS: {e}");
            }
            Err(e) => panic!("psycopg over TLS: {e}"),
        }

        // pgjdbc, with the server without TLS as the one that must refuse.
        let jar = std::env::var("EDDY_PGJDBC_JAR").unwrap_or_else(|_| "/usr/share/java/postgresql.jar".into());
        if Path::new(&jar).exists() {
            let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e_test/clients/jdbc/JdbcTls.java");
            let args = ["-cp".to_string(), jar, source.display().to_string(), "127.0.0.1".into(), tls_port.to_string(), plain_port.to_string()];
            match run("java", &args) {
                Ok(out) => assert!(out.contains("jdbc tls ok"), "{out}"),
                Err(e) => panic!("pgjdbc over TLS: {e}"),
            }
        } else {
            assert!(std::env::var("CI").is_err(), "pgjdbc is required in CI ({jar})");
            eprintln!("skipping pgjdbc over TLS: no {jar}");
        }
    })
    .await;
    tls.shutdown().await.unwrap();
    plain.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
    outcome.unwrap();
}
