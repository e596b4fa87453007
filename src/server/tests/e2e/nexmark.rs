//! Nexmark (`sql/nexmark/`): every query is created as a view over small generated `person`,
//! `auction` and `bid` tables, and each view equals batch recomputation (VERIFY) after the
//! initial load, after updates and deletes on all three tables, and after a restart.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::Client;

use crate::support::{connect, rows, server, temp_dir, verify};

fn nexmark_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sql/nexmark")
}

/// The query files with the view each creates, in query order (q0, q1, ..., q22).
fn queries() -> Vec<(String, String)> {
    let mut out: Vec<(u32, String, String)> = std::fs::read_dir(nexmark_dir())
        .expect("sql/nexmark exists")
        .filter_map(|e| {
            let path = e.ok()?.path();
            let n: u32 = path.file_name()?.to_str()?.strip_prefix('q')?.strip_suffix(".sql")?.parse().ok()?;
            let sql = std::fs::read_to_string(&path).ok()?;
            let view = sql.split("CREATE MATERIALIZED VIEW ").nth(1)?.split_whitespace().next()?.to_string();
            Some((n, view, sql))
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, v, s)| (v, s)).collect()
}

const STATES: [&str; 5] = ["or", "id", "ca", "wa", "ny"];
const CHANNELS: [&str; 5] = ["apple", "Google", "facebook", "baidu", "partner"];

/// `n` bids starting at bid number `first`: prices are distinct (so top-N has no ties) and
/// times advance 700 ms per bid from just before midnight (so days change).
fn bids(rng: &mut StdRng, first: u32, n: u32) -> String {
    let values: Vec<String> = (first..first + n)
        .map(|i| {
            let auction = 1000 + rng.gen_range(0..40);
            let bidder = 1000 + rng.gen_range(0..30);
            let price = 100 + (u64::from(i) * 7919) % 2_000_000;
            let channel = CHANNELS[rng.gen_range(0..CHANNELS.len())];
            let url = if rng.gen_bool(0.5) {
                format!("https://shop.example/d{}/e{}/f{}?channel_id={}&x=1", i % 3, i % 5, i % 7, rng.gen_range(0..9))
            } else {
                format!("https://shop.example/d{}/e{}", i % 3, i % 4)
            };
            format!(
                "({auction}, {bidder}, {price}, '{channel}', '{url}', TIMESTAMP '2024-01-01 23:58:00' + INTERVAL '{} milliseconds', 'b{i}')",
                u64::from(i) * 700
            )
        })
        .collect();
    format!("INSERT INTO bid VALUES {}", values.join(", "))
}

async fn load(c: &Client, rng: &mut StdRng) {
    let people: Vec<String> = (0..30)
        .map(|i| {
            format!(
                "({}, 'p{i}', 'p{i}@mail.example', '4000 {i:04}', 'city{}', '{}', TIMESTAMP '2024-01-01 23:58:00' + INTERVAL '{} seconds', 'x')",
                1000 + i,
                i % 4,
                STATES[rng.gen_range(0..STATES.len())],
                rng.gen_range(0..120)
            )
        })
        .collect();
    let auctions: Vec<String> = (0..40)
        .map(|i| {
            let start = rng.gen_range(0..150);
            format!(
                "({}, 'item{i}', 'desc{i}', {}, {}, TIMESTAMP '2024-01-01 23:58:00' + INTERVAL '{start} seconds', TIMESTAMP '2024-01-01 23:58:00' + INTERVAL '{} seconds', {}, {}, 'y')",
                1000 + i,
                rng.gen_range(1..100),
                rng.gen_range(100..1000),
                start + rng.gen_range(5..90),
                1000 + rng.gen_range(0..30),
                10 + rng.gen_range(0..3)
            )
        })
        .collect();
    let side: Vec<String> = (0..20).map(|i| format!("({}, 'side{i}')", 1000 + 2 * i)).collect();
    c.batch_execute(&format!(
        "INSERT INTO person VALUES {}; INSERT INTO auction VALUES {}; INSERT INTO side_input VALUES {}; {}",
        people.join(", "),
        auctions.join(", "),
        side.join(", "),
        bids(rng, 0, 300)
    ))
    .await
    .unwrap();
}

async fn churn(c: &Client, rng: &mut StdRng, first_bid: u32) {
    let statements = [
        format!("UPDATE bid SET price = price + 1000000 WHERE auction = {}", 1000 + rng.gen_range(0..40)),
        format!("DELETE FROM bid WHERE bidder = {}", 1000 + rng.gen_range(0..30)),
        format!("UPDATE auction SET category = 10 WHERE id % 3 = {}", rng.gen_range(0..3)),
        format!("UPDATE auction SET expires = expires + INTERVAL '30 seconds' WHERE seller = {}", 1000 + rng.gen_range(0..30)),
        format!("DELETE FROM person WHERE id = {}", 1000 + rng.gen_range(0..30)),
        format!("UPDATE person SET state = 'ca' WHERE id % 5 = {}", rng.gen_range(0..5)),
        format!("DELETE FROM auction WHERE id = {}", 1000 + rng.gen_range(0..40)),
        format!("UPDATE side_input SET value = 'changed' WHERE key = {}", 1000 + 2 * rng.gen_range(0..20)),
        bids(rng, first_bid, 60),
    ];
    for s in statements {
        c.batch_execute(&s).await.unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

async fn verify_all(c: &Client, views: &[(String, String)], when: &str) {
    let mut failures = Vec::new();
    for (v, _) in views {
        if let Err(d) = verify(c, v).await {
            failures.push(d);
        }
    }
    assert!(failures.is_empty(), "{when}: {}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_nexmark_query_equals_batch_recomputation_through_changes_and_a_restart() {
    let views = queries();
    assert!(views.len() >= 20, "expected the Nexmark queries in {}", nexmark_dir().display());
    let dir = temp_dir("nexmark");
    let url = format!("file://{}", dir.display());
    let mut rng = StdRng::seed_from_u64(42);
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    c.batch_execute(&std::fs::read_to_string(nexmark_dir().join("ddl.sql")).unwrap()).await.unwrap();
    for (v, sql) in &views {
        c.batch_execute(sql).await.unwrap_or_else(|e| panic!("creating {v}: {e}"));
    }
    load(&c, &mut rng).await;
    verify_all(&c, &views, "after the load").await;
    // Every view has rows: the data exercises each query.
    for (v, _) in &views {
        let n = rows(&c, &format!("SELECT count(*) FROM {v}")).await.unwrap();
        assert_ne!(n, vec![vec!["0".to_string()]], "{v} is empty after the load");
    }
    churn(&c, &mut rng, 300).await;
    verify_all(&c, &views, "after updates and deletes").await;
    drop(c);
    srv.shutdown().await.unwrap();
    let srv = server(&url).await;
    let c = connect(srv.addr).await;
    verify_all(&c, &views, "after a restart").await;
    churn(&c, &mut rng, 360).await;
    verify_all(&c, &views, "after changes following the restart").await;
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
