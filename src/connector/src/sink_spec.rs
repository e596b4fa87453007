//! What a checked `CREATE SINK` says, shared by every sink target.

use arrow::datatypes::SchemaRef;

use crate::options::Options;

/// The message layout.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SinkFormat {
    Plain { force_append_only: bool },
    Upsert,
    Debezium,
}

/// Where a sink delivers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SinkConnector {
    Kafka,
    /// A PostgreSQL table (see the `postgres` module).
    Postgres,
    /// An Iceberg table (see the `iceberg` module).
    Iceberg,
    /// Nowhere: every change is accepted and dropped (RisingWave's `blackhole`, for measuring
    /// a pipeline without a target).
    Blackhole,
}

/// A checked sink definition.
#[derive(Debug, Clone)]
pub struct SinkSpec {
    pub options: Options,
    pub connector: SinkConnector,
    /// The Kafka topic, or the PostgreSQL or Iceberg table.
    pub topic: String,
    pub format: SinkFormat,
    /// Indices of the key columns in the sink's columns (empty for PLAIN).
    pub key: Vec<usize>,
    pub schema: SchemaRef,
    /// Names this sink (and no other, before or after it) in what it records in its target.
    pub uid: String,
}
