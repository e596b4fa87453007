//! A top-N view (`ORDER BY ... LIMIT n OFFSET m`) keeps only the head of its order in memory:
//! its state rows are stored in order, and deletes that eat into the head refill it from the
//! store (also across a restart, when only the head is read back).

use std::collections::BTreeMap;

use crate::http::get_json;
use crate::support::*;

/// The view's rows as `(k, v)`, in the view's order.
async fn top(c: &tokio_postgres::Client) -> Vec<(i32, i32)> {
    let rows = c.query("SELECT k, v FROM tn_top ORDER BY v DESC, k", &[]).await.unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// What the view should hold: rows 3 to 7 by `v DESC, k`.
fn expected(model: &BTreeMap<i32, i32>) -> Vec<(i32, i32)> {
    let mut all: Vec<(i32, i32)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    all.into_iter().skip(2).take(5).collect()
}

/// Bytes the view's TopN operator holds in memory (as of its last barrier).
async fn cached_bytes(http: std::net::SocketAddr) -> u64 {
    let view = get_json(http, "/api/views/public.tn_top").await;
    let node = view["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["label"].as_str().unwrap_or_default().starts_with("TopN"))
        .unwrap_or_else(|| panic!("no TopN node in {view}"));
    node["state"]["bytes"].as_u64().unwrap_or_else(|| panic!("no state bytes in {node}"))
}

/// A server on the state at `url`, with its HTTP address and a client.
async fn start(url: &str) -> (eddy_server::ServerHandle, std::net::SocketAddr, tokio_postgres::Client) {
    let srv = server_with(|c| {
        c.state_store = url.to_string();
        c.http = Some("127.0.0.1:0".into());
    })
    .await;
    let http = srv.http_addr.expect("the HTTP server runs");
    let c = connect(srv.addr).await;
    (srv, http, c)
}

async fn check(c: &tokio_postgres::Client, model: &BTreeMap<i32, i32>, what: &str) {
    assert_eq!(top(c).await, expected(model), "{what}");
    verify(c, "tn_top").await.unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Deletes the `n` rows at the head of the order (in one statement).
async fn delete_head(c: &tokio_postgres::Client, model: &mut BTreeMap<i32, i32>, n: usize) {
    let mut all: Vec<(i32, i32)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let keys: Vec<String> = all.iter().take(n).map(|(k, _)| k.to_string()).collect();
    c.batch_execute(&format!("DELETE FROM tn WHERE k IN ({})", keys.join(","))).await.unwrap();
    for (k, _) in all.iter().take(n) {
        model.remove(k);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_top_n_view_caches_only_the_head_of_its_order_and_refills_it_from_the_store() {
    let dir = temp_dir("top_n");
    let url = format!("file://{}", dir.display());
    let mut model: BTreeMap<i32, i32> = (1..=20_000).map(|k| (k, (k * 7919) % 10_007)).collect();
    {
        let (_srv, http, c) = start(&url).await;
        c.batch_execute(
            "CREATE TABLE tn (k INT PRIMARY KEY, v INT); \
             INSERT INTO tn SELECT k, (k * 7919) % 10007 FROM generate_series(1, 20000) AS t(k); \
             CREATE MATERIALIZED VIEW tn_top AS SELECT k, v FROM tn ORDER BY v DESC, k LIMIT 5 OFFSET 2",
        )
        .await
        .unwrap();
        check(&c, &model, "after the backfill").await;
        // 20,000 rows in, a small head cached (the cache keeps 64 rows, trimmed at 128: under
        // 150 bytes each; all rows would take 2 MB).
        let bytes = cached_bytes(http).await;
        assert!(bytes <= 128 * 150, "the top-N operator caches {bytes} bytes");

        // Deletes at the head: single rows, then more than the cache holds in one statement.
        for round in 0..10 {
            delete_head(&c, &mut model, 1).await;
            check(&c, &model, &format!("single delete {round}")).await;
        }
        delete_head(&c, &mut model, 150).await;
        check(&c, &model, "150 deleted at once").await;
        delete_head(&c, &mut model, 3).await;
        check(&c, &model, "3 more").await;
        // Inserts into the head and far past it, updates moving rows in and out.
        c.batch_execute("INSERT INTO tn VALUES (30001, 20000), (30002, 1), (30003, 9990); UPDATE tn SET v = v + 5000 WHERE k % 1000 = 0")
            .await
            .unwrap();
        model.extend([(30001, 20000), (30002, 1), (30003, 9990)]);
        for (k, v) in model.iter_mut() {
            if k % 1000 == 0 {
                *v += 5000;
            }
        }
        check(&c, &model, "inserts and updates").await;
        let bytes = cached_bytes(http).await;
        assert!(bytes <= 128 * 150, "the top-N operator caches {bytes} bytes");
        // Many statements, each in its own epoch: moves in the head, deletes past it.
        for round in 0..20 {
            let k = *model.keys().nth(round * 37).unwrap();
            c.batch_execute(&format!("UPDATE tn SET v = 20000 + {round} WHERE k = {k}; DELETE FROM tn WHERE k = {}", k + 1)).await.unwrap();
            model.insert(k, 20000 + round as i32);
            model.remove(&(k + 1));
        }
        check(&c, &model, "updates into the head").await;
        // One epoch that writes past the head, then deletes through the head into those rows
        // (the refill reads the store and must see the epoch's own writes and deletes).
        c.batch_execute(
            "BEGIN; INSERT INTO tn SELECT k, 15000 + k % 50 FROM generate_series(40001, 40300) AS t(k); \
             DELETE FROM tn WHERE v >= 15000 AND k % 3 = 0; DELETE FROM tn WHERE v >= 15030; DELETE FROM tn WHERE v >= 20000; \
             COMMIT",
        )
        .await
        .unwrap();
        model.extend((40001..=40300).map(|k| (k, 15000 + k % 50)));
        model.retain(|k, v| !(*v >= 15000 && k % 3 == 0) && *v < 15030);
        assert!(expected(&model).iter().all(|(k, _)| *k > 40000), "the new rows lead: {:?}", expected(&model));
        check(&c, &model, "a transaction writing past the head and deleting into it").await;
    }
    // After a restart only the head is read back; deletes then refill it from the store.
    let (_srv, http, c) = start(&url).await;
    check(&c, &model, "after the restart").await;
    delete_head(&c, &mut model, 100).await;
    check(&c, &model, "100 deleted after the restart").await;
    let bytes = cached_bytes(http).await;
    assert!(bytes <= 256 * 150, "the top-N operator caches {bytes} bytes after the restart");
    for _ in 0..5 {
        delete_head(&c, &mut model, 40).await;
        check(&c, &model, "40 deleted").await;
    }
    c.batch_execute("DELETE FROM tn WHERE v > 100").await.unwrap();
    model.retain(|_, v| *v <= 100);
    check(&c, &model, "all but the lowest deleted").await;
    c.batch_execute("DELETE FROM tn WHERE k % 2 = 0").await.unwrap();
    model.retain(|k, _| k % 2 != 0);
    check(&c, &model, "half of the rest deleted").await;
}
