//! One writer per state store (issue 11 item 6), with real `eddy` processes: a second server on
//! the same local directory refuses to start and names the first; a second server on the same
//! S3 prefix (a real S3 server process) fences the first, which stops acknowledging writes and
//! exits, while the second serves every row the first acknowledged. Never both writing.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{connect, create_bucket, s3_env, spawn_eddy, spawn_eddy_env, start_s3_server, temp_dir};

/// Runs `eddy` on `state` and waits (up to a minute) for it to exit; returns its exit success
/// and stderr. A server that starts and keeps running fails the test.
fn run_to_exit(state: &str) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["--listen", "127.0.0.1:0", "--http", "off", "--state-store", state])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("eddy starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            use std::io::Read;
            child.stderr.take().expect("stderr").read_to_string(&mut err).expect("stderr text");
            return (status.success(), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a second server on the same state directory kept running");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_the_same_local_directory_refuses_to_start() {
    let dir = temp_dir("fence-local");
    let url = format!("file://{}", dir.display());
    let (first, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    c.batch_execute("CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1)").await.unwrap();
    let (ok, err) = run_to_exit(&url);
    assert!(!ok, "the second server exited successfully");
    assert!(err.contains("is in use by another eddy process"), "unclear refusal: {err}");
    assert!(err.contains(&format!("pid {}", first.0.id())), "the refusal does not name the first server: {err}");
    // The first one goes on as if nothing happened.
    c.batch_execute("INSERT INTO t VALUES (2)").await.unwrap();
    let n: i64 = c.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
    drop(c);
    // Once it is gone (SIGKILL included: the kernel drops the lock), a new server starts.
    drop(first);
    let (_second, addr) = spawn_eddy(&url);
    let c = connect(addr).await;
    let n: i64 = c.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_the_same_s3_prefix_fences_the_first() {
    let Some((_s3, port)) = start_s3_server() else { return };
    create_bucket(port, "fence").await;
    let env = s3_env(port);
    let url = "s3://fence/state";
    let (mut first, addr1) = spawn_eddy_env(url, &env);
    let c1 = connect(addr1).await;
    c1.batch_execute("CREATE TABLE t (id INT PRIMARY KEY); CREATE MATERIALIZED VIEW n AS SELECT count(*) AS n FROM t").await.unwrap();
    for i in 0..10i32 {
        c1.execute("INSERT INTO t VALUES ($1)", &[&i]).await.unwrap();
    }
    let (_second, addr2) = spawn_eddy_env(url, &env);
    let c2 = connect(addr2).await;
    // The first server acknowledges nothing more: its next commit finds it was fenced.
    let mut acknowledged_after = Vec::new();
    for i in 100..110i32 {
        match c1.execute("INSERT INTO t VALUES ($1)", &[&i]).await {
            Ok(_) => acknowledged_after.push(i),
            Err(_) => break,
        }
    }
    assert!(acknowledged_after.len() < 10, "the fenced server kept acknowledging writes");
    // ... and exits.
    let deadline = Instant::now() + Duration::from_secs(60);
    while first.0.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the fenced server is still running");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The second server has every row the first acknowledged, and writes on.
    c2.execute("INSERT INTO t VALUES (1000)", &[]).await.unwrap();
    let ids: Vec<i32> = c2.query("SELECT id FROM t ORDER BY id", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let mut expected: Vec<i32> = (0..10).chain(acknowledged_after.iter().copied()).collect();
    expected.push(1000);
    assert_eq!(ids, expected);
    let n: i64 = c2.query_one("SELECT n FROM n", &[]).await.unwrap().get(0);
    assert_eq!(n, expected.len() as i64);
}
