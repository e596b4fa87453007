//! Sinks: `CREATE SINK ... WITH (connector = 'kafka', ...) FORMAT PLAIN|UPSERT|DEBEZIUM ENCODE
//! JSON`. The stream side ([`eddy_stream::sink`]) hands a [`KafkaSink`] each committed change
//! once or, after a crash, again (at-least-once); this module turns changes into messages.
//!
//! * `FORMAT PLAIN`: one message per inserted row, the row as a JSON object. Only for sinks
//!   whose input only inserts, unless `force_append_only = 'true'`, which drops deletes (and
//!   sends the new row of an update).
//! * `FORMAT UPSERT`: keyed by `primary_key` (a JSON object of the key columns); an insert or
//!   update sends the row, a delete a tombstone (no value). An update that keeps its key sends
//!   only the new row.
//! * `FORMAT DEBEZIUM`: Debezium's envelope, `{"before": .., "after": .., "op": "c"|"u"|"d",
//!   "ts_ms": ..}`, keyed like UPSERT.
//!
//! Keyed messages go to partition `murmur2(key) % partitions`, as the Java client's default
//! partitioner does, so every change of a key lands in one partition, in order. Keyless ones
//! go to one partition per delivered chunk, in turn.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use async_trait::async_trait;
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, EddyError, Op, Result, StreamChunk};
use eddy_stream::SinkTarget;
use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::client::Client;
use rskafka::record::Record;

use crate::kafka::{broker_error, brokers, client};
use crate::options::Options;

/// How long CREATE SINK waits for the brokers.
const CREATE_DEADLINE: Duration = Duration::from_secs(10);

/// How long one delivery may wait for the brokers before it counts as failed (and is retried
/// on a fresh connection).
const PRODUCE_TIMEOUT: Duration = Duration::from_secs(20);

/// Records per produce request at most.
const PRODUCE_RECORDS: usize = 1000;

/// Bytes per produce request at most (about; one record may exceed it alone).
const PRODUCE_BYTES: usize = 1 << 20;

pub use crate::sink_spec::{SinkConnector, SinkFormat, SinkSpec};

/// Option keys a Kafka sink understands (besides `properties.*`, passed to the client's
/// settings and ignored where it has none, and `encode.*`).
const KAFKA_SINK_KEYS: &[&str] = &["connector", "topic", "primary_key", "type", "force_append_only", "format", "encode"];

/// Checks a sink's options against its columns `schema`; `default_key`: the input's key
/// columns, when they are all among the sink's columns; `append_only`: whether the input
/// only ever inserts.
pub fn check(options: &Options, schema: &SchemaRef, default_key: Option<Vec<usize>>, append_only: bool, uid: String) -> Result<SinkSpec> {
    let connector = options.required("connector")?.to_ascii_lowercase();
    let force_append_only = options.flag("force_append_only", false)?;
    let (connector, topic, format) = match connector.as_str() {
        "kafka" => (SinkConnector::Kafka, options.required("topic")?.to_string(), kafka_format(options, force_append_only)?),
        "postgres" | "jdbc" => {
            for key in options.0.keys() {
                if !crate::postgres::POSTGRES_SINK_KEYS.contains(&key.as_str()) {
                    return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "unknown postgres sink option '{key}'"));
                }
            }
            crate::postgres::check_options(options)?;
            let table = options.get("table").or_else(|| options.get("table.name")).unwrap_or_default().to_string();
            let format = match options.get("type").map(str::to_ascii_lowercase).as_deref() {
                Some("upsert") | None => SinkFormat::Upsert,
                Some("append-only") => SinkFormat::Plain { force_append_only },
                Some(other) => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "sink option 'type' must be 'upsert' or 'append-only', not '{other}'")),
            };
            (SinkConnector::Postgres, table, format)
        }
        "iceberg" => {
            let format = crate::iceberg::check_options(options, force_append_only)?;
            let table = format!("{}.{}", options.get("database.name").unwrap_or_default(), options.get("table.name").unwrap_or_default());
            (SinkConnector::Iceberg, table, format)
        }
        "blackhole" => (SinkConnector::Blackhole, String::new(), SinkFormat::Plain { force_append_only: true }),
        other => return Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "sink connector \"{other}\" is not supported (supported: kafka, postgres, iceberg, blackhole)")),
    };
    if let Some(f) = schema.fields().iter().find(|f| matches!(f.data_type(), DataType::Interval(_)) && connector == SinkConnector::Kafka) {
        return Err(not_supported!("kafka sinks cannot encode column \"{}\" of type interval as JSON", f.name()));
    }
    if format == (SinkFormat::Plain { force_append_only: false }) && !append_only {
        return Err(user_err!(
            sqlstate::INVALID_PARAMETER_VALUE,
            "the sink's input can update and delete rows, which an append-only sink cannot express: use an upsert sink (FORMAT UPSERT or DEBEZIUM for Kafka, type = 'upsert' for Postgres), or force_append_only = 'true' to send only the inserted rows"
        ));
    }
    let key = match options.get("primary_key") {
        Some(list) => list
            .split(',')
            .map(|c| {
                let c = c.trim().trim_matches('"');
                schema
                    .fields()
                    .iter()
                    .position(|f| f.name() == c || f.name().eq_ignore_ascii_case(c))
                    .ok_or_else(|| user_err!(sqlstate::UNDEFINED_COLUMN, "primary_key column \"{c}\" is not a column of the sink"))
            })
            .collect::<Result<Vec<usize>>>()?,
        None if matches!(format, SinkFormat::Plain { .. }) => vec![],
        None => default_key.filter(|k| !k.is_empty()).ok_or_else(|| {
            user_err!(sqlstate::INVALID_PARAMETER_VALUE, "an upsert sink needs primary_key = 'column, ...' (its input's key is not among its columns)")
        })?,
    };
    Ok(SinkSpec { options: options.clone(), connector, topic, format, key, schema: schema.clone(), uid })
}

/// The delivery target of `spec` (connects when it first delivers).
pub fn open(spec: SinkSpec) -> Result<Box<dyn SinkTarget>> {
    Ok(match spec.connector {
        SinkConnector::Kafka => Box::new(KafkaSink::new(spec)),
        SinkConnector::Postgres => Box::new(crate::postgres::PostgresSink::new(spec)),
        SinkConnector::Iceberg => Box::new(crate::iceberg::IcebergSink::new(spec)?),
        SinkConnector::Blackhole => Box::new(Blackhole),
    })
}

/// The `blackhole` sink: every change delivered is done with.
struct Blackhole;

#[async_trait]
impl SinkTarget for Blackhole {
    async fn deliver(&mut self, _chunk: &StreamChunk, seqs: std::ops::Range<u64>) -> Result<Option<u64>> {
        Ok(Some(seqs.end))
    }
}

/// A Kafka sink's options (unknown keys refused) and message format.
fn kafka_format(options: &Options, force_append_only: bool) -> Result<SinkFormat> {
    for key in options.0.keys() {
        if !(KAFKA_SINK_KEYS.contains(&key.as_str()) || key.starts_with("properties.") || key.starts_with("encode.")) {
            return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "unknown kafka sink option '{key}'"));
        }
    }
    brokers(options)?;
    let format = match (options.get("format").map(str::to_ascii_uppercase).as_deref(), options.get("type").map(str::to_ascii_lowercase).as_deref()) {
        (Some("PLAIN"), _) | (None, Some("append-only")) => SinkFormat::Plain { force_append_only },
        (Some("UPSERT"), _) | (None, Some("upsert")) => SinkFormat::Upsert,
        (Some("DEBEZIUM"), _) | (None, Some("debezium")) => SinkFormat::Debezium,
        (None, None) => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "a kafka sink needs FORMAT PLAIN|UPSERT|DEBEZIUM ENCODE JSON")),
        (None, Some(other)) => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "sink option 'type' must be 'append-only', 'upsert' or 'debezium', not '{other}'")),
        (Some(other), _) => return Err(not_supported!("FORMAT {other} for a kafka sink (PLAIN, UPSERT or DEBEZIUM)")),
    };
    match options.get("encode").map(str::to_ascii_uppercase).as_deref() {
        None | Some("JSON") => {}
        Some(other) => return Err(not_supported!("ENCODE {other} for a kafka sink (JSON)")),
    }
    Ok(format)
}

/// Connects to the sink's target and checks it takes the sink's rows: for Kafka, makes sure the
/// topic exists (creating it, with one partition or `properties.num.partitions`, if not).
pub async fn prepare(spec: &SinkSpec) -> Result<()> {
    match spec.connector {
        SinkConnector::Postgres => return crate::postgres::prepare(spec).await,
        SinkConnector::Iceberg => return crate::iceberg::prepare(spec).await,
        SinkConnector::Blackhole => return Ok(()),
        SinkConnector::Kafka => {}
    }
    let c = client(&spec.options, Some(CREATE_DEADLINE)).await?;
    let brokers = brokers(&spec.options)?.join(",");
    if crate::kafka::partitions(&c, &spec.options, &spec.topic).await.is_ok() {
        return Ok(());
    }
    let partitions: i32 = spec.options.number("properties.num.partitions", 1)?;
    let controller = c.controller_client().map_err(|e| broker_error(&brokers, e))?;
    if let Err(e) = controller.create_topic(spec.topic.clone(), partitions, 1, 5000).await {
        // Someone may have created it meanwhile.
        if crate::kafka::partitions(&c, &spec.options, &spec.topic).await.is_err() {
            return Err(user_err!(sqlstate::CONNECTION_FAILURE, "cannot create kafka topic \"{}\" on '{brokers}': {e}", spec.topic));
        }
    }
    Ok(())
}

/// Delivers a sink's changes to its topic.
pub struct KafkaSink {
    spec: SinkSpec,
    /// Connected on first use and again after a failure.
    partitions: Option<(Client, Vec<Arc<PartitionClient>>)>,
    /// The partition for the next keyless chunk.
    next_partition: usize,
}

impl KafkaSink {
    /// A sink for `spec` (connects when it first delivers).
    pub fn new(spec: SinkSpec) -> Self {
        Self { spec, partitions: None, next_partition: 0 }
    }

    async fn connect(&mut self) -> Result<Vec<Arc<PartitionClient>>> {
        if let Some((_, p)) = &self.partitions {
            return Ok(p.clone());
        }
        let c = client(&self.spec.options, Some(CREATE_DEADLINE)).await?;
        let ids = crate::kafka::partitions(&c, &self.spec.options, &self.spec.topic).await?;
        let brokers = brokers(&self.spec.options)?.join(",");
        let mut clients = Vec::with_capacity(ids.len());
        for id in ids {
            let p = c.partition_client(self.spec.topic.clone(), id, UnknownTopicHandling::Error).await.map_err(|e| broker_error(&brokers, e))?;
            clients.push(Arc::new(p));
        }
        self.partitions = Some((c, clients.clone()));
        Ok(clients)
    }
}

/// One message: key and value (`None`: a tombstone).
type Message = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Each row of `batch` as a JSON object (NULLs written out).
fn json_rows(batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
    let mut buf = Vec::new();
    {
        let mut w = arrow::json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .with_timestamp_format("%Y-%m-%d %H:%M:%S%.6f".to_string())
            .with_timestamp_tz_format("%Y-%m-%d %H:%M:%S%.6f%:z".to_string())
            .build::<_, arrow::json::writer::LineDelimited>(&mut buf);
        w.write(batch)?;
        w.finish()?;
    }
    // JSON strings escape newlines, so every line is one row.
    let rows: Vec<Vec<u8>> = buf.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect();
    if rows.len() != batch.num_rows() {
        return Err(eddy_common::internal_err!("JSON encoding gave {} lines for {} rows", rows.len(), batch.num_rows()));
    }
    Ok(rows)
}

impl KafkaSink {
    /// The messages of `chunk`.
    fn messages(&self, chunk: &StreamChunk) -> Result<Vec<Message>> {
        let values = json_rows(&chunk.batch)?;
        let keys = if self.spec.key.is_empty() { vec![] } else { json_rows(&chunk.batch.project(&self.spec.key)?)? };
        let key = |i: usize| keys.get(i).cloned();
        let n = chunk.ops.len();
        let mut out = Vec::with_capacity(n);
        let ts = chrono::Utc::now().timestamp_millis();
        let mut i = 0;
        while i < n {
            let op = chunk.ops[i];
            // An update: its old row followed by its new one.
            let pair = op == Op::UpdateDelete && i + 1 < n && chunk.ops[i + 1] == Op::UpdateInsert;
            match self.spec.format {
                SinkFormat::Plain { .. } => {
                    if op.is_insert() {
                        out.push((None, Some(values[i].clone())));
                    }
                }
                SinkFormat::Upsert => {
                    if pair && key(i) == key(i + 1) {
                        i += 1;
                        out.push((key(i), Some(values[i].clone())));
                    } else if op.is_insert() {
                        out.push((key(i), Some(values[i].clone())));
                    } else {
                        out.push((key(i), None));
                    }
                }
                SinkFormat::Debezium => {
                    let envelope = |before: Option<&[u8]>, after: Option<&[u8]>, op: &str| {
                        let mut v = Vec::new();
                        v.extend_from_slice(b"{\"before\":");
                        v.extend_from_slice(before.unwrap_or(b"null"));
                        v.extend_from_slice(b",\"after\":");
                        v.extend_from_slice(after.unwrap_or(b"null"));
                        v.extend_from_slice(format!(",\"op\":\"{op}\",\"ts_ms\":{ts}}}").as_bytes());
                        v
                    };
                    if pair && key(i) == key(i + 1) {
                        out.push((key(i + 1), Some(envelope(Some(&values[i]), Some(&values[i + 1]), "u"))));
                        i += 1;
                    } else if op.is_insert() {
                        out.push((key(i), Some(envelope(None, Some(&values[i]), "c"))));
                    } else {
                        out.push((key(i), Some(envelope(Some(&values[i]), None, "d"))));
                    }
                }
            }
            i += 1;
        }
        Ok(out)
    }
}

/// Kafka's default partitioner hash (murmur2, seed 0x9747b28c), as the Java client computes it.
fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len() as u32;
    let mut h: u32 = 0x9747_b28c ^ len;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// Produces `records` to `partition` in order, in requests of bounded size.
async fn produce_all(partition: Arc<PartitionClient>, records: Vec<Record>) -> std::result::Result<(), rskafka::client::error::Error> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    for r in records {
        bytes += r.approximate_size();
        batch.push(r);
        if batch.len() >= PRODUCE_RECORDS || bytes >= PRODUCE_BYTES {
            partition.produce(std::mem::take(&mut batch), Compression::NoCompression).await?;
            bytes = 0;
        }
    }
    if !batch.is_empty() {
        partition.produce(batch, Compression::NoCompression).await?;
    }
    Ok(())
}

#[async_trait]
impl SinkTarget for KafkaSink {
    async fn deliver(&mut self, chunk: &StreamChunk, seqs: std::ops::Range<u64>) -> Result<Option<u64>> {
        self.send(chunk).await?;
        Ok(Some(seqs.end))
    }
}

impl KafkaSink {
    /// Delivers `chunk`, durably once this returns.
    async fn send(&mut self, chunk: &StreamChunk) -> Result<()> {
        let messages = self.messages(chunk)?;
        if messages.is_empty() {
            return Ok(());
        }
        let partitions = self.connect().await?;
        let n = partitions.len();
        let mut per: BTreeMap<usize, Vec<Record>> = BTreeMap::new();
        let keyless = self.next_partition % n.max(1);
        self.next_partition = self.next_partition.wrapping_add(1);
        let timestamp = chrono::Utc::now();
        for (key, value) in messages {
            let p = match &key {
                Some(k) => (murmur2(k) & 0x7fff_ffff) as usize % n,
                None => keyless,
            };
            per.entry(p).or_default().push(Record { key, value, headers: BTreeMap::new(), timestamp });
        }
        let sends = per.into_iter().map(|(p, records)| produce_all(partitions[p].clone(), records));
        // The client has no request timeout of its own: a broker that vanished mid-request
        // would hold the sink forever.
        let results = match tokio::time::timeout(PRODUCE_TIMEOUT, futures::future::join_all(sends)).await {
            Ok(r) => r,
            Err(_) => {
                self.partitions = None;
                return Err(EddyError::external(format!("kafka sink to topic \"{}\": no answer from the broker within {PRODUCE_TIMEOUT:?}", self.spec.topic)));
            }
        };
        if let Some(Err(e)) = results.into_iter().find(|r| r.is_err()) {
            // Connect afresh next time (the leader may have moved, or the broker restarted).
            self.partitions = None;
            let brokers = brokers(&self.spec.options)?.join(",");
            return Err(EddyError::external(format!("kafka sink to topic \"{}\" on '{brokers}': {e}", self.spec.topic)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(format: &str, extra: &[(&str, &str)]) -> Result<SinkSpec> {
        use arrow::datatypes::{Field, Schema};
        let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false), Field::new("name", DataType::Utf8, true)]));
        let mut pairs = vec![("connector", "kafka"), ("topic", "t"), ("properties.bootstrap.server", "127.0.0.1:1"), ("format", format), ("encode", "JSON")];
        pairs.extend_from_slice(extra);
        let options = Options::new(pairs.into_iter().map(|(k, v)| (k.to_string(), v.to_string())));
        check(&options, &schema, Some(vec![0]), false, "test".into())
    }

    fn chunk(rows: &[(Op, i32, Option<&str>)]) -> StreamChunk {
        use arrow::array::{Int32Array, StringArray};
        let schema = spec("UPSERT", &[]).unwrap().schema;
        let ids = Int32Array::from_iter_values(rows.iter().map(|r| r.1));
        let names = StringArray::from_iter(rows.iter().map(|r| r.2));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(ids), Arc::new(names)]).unwrap();
        StreamChunk::try_new(batch, rows.iter().map(|r| r.0).collect()).unwrap()
    }

    fn text(m: &Message) -> (Option<String>, Option<String>) {
        (m.0.as_ref().map(|k| String::from_utf8(k.clone()).unwrap()), m.1.as_ref().map(|v| String::from_utf8(v.clone()).unwrap()))
    }

    #[test]
    fn upsert_and_debezium_messages_follow_each_change() {
        let changes = chunk(&[(Op::Insert, 1, Some("a")), (Op::UpdateDelete, 1, Some("a")), (Op::UpdateInsert, 1, None), (Op::Delete, 2, Some("b"))]);
        let upsert = KafkaSink::new(spec("UPSERT", &[]).unwrap()).messages(&changes).unwrap();
        let upsert: Vec<_> = upsert.iter().map(text).collect();
        assert_eq!(
            upsert,
            vec![
                (Some(r#"{"id":1}"#.into()), Some(r#"{"id":1,"name":"a"}"#.into())),
                (Some(r#"{"id":1}"#.into()), Some(r#"{"id":1,"name":null}"#.into())),
                (Some(r#"{"id":2}"#.into()), None),
            ]
        );
        let debezium = KafkaSink::new(spec("DEBEZIUM", &[]).unwrap()).messages(&changes).unwrap();
        let ops: Vec<String> = debezium
            .iter()
            .map(|m| {
                let v = String::from_utf8(m.1.clone().unwrap()).unwrap();
                let op = v.split("\"op\":\"").nth(1).unwrap()[..1].to_string();
                assert!(v.starts_with("{\"before\":"), "{v}");
                op
            })
            .collect();
        assert_eq!(ops, ["c", "u", "d"]);
        let forced = KafkaSink::new(spec("PLAIN", &[("force_append_only", "true")]).unwrap()).messages(&changes).unwrap();
        assert_eq!(forced.len(), 2, "the insert and the update's new row");
        assert!(forced.iter().all(|m| m.0.is_none()));
    }

    #[test]
    fn sink_options_are_checked() {
        assert_eq!(spec("PLAIN", &[]).unwrap_err().sqlstate, sqlstate::INVALID_PARAMETER_VALUE);
        assert!(spec("UPSERT", &[("colour", "red")]).unwrap_err().message.contains("colour"));
        assert!(spec("UPSERT", &[("primary_key", "nope")]).unwrap_err().message.contains("nope"));
        assert_eq!(spec("UPSERT", &[("primary_key", "name")]).unwrap().key, vec![1]);
        assert_eq!(spec("AVRO", &[]).unwrap_err().sqlstate, sqlstate::FEATURE_NOT_SUPPORTED);
    }

    #[test]
    fn murmur2_matches_the_java_partitioner() {
        // Values from Kafka's own partitioner tests (Utils.murmur2).
        assert_eq!(murmur2(b"21") as i32, -973932308);
        assert_eq!(murmur2(b"foobar") as i32, -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string") as i32, -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string") as i32, -1486304829);
        assert_eq!(murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") as i32, -58897971);
        assert_eq!(murmur2(b"abc") as i32, 479470107);
    }
}
