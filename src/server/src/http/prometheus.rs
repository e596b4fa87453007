//! `GET /metrics`: every metric in the OpenMetrics text format (which Prometheus scrapes),
//! encoded by the `prometheus-client` crate from the engine's live counters at each scrape
//! (a [`Collector`]), so nothing is registered or kept up to date between scrapes.
//!
//! Families (counters get `_total`): per operator `eddy_operator_rows_in|rows_out|busy_seconds`,
//! `eddy_operator_state_entries|state_bytes`, `eddy_operator_cache_hits|cache_misses`
//! (labels `view`, `node`, `operator`); per view `eddy_view_rows_in|rows_out`,
//! `eddy_view_backpressure_seconds`, `eddy_view_failed`, `eddy_backfill_rows_done|rows_total`;
//! `eddy_barrier_latency_seconds` and `eddy_commit_latency_seconds` histograms,
//! `eddy_committed_epoch`, `eddy_epochs_committed`, `eddy_state_changes_committed`,
//! `eddy_commit_failures`, `eddy_freshness_seconds`; `eddy_object_store_requests|errors`
//! (label `op`), `eddy_object_store_read_bytes|written_bytes`; `eddy_cache_hits|misses` and
//! `eddy_cache_bytes` per `layer`; `eddy_memory_used_bytes|limit_bytes` per `component`,
//! `eddy_memory_budget_bytes`, `eddy_process_resident_memory_bytes`; `eddy_connections`,
//! `eddy_query_duration_seconds`, `eddy_query_errors`; `eddy_source_rows` and `eddy_source_backlog` per source reader;
//! `eddy_sink_delivered|pending` per sink.

use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use eddy_sql::Engine;
use eddy_storage::RequestKind;
use eddy_stream::metrics::Histogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::api::{memory_components, relation_name, rss_bytes};
use super::HttpState;
use crate::limits::Admission;

type Labels = Vec<(String, String)>;

/// The metrics text of the server behind `state`.
pub fn render(state: &HttpState) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(EddyCollector {
        engine: state.engine.clone(),
        admission: state.admission.clone(),
        memory_budget: state.memory_budget,
    }));
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
        tracing::warn!("cannot encode metrics: {e}");
    }
    out
}

struct EddyCollector {
    engine: Arc<Engine>,
    admission: Arc<Admission>,
    memory_budget: u64,
}

impl fmt::Debug for EddyCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EddyCollector")
    }
}

/// One sample's value.
#[derive(Clone, Copy)]
enum Value {
    Counter(f64),
    Gauge(f64),
}

/// A family with one sample per label set.
struct Family {
    name: String,
    help: String,
    samples: Vec<(Labels, Value)>,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

impl Family {
    fn metric_type(&self) -> MetricType {
        match self.samples.first() {
            Some((_, Value::Counter(_))) => MetricType::Counter,
            _ => MetricType::Gauge,
        }
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let mut m = encoder.encode_descriptor(&self.name, &self.help, None, self.metric_type())?;
        for (l, v) in &self.samples {
            // An unlabelled sample prints without `{}`.
            if l.is_empty() {
                v.encode(&mut m)?;
            } else {
                v.encode(&mut m.encode_family(l)?)?;
            }
        }
        Ok(())
    }
}

impl Value {
    fn encode(&self, m: &mut MetricEncoder) -> fmt::Result {
        match self {
            Value::Counter(c) => m.encode_counter::<Labels, f64, f64>(c, None),
            Value::Gauge(g) => m.encode_gauge(g),
        }
    }
}

/// A [`Histogram`] as an encodable metric.
struct Hist<'a>(&'a Histogram);

impl fmt::Debug for Hist<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hist")
    }
}

impl EncodeMetric for Hist<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        let (sum, count, mut buckets) = self.0.buckets();
        // The encoder sums the buckets and prints `f64::MAX` as +Inf.
        for (bound, _) in &mut buckets {
            if bound.is_infinite() {
                *bound = f64::MAX;
            }
        }
        encoder.encode_histogram::<Labels>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn histogram(encoder: &mut DescriptorEncoder, name: &str, help: &str, h: &Histogram) -> fmt::Result {
    let m = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    Hist(h).encode(m)
}

impl Collector for EddyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        for f in self.families() {
            if !f.samples.is_empty() {
                f.encode(&mut encoder)?;
            }
        }
        let commits = &self.engine.barrier.commits;
        histogram(&mut encoder, "eddy_barrier_latency_seconds", "Time from cutting a barrier to its epoch's durable commit.", &commits.barrier_latency)?;
        histogram(&mut encoder, "eddy_commit_latency_seconds", "Time from the last actor's report to the durable commit.", &commits.commit_latency)?;
        histogram(&mut encoder, "eddy_query_duration_seconds", "Time to run a statement (until its result is ready).", &self.engine.statements.durations)?;
        Ok(())
    }
}

impl EddyCollector {
    fn families(&self) -> Vec<Family> {
        let e = &self.engine;
        let catalog = e.catalog();
        let counter = |v: u64| Value::Counter(v as f64);
        let gauge = |v: u64| Value::Gauge(v as f64);
        let fam = |name: &str, help: &str| Family { name: name.into(), help: help.into(), samples: Vec::new() };
        let mut op_in = fam("eddy_operator_rows_in", "Changes an operator received.");
        let mut op_out = fam("eddy_operator_rows_out", "Changes an operator emitted.");
        let mut op_busy = fam("eddy_operator_busy_seconds", "Time spent in an operator.");
        let mut op_entries = fam("eddy_operator_state_entries", "Entries in an operator's state cache at the last barrier.");
        let mut op_bytes = fam("eddy_operator_state_bytes", "Bytes of an operator's state cache at the last barrier.");
        let mut op_hits = fam("eddy_operator_cache_hits", "State lookups an operator's cache answered.");
        let mut op_misses = fam("eddy_operator_cache_misses", "State lookups that read the store.");
        let mut v_in = fam("eddy_view_rows_in", "Changes a view read from its inputs.");
        let mut v_out = fam("eddy_view_rows_out", "Changes a view emitted.");
        let mut v_bp = fam("eddy_view_backpressure_seconds", "Time a view waited for the views on it to take its output.");
        let mut v_failed = fam("eddy_view_failed", "1 if the view failed (an internal fault), else 0.");
        let mut bf_done = fam("eddy_backfill_rows_done", "Upstream rows a view's backfill has read.");
        let mut bf_total = fam("eddy_backfill_rows_total", "Upstream rows a view's backfill reads (0 until counted).");
        let (mut hits, mut misses, mut cache_bytes) = (0, 0, 0);
        for (name, m) in e.all_view_metrics() {
            let view = [("view", name.as_str())];
            for (i, n) in m.nodes.iter().enumerate() {
                let node = i.to_string();
                let l = labels(&[("view", &name), ("node", &node), ("operator", n.label.split_whitespace().next().unwrap_or_default())]);
                let s = n.stats.snapshot();
                op_in.samples.push((l.clone(), counter(s.rows_in)));
                op_out.samples.push((l.clone(), counter(s.rows_out)));
                op_busy.samples.push((l.clone(), Value::Counter(s.busy_nanos as f64 / 1e9)));
                if let Some(st) = s.state {
                    op_entries.samples.push((l.clone(), gauge(st.entries)));
                    op_bytes.samples.push((l.clone(), gauge(st.bytes)));
                    op_hits.samples.push((l.clone(), counter(st.hits)));
                    op_misses.samples.push((l, counter(st.misses)));
                    hits += st.hits;
                    misses += st.misses;
                    cache_bytes += st.bytes;
                }
            }
            v_in.samples.push((labels(&view), counter(m.rows_in())));
            v_out.samples.push((labels(&view), counter(m.rows_out())));
            v_bp.samples.push((labels(&view), Value::Counter(m.output_wait_nanos.load(Relaxed) as f64 / 1e9)));
            v_failed.samples.push((labels(&view), gauge(u64::from(e.barrier.failure(m.id).is_some()))));
            if m.backfill.started_ms.load(Relaxed) > 0 {
                bf_done.samples.push((labels(&view), gauge(m.backfill.rows_done.load(Relaxed))));
                bf_total.samples.push((labels(&view), gauge(m.backfill.rows_total.load(Relaxed))));
            }
        }
        let commits = &e.barrier.commits;
        let one = |name: &str, help: &str, v| Family { name: name.into(), help: help.into(), samples: vec![(Labels::new(), v)] };
        let freshness = e.barrier.recent_epochs().last().map(|s| s.committed.duration_since(s.opened).as_secs_f64()).unwrap_or(0.0);
        let os = e.store.object_store_stats();
        let mut os_req = fam("eddy_object_store_requests", "Object-store requests by kind.");
        let mut os_err = fam("eddy_object_store_errors", "Object-store requests that failed, by kind.");
        for k in RequestKind::ALL {
            os_req.samples.push((labels(&[("op", k.name())]), counter(os.requests(k))));
            os_err.samples.push((labels(&[("op", k.name())]), counter(os.errors(k))));
        }
        let mut mem_used = fam("eddy_memory_used_bytes", "Memory held by a component of the state layers.");
        let mut mem_limit = fam("eddy_memory_limit_bytes", "The share of the memory budget a component may hold.");
        for (c, used, limit) in memory_components(&e.store) {
            if let Some(u) = used {
                mem_used.samples.push((labels(&[("component", c)]), gauge(u)));
            }
            mem_limit.samples.push((labels(&[("component", c)]), gauge(limit)));
        }
        let mut src = fam("eddy_source_rows", "Rows a source reader emitted.");
        let mut lag = fam("eddy_source_backlog", "Messages waiting upstream that a source reader has not read (Kafka: high watermark minus next offset, summed over partitions).");
        for (id, r) in e.source_readers() {
            let view = relation_name(&catalog, r.view);
            let l = labels(&[("source", &r.source), ("view", &view), ("reader", &id.to_string())]);
            if let Some(b) = r.stats.backlog() {
                lag.samples.push((l.clone(), gauge(b)));
            }
            src.samples.push((l, counter(r.stats.rows.load(Relaxed))));
        }
        let mut sink_done = fam("eddy_sink_delivered", "Changes a sink delivered since the server started.");
        let mut sink_pending = fam("eddy_sink_pending", "Changes a sink has logged and not delivered yet.");
        for (id, s) in e.all_sink_stats() {
            let name = relation_name(&catalog, id);
            sink_done.samples.push((labels(&[("sink", &name)]), counter(s.delivered.load(Relaxed))));
            sink_pending.samples.push((labels(&[("sink", &name)]), gauge(s.pending.load(Relaxed))));
        }
        let mut families = vec![
            op_in,
            op_out,
            op_busy,
            op_entries,
            op_bytes,
            op_hits,
            op_misses,
            v_in,
            v_out,
            v_bp,
            v_failed,
            bf_done,
            bf_total,
            one("eddy_committed_epoch", "The last committed epoch.", gauge(e.store.committed_epoch().0)),
            one("eddy_epochs_committed", "Epochs committed since the server started.", counter(commits.epochs.load(Relaxed))),
            one("eddy_state_changes_committed", "State changes written by commits.", counter(commits.ops.load(Relaxed))),
            one("eddy_commit_failures", "Commits the state store refused.", counter(commits.failures.load(Relaxed))),
            one("eddy_freshness_seconds", "How stale the last committed epoch's oldest change was when it became visible.", Value::Gauge(freshness)),
            os_req,
            os_err,
            one("eddy_object_store_read_bytes", "Bytes read from the object store.", counter(os.bytes_read.load(Relaxed))),
            one("eddy_object_store_written_bytes", "Bytes written to the object store.", counter(os.bytes_written.load(Relaxed))),
            Family { samples: vec![(labels(&[("layer", "operator")]), counter(hits))], ..fam("eddy_cache_hits", "State lookups answered by a cache layer.") },
            Family { samples: vec![(labels(&[("layer", "operator")]), counter(misses))], ..fam("eddy_cache_misses", "State lookups a cache layer passed on.") },
            Family {
                samples: vec![(labels(&[("layer", "operator")]), gauge(cache_bytes)), (labels(&[("layer", "block")]), gauge(e.store.block_cache_used()))],
                ..fam("eddy_cache_bytes", "Bytes held by a cache layer.")
            },
            mem_used,
            mem_limit,
            one("eddy_memory_budget_bytes", "The state layers' memory budget (--memory-mb).", gauge(self.memory_budget)),
            one("eddy_process_resident_memory_bytes", "Resident memory of the server process.", gauge(rss_bytes())),
            one(
                "eddy_change_log_spilled_bytes",
                "Bytes of uncommitted statements' changes for views moved from memory to temporary files.",
                counter(eddy_stream::change_log::spilled_bytes()),
            ),
            one("eddy_connections", "Client connections open now.", gauge(self.admission.connections() as u64)),
            one("eddy_query_errors", "Statements that ended with an error.", counter(e.statements.errors.load(Relaxed))),
            src,
            lag,
            sink_done,
            sink_pending,
        ];
        families.extend(lsm_families(e));
        families
    }
}

/// SlateDB's own counters and gauges as `eddy_slatedb_<name>` families (L0 SSTs, sorted
/// runs, block-cache hits and misses, compactions, ...), with SlateDB's labels.
fn lsm_families(e: &Engine) -> Vec<Family> {
    let mut by_name: std::collections::BTreeMap<String, Family> = std::collections::BTreeMap::new();
    for eddy_storage::LsmMetric { name, labels, counter, value: v } in e.store.lsm_metrics() {
        let clean: String = name.strip_prefix("slatedb.").unwrap_or(&name).chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let clean = format!("eddy_slatedb_{}", clean.strip_suffix("_total").unwrap_or(&clean));
        let help = format!("SlateDB's {name}.");
        let f = by_name.entry(clean.clone()).or_insert_with(|| Family { name: clean, help, samples: Vec::new() });
        let value = if counter { Value::Counter(v) } else { Value::Gauge(v) };
        // One type per family: a name SlateDB registers as both keeps its first type.
        if f.samples.first().is_none_or(|(_, first)| matches!(first, Value::Counter(_)) == counter) {
            f.samples.push((labels, value));
        }
    }
    by_name.into_values().collect()
}
