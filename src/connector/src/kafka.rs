//! `connector = 'kafka'`: a topic's partitions as splits, read with `rskafka` (a pure-Rust
//! client: no C library to build, and it speaks the protocol versions the brokers we test
//! against answer; consumer groups are not needed, offsets commit with our own epochs).
//!
//! Options (RisingWave's names): `topic`, `properties.bootstrap.server` (comma-separated
//! `host:port`s; `properties.bootstrap.servers` too), `scan.startup.mode` = `earliest`
//! (default) | `latest`. `FORMAT PLAIN ENCODE JSON` (fields by column name, unknown fields
//! ignored) or `ENCODE CSV` (one record per message). A message that does not decode is
//! skipped, counted and logged; it never stops the source.
//!
//! Each partition is a split whose position is the offset of its next message, so a view
//! restarted from a committed epoch reads exactly the messages after it. A split fetches in
//! its own task into a bounded queue (at most [`QUEUED_FETCHES`] responses ahead of the
//! reader); the reader only decodes what the view consumes. The partitions are those of the
//! topic when the view first started (a restarted view keeps its committed partitions and
//! does not need the broker to come back up before the server does).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, BinaryArray, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, SchemaRef};
use eddy_common::error::sqlstate;
use eddy_common::{internal_err, not_supported, user_err, EddyError, Result};
use eddy_stream::SplitReader;
use rskafka::client::partition::{OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::RecordAndOffset;
use rskafka::BackoffConfig;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::options::Options;
use crate::Seekable;

/// Fetch responses a split queues ahead of its reader.
const QUEUED_FETCHES: usize = 4;

/// Bytes one fetch asks for at most.
const FETCH_BYTES: i32 = 4 << 20;

/// How long a fetch waits at the broker for new messages.
const FETCH_WAIT_MS: i32 = 200;

/// How long a fetch may take before the connection counts as broken.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// How soon a split with nothing queued is polled again.
const POLL: Duration = Duration::from_millis(5);

/// How long statements wait for an unreachable broker before reporting it.
const CONNECT_DEADLINE: Duration = Duration::from_secs(10);

/// The broker addresses of `options`.
pub(crate) fn brokers(options: &Options) -> Result<Vec<String>> {
    let list = options
        .get("properties.bootstrap.server")
        .or_else(|| options.get("properties.bootstrap.servers"))
        .ok_or_else(|| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "kafka option 'properties.bootstrap.server' is required"))?;
    let brokers: Vec<String> = list.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    if brokers.is_empty() {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "kafka option 'properties.bootstrap.server' names no broker"));
    }
    Ok(brokers)
}

/// A client of the brokers in `options`; `deadline`: how long connection attempts may retry
/// (`None`: forever, for background tasks that must ride out a broker restart).
pub(crate) async fn client(options: &Options, deadline: Option<Duration>) -> Result<Client> {
    let brokers = brokers(options)?;
    let backoff = BackoffConfig { init_backoff: Duration::from_millis(50), max_backoff: Duration::from_secs(2), base: 2.0, deadline };
    ClientBuilder::new(brokers.clone())
        .client_id("eddy")
        .backoff_config(backoff)
        .build()
        .await
        .map_err(|e| broker_error(&brokers.join(","), e))
}

/// A broker failure as a user-facing error naming the option that points at it.
pub(crate) fn broker_error(brokers: &str, e: impl std::fmt::Display) -> EddyError {
    user_err!(sqlstate::CONNECTION_FAILURE, "kafka broker '{brokers}' (properties.bootstrap.server): {e}")
}

/// The partitions of `topic`, or an error naming it if the brokers do not know it.
pub(crate) async fn partitions(client: &Client, options: &Options, topic: &str) -> Result<Vec<i32>> {
    let brokers = brokers(options)?.join(",");
    let topics = tokio::time::timeout(CONNECT_DEADLINE, client.list_topics())
        .await
        .map_err(|_| broker_error(&brokers, "no answer"))?
        .map_err(|e| broker_error(&brokers, e))?;
    match topics.into_iter().find(|t| t.name == topic) {
        Some(t) if !t.partitions.is_empty() => Ok(t.partitions.into_iter().collect()),
        _ => Err(user_err!(sqlstate::UNDEFINED_OBJECT, "kafka topic \"{topic}\" does not exist on '{brokers}'")),
    }
}

/// Where a split with no committed position starts.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Startup {
    Earliest,
    Latest,
}

/// How message values are decoded.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Encoding {
    Json,
    Csv { delimiter: u8 },
}

/// What a split's fetch task hands its reader.
enum Fetched {
    /// The offset the task starts at (once resolved from the startup mode).
    Start(i64),
    /// Messages, and the partition's high watermark when they were fetched.
    Records(Vec<RecordAndOffset>, i64),
    /// The high watermark of a fetch that found nothing new.
    High(i64),
}

/// Messages skipped because they did not decode, per source reader (shared by its splits).
#[derive(Debug, Default)]
pub struct Malformed(pub AtomicU64);

/// A message's metadata, as a column (`INCLUDE key | partition | offset | timestamp`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Include {
    Key,
    Partition,
    Offset,
    Timestamp,
}

/// What `INCLUDE` takes (stored as option `include.<what>` = the column's name), each with its
/// column's default name (RisingWave's).
pub const INCLUDABLE: &[(&str, &str, Include)] = &[
    ("key", "_rw_kafka_key", Include::Key),
    ("partition", "_rw_kafka_partition", Include::Partition),
    ("offset", "_rw_kafka_offset", Include::Offset),
    ("timestamp", "_rw_kafka_timestamp", Include::Timestamp),
];

/// Where a source column's values come from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Column {
    /// Column `i` of the decoded message values.
    Payload(usize),
    Meta(Include),
}

/// The source's columns: where each comes from, and the schema of the message values (the
/// columns that are not metadata).
fn columns(options: &Options, schema: &SchemaRef) -> (Vec<Column>, SchemaRef) {
    let mut payload = Vec::new();
    let columns = schema
        .fields()
        .iter()
        .map(|f| match INCLUDABLE.iter().find(|(what, _, _)| options.get(&format!("include.{what}")) == Some(f.name().as_str())) {
            Some((_, _, what)) => Column::Meta(*what),
            None => {
                payload.push(f.clone());
                Column::Payload(payload.len() - 1)
            }
        })
        .collect();
    (columns, Arc::new(arrow::datatypes::Schema::new(payload)))
}

/// One partition.
struct KafkaSplit {
    options: Options,
    topic: String,
    partition: i32,
    /// The source's columns.
    schema: SchemaRef,
    /// Where each comes from.
    columns: Vec<Column>,
    /// The columns decoded from message values.
    payload: SchemaRef,
    encoding: Encoding,
    startup: Startup,
    /// Offset of the next message to hand out (`None`: not yet resolved from `startup`).
    next: Option<i64>,
    /// Messages fetched and not yet handed out.
    pending: VecDeque<RecordAndOffset>,
    /// The partition's high watermark at the last fetch (the offset after its last message).
    high: Option<i64>,
    rx: Option<mpsc::Receiver<Result<Fetched>>>,
    task: Option<tokio::task::JoinHandle<()>>,
    malformed: Arc<Malformed>,
}

impl Drop for KafkaSplit {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// The splits of a Kafka source: one per partition (`committed`: how many the source had when
/// its position was committed; then the broker is not asked).
pub(crate) async fn splits(options: &Options, schema: &SchemaRef, committed: Option<usize>) -> Result<Vec<Box<dyn Seekable>>> {
    let topic = options.required("topic")?.to_string();
    let startup = match options.get("scan.startup.mode").map(|m| m.trim().to_ascii_lowercase()).as_deref() {
        None | Some("earliest") => Startup::Earliest,
        Some("latest") => Startup::Latest,
        Some(other) => {
            return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "kafka option 'scan.startup.mode' must be 'earliest' or 'latest', not '{other}'"))
        }
    };
    let encoding = match options.get("encode").map(str::to_ascii_uppercase).as_deref() {
        Some("JSON") | None => Encoding::Json,
        Some("CSV") => {
            Encoding::Csv { delimiter: options.csv_delimiter()? }
        }
        Some(other) => return Err(not_supported!("ENCODE {other} for a kafka source (JSON or CSV)")),
    };
    match options.get("format").map(str::to_ascii_uppercase).as_deref() {
        None | Some("PLAIN") | Some("UPSERT") => {}
        Some(other) => return Err(not_supported!("FORMAT {other} for a kafka source (PLAIN or UPSERT)")),
    }
    let (columns, payload) = columns(options, schema);
    for f in payload.fields() {
        if matches!(f.data_type(), DataType::Interval(_) | DataType::Binary) {
            return Err(not_supported!("kafka sources cannot read column \"{}\" of type {}", f.name(), f.data_type()));
        }
    }
    let partitions = match committed {
        Some(n) => (0..n as i32).collect(),
        None => {
            let client = client(options, Some(CONNECT_DEADLINE)).await?;
            partitions(&client, options, &topic).await?
        }
    };
    let malformed = Arc::new(Malformed::default());
    Ok(partitions
        .into_iter()
        .map(|partition| {
            Box::new(KafkaSplit {
                options: options.clone(),
                topic: topic.clone(),
                partition,
                schema: schema.clone(),
                columns: columns.clone(),
                payload: payload.clone(),
                encoding,
                startup,
                next: None,
                pending: VecDeque::new(),
                high: None,
                rx: None,
                task: None,
                malformed: malformed.clone(),
            }) as Box<dyn Seekable>
        })
        .collect())
}

/// Fetches `partition` from `start` (or the startup offset) on, forever, into `tx`; waits
/// out broker outages.
async fn fetch(options: Options, topic: String, partition: i32, start: Option<i64>, startup: Startup, tx: mpsc::Sender<Result<Fetched>>) {
    let mut backoff = Duration::from_millis(100);
    let mut logged = false;
    let mut partition_client: Option<PartitionClient> = None;
    let mut next = start;
    loop {
        let step: Result<()> = async {
            if partition_client.is_none() {
                let c = client(&options, None).await?;
                let p = c
                    .partition_client(topic.clone(), partition, UnknownTopicHandling::Retry)
                    .await
                    .map_err(|e| internal_err!("kafka topic {topic} partition {partition}: {e}"))?;
                partition_client = Some(p);
            }
            let Some(p) = partition_client.as_ref() else { return Ok(()) };
            let offset = match next {
                Some(o) => o,
                None => {
                    let at = if startup == Startup::Latest { OffsetAt::Latest } else { OffsetAt::Earliest };
                    let o = p.get_offset(at).await.map_err(|e| internal_err!("kafka topic {topic} partition {partition}: {e}"))?;
                    if tx.send(Ok(Fetched::Start(o))).await.is_err() {
                        return Ok(());
                    }
                    next = Some(o);
                    o
                }
            };
            // The client has no request timeout: a vanished broker would hold the fetch forever.
            let (records, high) = tokio::time::timeout(REQUEST_TIMEOUT, p.fetch_records(offset, 1..FETCH_BYTES, FETCH_WAIT_MS))
                .await
                .map_err(|_| internal_err!("kafka topic {topic} partition {partition}: no answer from the broker within {REQUEST_TIMEOUT:?}"))?
                .map_err(|e| internal_err!("kafka topic {topic} partition {partition} at offset {offset}: {e}"))?;
            // A compressed batch may start before the offset asked for.
            let records: Vec<RecordAndOffset> = records.into_iter().filter(|r| r.offset >= offset).collect();
            match records.last() {
                Some(last) => {
                    next = Some(last.offset + 1);
                    let _ = tx.send(Ok(Fetched::Records(records, high))).await;
                }
                // Only for the lag shown to watchers: skipped when the queue is full.
                None => {
                    let _ = tx.try_send(Ok(Fetched::High(high)));
                }
            }
            Ok(())
        }
        .await;
        if tx.is_closed() {
            return;
        }
        match step {
            Ok(()) => {
                backoff = Duration::from_millis(100);
                logged = false;
            }
            Err(e) => {
                if !logged {
                    tracing::warn!("kafka source: {e}; retrying");
                    logged = true;
                }
                partition_client = None;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

impl KafkaSplit {
    fn start(&mut self) {
        let (tx, rx) = mpsc::channel(QUEUED_FETCHES);
        let task = tokio::spawn(fetch(self.options.clone(), self.topic.clone(), self.partition, self.next, self.startup, tx));
        self.rx = Some(rx);
        self.task = Some(task);
    }

    /// Moves what the fetch task has queued into `pending`.
    fn receive(&mut self) -> Result<()> {
        let Some(rx) = self.rx.as_mut() else { return Ok(()) };
        while self.pending.len() < 4 * eddy_stream::source::SOURCE_CHUNK_ROWS {
            match rx.try_recv() {
                Ok(Ok(Fetched::Start(o))) => self.next = Some(o),
                Ok(Ok(Fetched::Records(r, high))) => {
                    self.pending.extend(r);
                    self.high = Some(high);
                }
                Ok(Ok(Fetched::High(high))) => self.high = Some(high),
                Ok(Err(e)) => return Err(e),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    return Err(internal_err!("kafka topic {} partition {}: the fetch task stopped", self.topic, self.partition))
                }
            }
        }
        Ok(())
    }

    /// Decodes messages into a batch of the source's columns; messages whose value does not
    /// decode are skipped.
    fn decode(&self, messages: &[RecordAndOffset]) -> Result<RecordBatch> {
        let (payload, kept) = self.decode_payload(messages)?;
        if self.columns.iter().all(|c| matches!(c, Column::Payload(_))) {
            return Ok(payload);
        }
        let kept: Vec<&RecordAndOffset> = kept.into_iter().map(|i| &messages[i]).collect();
        let cols = self
            .columns
            .iter()
            .zip(self.schema.fields())
            .map(|(c, f)| -> Result<ArrayRef> {
                let a: ArrayRef = match c {
                    Column::Payload(i) => return Ok(payload.column(*i).clone()),
                    Column::Meta(Include::Key) => Arc::new(BinaryArray::from_iter(kept.iter().map(|m| m.record.key.as_deref()))),
                    Column::Meta(Include::Partition) => Arc::new(StringArray::from_iter_values(kept.iter().map(|_| self.partition.to_string()))),
                    Column::Meta(Include::Offset) => Arc::new(StringArray::from_iter_values(kept.iter().map(|m| m.offset.to_string()))),
                    Column::Meta(Include::Timestamp) => Arc::new(TimestampMicrosecondArray::from_iter_values(kept.iter().map(|m| m.record.timestamp.timestamp_micros()))),
                };
                Ok(if a.data_type() == f.data_type() { a } else { arrow::compute::cast(&a, f.data_type())? })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new(self.schema.clone(), cols)?)
    }

    /// Decodes message values (the payload columns); the index of each message decoded.
    fn decode_payload(&self, messages: &[RecordAndOffset]) -> Result<(RecordBatch, Vec<usize>)> {
        let values: Vec<&[u8]> = messages.iter().map(|m| m.record.value.as_deref().unwrap_or_default()).collect();
        if let Ok(batch) = self.decode_values(&values) {
            if batch.num_rows() == values.len() {
                return Ok((batch, (0..values.len()).collect()));
            }
        }
        // Some message is malformed: decode one at a time to find which.
        let mut batches = Vec::new();
        let mut kept = Vec::new();
        for (i, (m, v)) in messages.iter().zip(&values).enumerate() {
            match self.decode_values(std::slice::from_ref(v)) {
                Ok(b) if b.num_rows() == 1 => {
                    batches.push(b);
                    kept.push(i);
                }
                outcome => {
                    let n = self.malformed.0.fetch_add(1, Ordering::Relaxed) + 1;
                    let why = match outcome {
                        Err(e) => e.to_string(),
                        Ok(b) => format!("{} records in one message", b.num_rows()),
                    };
                    if n <= 10 || n.is_power_of_two() {
                        tracing::warn!("kafka source: skipped message {} of topic {} partition {} ({why}); {n} skipped so far", m.offset, self.topic, self.partition);
                    }
                }
            }
        }
        Ok((arrow::compute::concat_batches(&self.payload, &batches)?, kept))
    }

    fn decode_values(&self, values: &[&[u8]]) -> Result<RecordBatch> {
        let mut data = Vec::with_capacity(values.iter().map(|v| v.len() + 1).sum());
        for v in values {
            let v = v.strip_suffix(b"\n").unwrap_or(v);
            if v.contains(&b'\n') && matches!(self.encoding, Encoding::Csv { .. }) {
                return Err(user_err!(sqlstate::BAD_COPY_FILE_FORMAT, "a CSV message holds one record"));
            }
            data.extend_from_slice(v);
            data.push(b'\n');
        }
        let mut batches = Vec::new();
        match self.encoding {
            Encoding::Json => {
                let mut decoder = arrow::json::ReaderBuilder::new(self.payload.clone()).with_batch_size(values.len().max(1)).build_decoder()?;
                let mut at = 0;
                while at < data.len() {
                    let n = decoder.decode(&data[at..])?;
                    if n == 0 {
                        break;
                    }
                    at += n;
                    if let Some(b) = decoder.flush()? {
                        batches.push(b);
                    }
                }
                if let Some(b) = decoder.flush()? {
                    batches.push(b);
                }
            }
            Encoding::Csv { delimiter } => {
                let reader = arrow::csv::ReaderBuilder::new(self.payload.clone())
                    .with_header(false)
                    .with_delimiter(delimiter)
                    .with_batch_size(values.len().max(1))
                    .build(data.as_slice())?;
                for b in reader {
                    batches.push(b?);
                }
            }
        }
        Ok(arrow::compute::concat_batches(&self.payload, &batches)?)
    }
}

impl SplitReader for KafkaSplit {
    fn next_batch(&mut self, max_rows: usize) -> Result<Option<RecordBatch>> {
        if self.rx.is_none() {
            self.start();
        }
        self.receive()?;
        let n = self.pending.len().min(max_rows);
        let mut messages: Vec<RecordAndOffset> = self.pending.drain(..n).collect();
        if let Some(last) = messages.last() {
            self.next = Some(last.offset + 1);
        }
        // Tombstones (no value) delete a key in an upsert topic; deletes are not read yet, so
        // they are passed over (not counted as malformed).
        messages.retain(|m| m.record.value.is_some());
        Ok(Some(self.decode(&messages)?))
    }

    fn position(&self) -> Vec<u8> {
        // Not yet resolved from the startup mode: the mode decides again.
        self.next.map(|o| o.to_be_bytes().to_vec()).unwrap_or_default()
    }

    fn backlog(&self) -> Option<u64> {
        let (high, next) = (self.high?, self.next?);
        Some(high.saturating_sub(next).max(0) as u64)
    }

    fn ready_at(&self) -> Option<Instant> {
        match &self.rx {
            Some(rx) if self.pending.is_empty() && rx.is_empty() => Some(Instant::now() + POLL),
            _ => None,
        }
    }
}

impl Seekable for KafkaSplit {
    fn seek(&mut self, position: &[u8]) -> Result<()> {
        self.next = match position {
            [] => None,
            p => Some(p.try_into().map(i64::from_be_bytes).map_err(|_| internal_err!("corrupt kafka position ({} bytes)", p.len()))?),
        };
        if let Some(t) = self.task.take() {
            t.abort();
        }
        self.rx = None;
        self.pending.clear();
        Ok(())
    }
}
