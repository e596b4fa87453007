//! `EXPLAIN ANALYZE MATERIALIZED VIEW name`: the running view's operator tree with each
//! operator's live counters (rows in and out, rows per second since the actor started, time
//! spent, state entries and bytes, cache hit ratio), read from the actor's metrics: nothing is
//! re-run. The same counters feed the HTTP API and `/metrics`.

use std::sync::atomic::Ordering::Relaxed;

use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};
use eddy_stream::metrics::{NodeKind, ViewMetrics};

use crate::frontend::session::Session;

impl Session {
    /// The lines of `EXPLAIN ANALYZE MATERIALIZED VIEW name`.
    pub(crate) fn explain_analyze_view(&self, name: &str) -> Result<Vec<String>> {
        let view = self.lookup_view(name)?;
        let metrics = self.engine.view_metrics(view.id).ok_or_else(|| match self.engine.barrier.failure(view.id) {
            Some(e) => user_err!(sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE, "materialized view \"{}\" is not running: it failed: {}", view.name, e.message),
            None => user_err!(sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE, "materialized view \"{}\" is not running", view.name),
        })?;
        let catalog = self.engine.catalog();
        let relation_name = |id: u32| catalog.by_id(id).map(|r| format!("{}.{}", r.schema, r.name)).unwrap_or_else(|| format!("relation {id}"));
        Ok(render(&format!("{}.{}", view.schema, view.name), &metrics, view.parallelism.max(1) as usize, &relation_name))
    }
}

/// The tree of `m`, root first, each child indented under the node it feeds. A view cut into
/// fragments (each of `parallelism` actors, their counters summed) labels every node with its
/// fragment, `[F<n>]`, as the dashboard draws it.
pub fn render(name: &str, m: &ViewMetrics, parallelism: usize, relation_name: &dyn Fn(u32) -> String) -> Vec<String> {
    let secs = m.created.elapsed().as_secs_f64().max(1e-3);
    let mut lines = vec![format!(
        "Materialized view {name}: {} epochs in {secs:.1} s, {:.1} ms in barriers, {:.1} ms waiting for downstream views (backpressure)",
        m.epochs.load(Relaxed),
        m.barrier_nanos.load(Relaxed) as f64 / 1e6,
        m.output_wait_nanos.load(Relaxed) as f64 / 1e6,
    )];
    let b = &m.backfill;
    if b.started_ms.load(Relaxed) > 0 {
        let total = b.rows_total.load(Relaxed);
        let state = if b.done.load(Relaxed) { "done" } else { "running" };
        let total = if total > 0 { format!(" of {total}") } else { String::new() };
        lines.push(format!("Backfill: {state}, {} rows read{total}", b.rows_done.load(Relaxed)));
    }
    let fragments = m.nodes.iter().map(|n| n.fragment + 1).max().unwrap_or(1);
    if fragments > 1 || parallelism > 1 {
        lines.push(format!(
            "Fragments: {fragments}, each run by {parallelism} actor{} (counters summed over them), joined by hash exchanges",
            if parallelism == 1 { "" } else { "s" }
        ));
    }
    let tag = fragments > 1 || parallelism > 1;
    let roots: Vec<usize> = (0..m.nodes.len()).filter(|i| m.nodes[*i].parent.is_none()).collect();
    for r in roots {
        walk(m, r, 0, secs, tag, relation_name, &mut lines);
    }
    lines
}

fn walk(m: &ViewMetrics, i: usize, depth: usize, secs: f64, tag: bool, relation_name: &dyn Fn(u32) -> String, lines: &mut Vec<String>) {
    let n = &m.nodes[i];
    let s = n.stats.snapshot();
    let label = match (n.kind, n.relation) {
        (NodeKind::Input, Some(r)) => format!("Input {}", relation_name(r)),
        _ => n.label.clone(),
    };
    let mut indent = if depth == 0 { String::new() } else { format!("{}-> ", "  ".repeat(depth)) };
    if tag {
        indent.push_str(&format!("[F{}] ", n.fragment));
    }
    let mut line = format!(
        "{indent}{label}  (rows in={} out={}, {:.0} rows/s in, busy={:.1} ms",
        s.rows_in,
        s.rows_out,
        s.rows_in as f64 / secs,
        s.busy_nanos as f64 / 1e6
    );
    if let Some(st) = s.state {
        line.push_str(&format!(", state entries={} bytes={}", st.entries, st.bytes));
        if let Some(h) = s.hit_ratio() {
            line.push_str(&format!(", cache hit ratio={:.1}%", h * 100.0));
        }
    }
    line.push(')');
    lines.push(line);
    for c in (0..m.nodes.len()).filter(|c| m.nodes[*c].parent == Some(i)) {
        walk(m, c, depth + 1, secs, tag, relation_name, lines);
    }
}
