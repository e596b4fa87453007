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
