//! The dashboard in a real browser: headless Chromium (Debian's `chromium`, which `.ci/run`
//! installs) loads the pages from a running server with a view, the view page draws the
//! operator graph with one node per operator and live numbers that follow the data, and
//! screenshots are saved under the test's output folder (`target/tmp/dashboard/`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::http::get_json;
use crate::support::{connect, eventually, server_with, temp_dir};

/// The Chromium binary: `EDDY_CHROMIUM`, else Debian's.
fn chromium() -> PathBuf {
    let path = std::env::var("EDDY_CHROMIUM").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from("/usr/bin/chromium"));
    assert!(path.exists(), "{} not found: the dashboard test needs Chromium (apt-get install chromium; .ci/run installs it)", path.display());
    path
}

/// Runs headless Chromium on `url` with `args` (after the page ran its scripts for a few
/// seconds of virtual time); its stdout.
async fn browse(url: &str, args: &[String]) -> String {
    let profile = temp_dir("chromium-profile");
    let mut cmd = std::process::Command::new(chromium());
    cmd.args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--virtual-time-budget=4000")
        .args(args)
        .arg(url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("Chromium runs");
    let pid = child.id();
    let waited = tokio::task::spawn_blocking(move || {
        let mut stdout = String::new();
        std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).map(|_| (child.wait(), stdout))
    });
    let (status, stdout) = match tokio::time::timeout(Duration::from_secs(120), waited).await {
        Ok(done) => done.unwrap().expect("Chromium's output"),
        Err(_) => {
            let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("Chromium did not finish within 2 minutes on {url}");
        }
    };
    let status = status.expect("Chromium exits");
    assert!(status.success(), "Chromium failed on {url}: {status:?}");
    stdout
}

/// The `data-rows-in` of graph node `id` in a dumped DOM.
fn rows_in(dom: &str, id: u64) -> u64 {
    let at = dom.find(&format!("data-node=\"{id}\"")).unwrap_or_else(|| panic!("node {id} is not drawn:\n{dom}"));
    let rest = &dom[at..];
    let v = rest.split("data-rows-in=\"").nth(1).and_then(|r| r.split('"').next()).expect("data-rows-in");
    v.parse().unwrap()
}

fn output_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn the_dashboard_draws_a_views_graph_with_live_numbers_in_a_real_browser() {
    let server = server_with(|c| c.http = Some("127.0.0.1:0".into())).await;
    let http = server.http_addr.unwrap();
    let c = connect(server.addr).await;
    c.batch_execute(
        "CREATE TABLE bids (id INT PRIMARY KEY, auction INT, price INT);
         CREATE TABLE auctions (id INT PRIMARY KEY, seller TEXT);
         INSERT INTO auctions SELECT i, 'seller' || i FROM generate_series(1, 10) AS s(i);
         INSERT INTO bids SELECT i, i % 10 + 1, i FROM generate_series(1, 500) AS s(i);
         CREATE MATERIALIZED VIEW top_sellers AS
           SELECT a.seller, count(*) AS bids, max(b.price) AS top FROM bids b JOIN auctions a ON b.auction = a.id GROUP BY a.seller;
         FLUSH;",
    )
    .await
    .unwrap();
    let view = get_json(http, "/api/views/top_sellers").await;
    let id = view["id"].as_u64().unwrap();
    let nodes = view["nodes"].as_array().unwrap().clone();
    let input = nodes.iter().find(|n| n["label"] == "Input public.bids").expect("the bids input")["id"].as_u64().unwrap();

    let url = format!("http://{http}/#/view/{id}");
    let first = browse(&url, &["--dump-dom".into()]).await;
    assert_eq!(first.matches("class=\"node ").count(), nodes.len(), "one drawn node per operator:\n{first}");
    for n in &nodes {
        let label = n["label"].as_str().unwrap();
        let shown = if label.len() > 40 { &label[..39] } else { label };
        assert!(first.contains(&shown.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")), "{label} is not shown:\n{first}");
    }
    assert_eq!(first.matches("class=\"edge\"").count(), nodes.len() - 1, "a tree: one edge per node but the root");
    assert!(first.contains("rows/s in"), "live rates are shown");
    let updates: u32 = first.split("data-updates=\"").nth(1).and_then(|r| r.split('"').next()).and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!(updates >= 2, "the page polls and redraws (updates={updates})");
    assert_eq!(rows_in(&first, input), 500);

    // More data: the numbers follow.
    c.batch_execute("INSERT INTO bids SELECT i, i % 10 + 1, i FROM generate_series(501, 800) AS s(i); FLUSH;").await.unwrap();
    eventually(Duration::from_secs(30), || async move {
        let v = get_json(http, &format!("/api/views/{id}")).await;
        v["nodes"].as_array().unwrap().iter().any(|n| n["id"] == input && n["rows_in"] == 800).then_some(())
    })
    .await;
    let dir = output_dir();
    let shot = dir.join("view.png");
    let _ = std::fs::remove_file(&shot);
    let second = browse(&url, &["--dump-dom".into()]).await;
    assert_eq!(rows_in(&second, input), 800, "the graph shows the new rows");
    browse(&url, &[format!("--screenshot={}", shot.display()), "--window-size=1400,1000".into()]).await;
    let png = std::fs::read(&shot).expect("a screenshot of the view page");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{} bytes", png.len());

    let copy = c.copy_in("COPY auctions FROM STDIN").await.unwrap();
    futures::pin_mut!(copy);
    futures::SinkExt::send(&mut copy, bytes::Bytes::from_static(b"11\tseller11\n12\tseller12\n")).await.unwrap();
    assert_eq!(copy.finish().await.unwrap(), 2);
    let overview = browse(&format!("http://{http}/#/"), &["--dump-dom".into()]).await;
    assert!(overview.contains("<td>public.auctions</td><td class=\"\">done</td>") && overview.contains("data-copy-rows=\"2\""), "the COPY is listed:\n{overview}");
    assert!(overview.contains(&format!("href=\"#/view/{id}\"")), "the overview links the view:\n{overview}");
    assert!(overview.contains("Commit latency") && overview.contains("operator caches"), "{overview}");
    browse(&format!("http://{http}/#/"), &[format!("--screenshot={}", dir.join("overview.png").display()), "--window-size=1400,1000".into()]).await;
    let storage = browse(&format!("http://{http}/#/storage"), &["--dump-dom".into()]).await;
    assert!(storage.contains("Object-store requests") && storage.contains("<td>put</td>"), "{storage}");
    server.shutdown().await.unwrap();
}
