//! `bids`: issue 12's comparison, Eddy's side. 1M Nexmark-shaped bids as headerless CSV
//! (`auction,bidder,price,channel,url,date_time,extra`, `date_time` like `2023-11-14
//! 22:13:20.000`) COPYed in 100K-row statements into `bid` (no primary key) with one view
//! attached — none, pass-through, a `price * 0.908` projection, an `auction % 123 = 0` filter,
//! `GROUP BY auction` with count and max price — each on a fresh server. Prints events/s,
//! events per server CPU-second and the server's peak RSS per view. `--parallelism N` sets
//! `streaming_parallelism` for the view (0, the default: one actor per core).

use bytes::Bytes;

use super::{copy_into, Opts, Phase, Server};

/// The views compared, by name.
const VIEWS: &[(&str, Option<&str>)] = &[
    ("none", None),
    ("pass-through", Some("SELECT * FROM bid")),
    ("projection", Some("SELECT auction, bidder, price * 0.908 AS price, date_time FROM bid")),
    ("filter", Some("SELECT * FROM bid WHERE auction % 123 = 0")),
    ("group-by", Some("SELECT auction, count(*) AS n, max(price) AS top FROM bid GROUP BY auction")),
];

/// `n` bids as CSV lines, cut into one list of CopyData messages per `per_copy` rows. Hot
/// auctions and bidders as in Nexmark's generator (a few get most bids), one bid per 2 ms.
fn bids(n: usize, per_copy: usize) -> Vec<Vec<Bytes>> {
    use std::fmt::Write;
    let mut copies = Vec::new();
    let mut messages = Vec::new();
    let mut buf = String::with_capacity(1 << 16);
    let base = 1_700_000_000_000i64; // 2023-11-14 22:13:20.000
    for i in 0..n {
        let hot = i % 4 != 0;
        let auction = if hot { 1000 + (i % 100) } else { 1000 + (i * 7919) % 10_000 };
        let bidder = if hot { 2000 + (i % 50) } else { 2000 + (i * 104_729) % 100_000 };
        let price = 100 + (i * 7) % 99_900;
        let channel = ["Google", "Facebook", "Baidu", "Apple"][i % 4];
        let ms = base + 2 * i as i64;
        let t = chrono::DateTime::from_timestamp(ms / 1000, 0).expect("a valid time").naive_utc();
        let _ = writeln!(
            buf,
            "{auction},{bidder},{price},{channel},https://www.nexmark.com/{}/item.htm?query=1,{}.{:03},{}",
            i % 97,
            t.format("%Y-%m-%d %H:%M:%S"),
            ms % 1000,
            "x".repeat(8 + i % 16)
        );
        if buf.len() > 60_000 {
            messages.push(Bytes::from(std::mem::take(&mut buf)));
        }
        if (i + 1) % per_copy == 0 || i + 1 == n {
            if !buf.is_empty() {
                messages.push(Bytes::from(std::mem::take(&mut buf)));
            }
            copies.push(std::mem::take(&mut messages));
        }
    }
    copies
}

pub(super) async fn scenario_bids(o: &Opts) {
    let per_copy = o.copy_batches.map_or(100_000, |b| o.rows.div_ceil(b));
    println!("\n== bids: {} bids in COPYs of {per_copy} rows into bid, one view each (streaming_parallelism {}) ==", o.rows, o.parallelism);
    let copies = bids(o.rows, per_copy);
    let mut table = Vec::new();
    for (name, view) in VIEWS {
        if !o.views.is_empty() && !o.views.iter().any(|v| v == name) {
            continue;
        }
        println!("-- view {name}");
        let s = Server::start(&format!("bids-{name}"), o).await;
        let c = s.connect().await;
        c.batch_execute(
            "CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR)",
        )
        .await
        .unwrap();
        c.batch_execute(&format!("SET streaming_parallelism = {}", o.parallelism)).await.unwrap();
        if let Some(q) = view {
            c.batch_execute(&format!("CREATE MATERIALIZED VIEW v AS {q}")).await.unwrap();
        }
        let phase = Phase::begin(&s);
        let mut rows = 0;
        for data in &copies {
            rows += copy_into(&c, "COPY bid FROM STDIN WITH (FORMAT csv)", data.clone()).await;
        }
        let cpu = s.cpu_seconds() - phase.server_cpu0;
        let wall = phase.end(&s);
        let (hwm, _) = s.memory_mib();
        table.push((name, rows as f64 / wall, rows as f64 / cpu, hwm));
        s.stop();
    }
    println!("\n  view          events/s   events per server CPU-s   peak RSS");
    for (name, eps, per_cpu, hwm) in table {
        println!("  {name:<12} {eps:>10.0} {per_cpu:>14.0} {hwm:>14.0} MiB");
    }
}
