//! Sources (and later sinks) with their WITH-option parsing (see `docs/architecture.md`).
//!
//! A source is declared with RisingWave's syntax, `CREATE SOURCE s (cols) WITH (connector =
//! '...', ...)`; each materialized view reading it runs its own `eddy_stream::SourceReader`
//! over the splits built here. Every split is deterministic from its position (a generator's
//! next event number), so a reader restarted from a committed position replays nothing twice
//! and skips nothing.
//!
//! Connectors: [`datagen`] (sequence and random fields, a rate), [`nexmark`] (the Nexmark
//! benchmark's person/auction/bid streams), [`file`] (CSV or JSON lines from local files) and
//! [`kafka`] (a topic's partitions). Sinks: [`sink`] (Kafka), [`postgres`], [`iceberg`].

pub mod datagen;
pub mod file;
pub mod iceberg;
pub mod kafka;
pub mod nexmark;
pub mod options;
pub mod postgres;
pub mod sink;
pub mod sink_spec;
mod random;

use arrow::datatypes::SchemaRef;
use eddy_common::{user_err, Result};
use eddy_stream::{ReaderPosition, SplitReader};

pub use options::Options;

/// Checks a source's options against its columns (at `CREATE SOURCE`).
pub async fn validate(options: &Options, schema: &SchemaRef) -> Result<()> {
    open_splits(options, schema, None).await.map(|_| ())
}

/// The splits of a source with `options` and user columns `schema`, positioned at `position`
/// (`None`: the beginning).
pub async fn open_splits(options: &Options, schema: &SchemaRef, position: Option<&ReaderPosition>) -> Result<Vec<Box<dyn SplitReader>>> {
    let connector = options.required("connector")?.to_ascii_lowercase();
    let splits = match connector.as_str() {
        "datagen" => datagen::splits(options, schema)?,
        "nexmark" => nexmark::splits(options, schema)?,
        "posix_fs" | "file" => file::splits(options, schema)?,
        "kafka" => kafka::splits(options, schema, position.map(|p| p.splits.len())).await?,
        other => {
            return Err(user_err!(
                eddy_common::error::sqlstate::FEATURE_NOT_SUPPORTED,
                "connector \"{other}\" is not supported (supported: datagen, nexmark, posix_fs, kafka)"
            ))
        }
    };
    let mut splits = splits;
    if let Some(p) = position {
        if p.splits.len() != splits.len() {
            return Err(eddy_common::internal_err!("a source position has {} splits, the source {}", p.splits.len(), splits.len()));
        }
        for (s, pos) in splits.iter_mut().zip(&p.splits) {
            s.seek(pos)?;
        }
    }
    Ok(splits.into_iter().map(|s| s as Box<dyn SplitReader>).collect())
}

/// A split that can be positioned.
pub(crate) trait Seekable: SplitReader {
    /// Moves to `position` (one returned by `SplitReader::position`).
    fn seek(&mut self, position: &[u8]) -> Result<()>;
}

/// A `u64` position (the next event or row number of a split).
pub(crate) fn decode_u64(position: &[u8]) -> Result<u64> {
    position
        .try_into()
        .map(u64::from_be_bytes)
        .map_err(|_| eddy_common::internal_err!("corrupt source position ({} bytes)", position.len()))
}
