//! The JSON API the dashboard reads (`GET /api/...`). Every answer is built from the engine's
//! catalog and live counters; only `storage` does I/O (it lists the store's objects, within
//! [`LIST_TIMEOUT`]).
//!
//! - `overview`: version, uptime, committed epoch, relation counts, connections, commits,
//!   memory by component against the budget;
//! - `catalog`: every relation with its columns;
//! - `views`: each materialized view and sink with its status and totals;
//! - `views/<id or name>`: one view's operator graph with live counters per node;
//! - `epochs`: timings of the most recent committed epochs;
//! - `storage`: object-store requests/bytes/errors and the store's objects by directory;
//! - `progress`: running (and finished) backfills of materialized views with an ETA;
//! - `copies`: running (and the most recent finished) `COPY ... FROM STDIN` statements;
//! - `sources`: each view's source readers with rows read and the backlog upstream.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use eddy_sql::catalog::{RelationKind, TableCatalog};
use eddy_storage::RequestKind;
use eddy_stream::metrics::{now_ms, NodeSnapshot, ViewMetrics};
use hyper::StatusCode;
use serde_json::{json, Value};

use super::{HttpState, Reply};

/// The qualified name of relation `id`, or its id once it is gone (a dropped view's reader).
pub fn relation_name(catalog: &eddy_sql::catalog::Catalog, id: u32) -> String {
    catalog.by_id(id).map(|v| format!("{}.{}", v.schema, v.name)).unwrap_or_else(|| id.to_string())
}

/// Longest `storage` waits for the object listing.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// The reply to `GET /api/<rest>`, `None` if there is no such route.
pub async fn route(state: &HttpState, rest: &str) -> Option<Reply> {
    let rest = rest.trim_end_matches('/');
    let value = match rest {
        "overview" => overview(state),
        "catalog" => catalog(state),
        "views" => views(state),
        "epochs" => epochs(state),
        "storage" => storage(state).await,
        "progress" => json!(progress(state)),
        "copies" => json!(copies(state)),
        "sources" => json!(sources(state)),
        _ => match rest.strip_prefix("views/") {
            Some(which) => match view(state, which) {
                Some(v) => v,
                None => return Some(Reply::error(StatusCode::NOT_FOUND, "no such materialized view", rest)),
            },
            None => return None,
        },
    };
    Some(Reply::json(StatusCode::OK, &value))
}

/// Resident memory of this process in bytes (Linux; 0 elsewhere).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// Memory by component: (name, bytes used, limit; `None` where not tracked).
pub fn memory_components(store: &eddy_storage::StateStore) -> Vec<(&'static str, Option<u64>, u64)> {
    vec![
        ("operator_caches", Some(store.operator_memory().used() as u64), store.operator_memory().limit() as u64),
        ("write_buffers", Some(store.write_memory().used() as u64), store.write_memory().limit() as u64),
        ("block_cache", Some(store.block_cache_used()), store.block_cache_bytes()),
    ]
}

fn overview(state: &HttpState) -> Value {
    let catalog = state.engine.catalog();
    let count = |k: RelationKind| catalog.tables().filter(|t| t.kind == k).count();
    let commits = &state.engine.barrier.commits;
    let memory: Vec<Value> =
        memory_components(&state.engine.store).into_iter().map(|(name, used, limit)| json!({ "component": name, "used_bytes": used, "limit_bytes": limit })).collect();
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_secs": state.started.elapsed().as_secs_f64(),
        "now_ms": now_ms(),
        "committed_epoch": state.engine.store.committed_epoch().0,
        "relations": {
            "tables": count(RelationKind::Table),
            "materialized_views": count(RelationKind::MaterializedView),
            "views": count(RelationKind::View),
            "sources": count(RelationKind::Source),
            "sinks": count(RelationKind::Sink),
        },
        "connections": state.admission.connections(),
        "max_connections": state.admission.limits.max_connections,
        "commits": {
            "epochs": commits.epochs.load(Relaxed),
            "state_changes": commits.ops.load(Relaxed),
            "failures": commits.failures.load(Relaxed),
        },
        "rows_in": state.engine.all_view_metrics().iter().map(|(_, m)| m.rows_in()).sum::<u64>(),
        "memory": {
            "budget_bytes": state.memory_budget,
            "rss_bytes": rss_bytes(),
            "components": memory,
        },
    })
}

fn catalog(state: &HttpState) -> Value {
    let catalog = state.engine.catalog();
    let mut rels: Vec<_> = catalog.tables().filter(|t| !t.schema.starts_with("pg_") && t.schema != "information_schema").cloned().collect();
    rels.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
    Value::Array(
        rels.iter()
            .map(|t| {
                let columns: Vec<Value> =
                    t.columns.iter().filter(|c| !c.hidden).map(|c| json!({ "name": c.name, "type": c.ty.pg_name() })).collect();
                json!({
                    "id": t.id,
                    "schema": t.schema,
                    "name": t.name,
                    "kind": t.kind_name(),
                    "columns": columns,
                    "dependencies": t.dependencies,
                    "definition": t.definition,
                })
            })
            .collect(),
    )
}

/// Materialized views and sinks: the relations an actor maintains.
fn maintained(state: &HttpState) -> Vec<std::sync::Arc<TableCatalog>> {
    let catalog = state.engine.catalog();
    let mut v: Vec<_> = catalog.tables().filter(|t| matches!(t.kind, RelationKind::MaterializedView | RelationKind::Sink)).cloned().collect();
    v.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
    v
}

fn status(state: &HttpState, id: u32) -> (&'static str, Option<String>) {
    match state.engine.barrier.failure(id) {
        Some(e) => ("failed", Some(e.message)),
        None if state.engine.view_metrics(id).is_some() => ("running", None),
        None => ("stopped", None),
    }
}

fn view_summary(state: &HttpState, t: &TableCatalog) -> Value {
    let (status, failure) = status(state, t.id);
    let m = state.engine.view_metrics(t.id);
    let st = m.as_ref().map(|m| m.state()).unwrap_or_default();
    json!({
        "id": t.id,
        "schema": t.schema,
        "name": t.name,
        "kind": t.kind_name(),
        "status": status,
        "failure": failure,
        "rows_in": m.as_ref().map(|m| m.rows_in()),
        "rows_out": m.as_ref().map(|m| m.rows_out()),
        "epochs": m.as_ref().map(|m| m.epochs.load(Relaxed)),
        "state_entries": st.entries,
        "state_bytes": st.bytes,
        "operators": m.as_ref().map(|m| m.nodes.len()),
        "backfill": m.as_ref().map(|m| backfill(&format!("{}.{}", t.schema, t.name), m)),
    })
}

fn views(state: &HttpState) -> Value {
    Value::Array(maintained(state).iter().map(|t| view_summary(state, t)).collect())
}

/// The counters of one node as JSON.
pub fn node_json(s: &NodeSnapshot) -> Value {
    json!({
        "rows_in": s.rows_in,
        "rows_out": s.rows_out,
        "chunks_in": s.chunks_in,
        "busy_ms": s.busy_nanos as f64 / 1e6,
        "state": s.state.map(|c| json!({ "entries": c.entries, "bytes": c.bytes, "hits": c.hits, "misses": c.misses })),
        "cache_hit_ratio": s.hit_ratio(),
    })
}

fn view(state: &HttpState, which: &str) -> Option<Value> {
    let t = maintained(state).into_iter().find(|t| t.id.to_string() == which || t.name == which || format!("{}.{}", t.schema, t.name) == which)?;
    let catalog = state.engine.catalog();
    let mut summary = view_summary(state, &t);
    let nodes: Vec<Value> = state
        .engine
        .view_metrics(t.id)
        .map(|m| {
            m.nodes
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let relation = n.relation.and_then(|r| catalog.by_id(r)).map(|r| format!("{}.{}", r.schema, r.name));
                    let label = match (&relation, n.kind) {
                        (Some(r), eddy_stream::metrics::NodeKind::Input) => format!("Input {r}"),
                        _ => n.label.clone(),
                    };
                    let mut v = node_json(&n.stats.snapshot());
                    let o = v.as_object_mut().expect("node_json builds an object");
                    o.insert("id".into(), json!(i));
                    o.insert("kind".into(), json!(n.kind.name()));
                    o.insert("label".into(), json!(label));
                    o.insert("relation".into(), json!(relation));
                    o.insert("parent".into(), json!(n.parent));
                    o.insert("fragment".into(), json!(n.fragment));
                    v
                })
                .collect()
        })
        .unwrap_or_default();
    let o = summary.as_object_mut().expect("view_summary builds an object");
    o.insert("definition".into(), json!(t.definition));
    // Actors per fragment (1: the whole view in one actor).
    o.insert("parallelism".into(), json!(t.parallelism.max(1)));
    o.insert("nodes".into(), Value::Array(nodes));
    if let Some(m) = state.engine.view_metrics(t.id) {
        o.insert("backpressure_ms".into(), json!(m.output_wait_nanos.load(Relaxed) as f64 / 1e6));
        o.insert("barrier_ms".into(), json!(m.barrier_nanos.load(Relaxed) as f64 / 1e6));
    }
    Some(summary)
}

fn epochs(state: &HttpState) -> Value {
    let recent = state.engine.barrier.recent_epochs();
    let now = std::time::Instant::now();
    let skip = recent.len().saturating_sub(240);
    Value::Array(
        recent[skip..]
            .iter()
            .map(|e| {
                json!({
                    "epoch": e.epoch.0,
                    "state_changes": e.ops,
                    "barrier_ms": e.committed.duration_since(e.cut).as_secs_f64() * 1e3,
                    "commit_ms": e.committed.duration_since(e.collected).as_secs_f64() * 1e3,
                    "freshness_ms": e.committed.duration_since(e.opened).as_secs_f64() * 1e3,
                    "age_ms": now.duration_since(e.committed).as_secs_f64() * 1e3,
                })
            })
            .collect(),
    )
}

/// Object-store counters as JSON.
fn object_store_json(state: &HttpState) -> Value {
    let s = state.engine.store.object_store_stats();
    let mut requests = serde_json::Map::new();
    let mut errors = serde_json::Map::new();
    for k in RequestKind::ALL {
        requests.insert(k.name().into(), json!(s.requests(k)));
        errors.insert(k.name().into(), json!(s.errors(k)));
    }
    json!({
        "requests": requests,
        "errors": errors,
        "bytes_read": s.bytes_read.load(Relaxed),
        "bytes_written": s.bytes_written.load(Relaxed),
    })
}

/// SlateDB's gauges and counters of the LSM's shape and its block cache.
fn lsm(state: &HttpState) -> Value {
    const SHOWN: [&str; 8] = ["l0_sst_count", "sorted_run_count", "sst_count", "db_cache", "compact", "backpressure", "l0_stall", "memtable"];
    Value::Array(
        state
            .engine
            .store
            .lsm_metrics()
            .into_iter()
            .filter(|m| SHOWN.iter().any(|s| m.name.contains(s)))
            .map(|eddy_storage::LsmMetric { name, labels, counter, value }| {
                let labels: serde_json::Map<String, Value> = labels.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
                json!({ "name": name, "labels": labels, "kind": if counter { "counter" } else { "gauge" }, "value": value })
            })
            .collect(),
    )
}

async fn storage(state: &HttpState) -> Value {
    let usage = match tokio::time::timeout(LIST_TIMEOUT, state.engine.store.object_usage()).await {
        Ok(Ok(dirs)) => json!(dirs.into_iter().map(|(dir, objects, bytes)| json!({ "directory": dir, "objects": objects, "bytes": bytes })).collect::<Vec<_>>()),
        Ok(Err(e)) => json!({ "error": e.message }),
        Err(_) => json!({ "error": "listing the store's objects took too long" }),
    };
    json!({
        "location": state.engine.store.description(),
        "committed_epoch": state.engine.store.committed_epoch().0,
        "object_store": object_store_json(state),
        "objects": usage,
        "lsm": lsm(state),
    })
}

/// A view's backfill as JSON: rows done and total, rate, and an estimate of the time left.
pub fn backfill(name: &str, m: &ViewMetrics) -> Value {
    let r = m.backfill.report();
    json!({
        "view": name,
        "id": m.id,
        "state": r.state,
        "rows_done": r.rows_done,
        "rows_total": r.rows_total,
        "percent": r.percent,
        "rows_per_sec": r.rows_per_sec,
        "elapsed_secs": r.elapsed_secs,
        "eta_secs": r.eta_secs,
    })
}

/// Backfills that ran in this process (running first).
pub fn progress(state: &HttpState) -> Vec<Value> {
    let mut rows: Vec<(bool, Value)> = state
        .engine
        .all_view_metrics()
        .iter()
        .filter(|(_, m)| m.backfill.started_ms.load(Relaxed) > 0)
        .map(|(name, m)| (m.backfill.done.load(Relaxed), backfill(name, m)))
        .collect();
    rows.sort_by_key(|(done, _)| *done);
    rows.into_iter().map(|(_, v)| v).collect()
}

/// Running COPYs, then the most recent finished ones: rows and bytes so far and their rates
/// (a COPY's size is not known before its data ends).
pub fn copies(state: &HttpState) -> Vec<Value> {
    state
        .engine
        .copies
        .reports()
        .into_iter()
        .map(|r| {
            json!({
                "id": r.id,
                "table": r.table,
                "state": r.state,
                "rows": r.rows,
                "bytes": r.bytes,
                "elapsed_secs": r.elapsed_secs,
                "rows_per_sec": r.rows_per_sec,
                "bytes_per_sec": r.bytes_per_sec,
            })
        })
        .collect()
}

/// Each view's source readers: rows read, and the messages waiting upstream (Kafka's lag;
/// `null` for sources that cannot tell, such as generators).
pub fn sources(state: &HttpState) -> Vec<Value> {
    let catalog = state.engine.catalog();
    state
        .engine
        .source_readers()
        .into_iter()
        .map(|(id, r)| {
            let view = relation_name(&catalog, r.view);
            json!({ "reader": id, "source": r.source, "view": view, "rows": r.stats.rows.load(Relaxed), "backlog": r.stats.backlog() })
        })
        .collect()
}
