//! The Iceberg sink: `CREATE SINK ... WITH (connector = 'iceberg', type = 'append-only' |
//! 'upsert', warehouse.path = 'file:///...' | 's3://...', database.name, table.name,
//! catalog.type = 'storage' | 'sql', ...)`.
//!
//! Changes are staged in memory (bounded: a commit is forced at [`MAX_STAGED_BYTES`]) and
//! written as one Iceberg snapshot every `commit_checkpoint_interval` committed epochs: Parquet
//! data files, plus, for an upsert sink, one equality-delete file on the primary key holding
//! every key the snapshot touches (an insert replaces whatever older row had its key, a delete
//! removes it). Within a snapshot only the last change of each key is kept.
//!
//! **Exactly once.** Each snapshot's summary records the sink (`eddy.sink-id`) and the log
//! sequence number after its last change (`eddy.next-seq`). A restarted sink reads it back
//! ([`SinkTarget::resume`]) and continues after it; a commit whose outcome is unknown (a
//! timeout) is checked the same way before anything is staged again, so no change is committed
//! twice and none is skipped.

mod catalog;
mod storage;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, SortField};
use async_trait::async_trait;
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, EddyError, Epoch, Op, Result, StreamChunk};
use eddy_stream::SinkTarget;
use iceberg::spec::{
    DataFile, DataFileFormat, FormatVersion, ManifestContentType, ManifestFile, ManifestListWriter, ManifestWriterBuilder, NestedField, Operation, PrimitiveType, Schema, Snapshot, Summary,
    TableMetadata, TableMetadataBuilder, Type, MAIN_BRANCH,
};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::base_writer::equality_delete_writer::{EqualityDeleteFileWriterBuilder, EqualityDeleteWriterConfig};
use iceberg::writer::file_writer::location_generator::{DefaultFileNameGenerator, DefaultLocationGenerator};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::TableCreation;
use parquet::file::properties::WriterProperties;

use self::catalog::{Catalog, Current, TableRef};
use self::storage::Warehouse;
use crate::sink_spec::{SinkFormat, SinkSpec};

/// Option keys an Iceberg sink understands.
pub(crate) const ICEBERG_SINK_KEYS: &[&str] = &[
    "connector",
    "type",
    "primary_key",
    "force_append_only",
    "warehouse.path",
    "database.name",
    "table.name",
    "catalog.type",
    "catalog.uri",
    "catalog.name",
    "s3.endpoint",
    "s3.region",
    "s3.access.key",
    "s3.secret.key",
    "s3.path.style.access",
    "create_table_if_not_exists",
    "commit_checkpoint_interval",
];

/// Staged changes that force a commit (an estimate of their in-memory size).
pub const MAX_STAGED_BYTES: usize = 64 << 20;

/// Committed epochs between two Iceberg commits, by default (about one second at the default
/// 250 ms barrier interval).
const DEFAULT_COMMIT_INTERVAL: u64 = 4;

/// Manifests in a snapshot above which a commit folds them into one data and one delete manifest.
const MERGE_MANIFESTS: usize = 32;

/// Summary keys of the snapshots a sink commits.
const SINK_ID_KEY: &str = "eddy.sink-id";
const NEXT_SEQ_KEY: &str = "eddy.next-seq";

/// A checked Iceberg sink configuration.
#[derive(Debug, Clone)]
struct Config {
    warehouse: Warehouse,
    table: TableRef,
    create: bool,
    interval: u64,
}

/// Checks an Iceberg sink's options (unknown keys refused); its format (`type`).
pub(crate) fn check_options(options: &crate::Options, force_append_only: bool) -> Result<SinkFormat> {
    for key in options.0.keys() {
        if !ICEBERG_SINK_KEYS.contains(&key.as_str()) {
            return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "unknown iceberg sink option '{key}'"));
        }
    }
    config(options)?;
    match options.get("type").map(str::to_ascii_lowercase).as_deref() {
        Some("append-only") => Ok(SinkFormat::Plain { force_append_only }),
        Some("upsert") => Ok(SinkFormat::Upsert),
        None => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "iceberg sink option 'type' is required ('append-only' or 'upsert')")),
        Some(other) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "iceberg sink option 'type' must be 'append-only' or 'upsert', not '{other}'")),
    }
}

fn config(options: &crate::Options) -> Result<Config> {
    let required = |k: &str| options.get(k).filter(|v| !v.trim().is_empty()).ok_or_else(|| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "iceberg sink option '{k}' is required"));
    let s3: BTreeMap<String, String> = options.0.iter().filter(|(k, _)| k.starts_with("s3.")).map(|(k, v)| (k.clone(), v.clone())).collect();
    let (warehouse, url) = Warehouse::open(required("warehouse.path")?, s3)?;
    let (namespace, name) = (required("database.name")?.to_string(), required("table.name")?.to_string());
    let catalog = Catalog::from_options(options.get("catalog.type"), options.get("catalog.uri"), options.get("catalog.name"))?;
    let interval: u64 = options.number("commit_checkpoint_interval", DEFAULT_COMMIT_INTERVAL)?;
    if interval == 0 {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "iceberg sink option 'commit_checkpoint_interval' must be at least 1"));
    }
    let location = format!("{url}/{namespace}/{name}");
    Ok(Config { warehouse, table: TableRef { catalog, namespace, name, location }, create: options.flag("create_table_if_not_exists", false)?, interval })
}

/// The Iceberg type of a sink column, for a table the sink creates.
fn iceberg_type(t: &DataType) -> Option<PrimitiveType> {
    Some(match t {
        DataType::Boolean => PrimitiveType::Boolean,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => PrimitiveType::Int,
        DataType::Int64 | DataType::UInt32 => PrimitiveType::Long,
        DataType::Float16 | DataType::Float32 => PrimitiveType::Float,
        DataType::Float64 => PrimitiveType::Double,
        DataType::Decimal128(p, s) if *p <= 38 && *s >= 0 => PrimitiveType::Decimal { precision: *p as u32, scale: *s as u32 },
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => PrimitiveType::String,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => PrimitiveType::Binary,
        DataType::Date32 | DataType::Date64 => PrimitiveType::Date,
        DataType::Time32(_) | DataType::Time64(_) => PrimitiveType::Time,
        DataType::Timestamp(_, None) => PrimitiveType::Timestamp,
        DataType::Timestamp(_, Some(_)) => PrimitiveType::Timestamptz,
        _ => return None,
    })
}

/// The schema of a table created for `spec`: its columns, the key ones required and the
/// table's identifier fields.
fn table_schema(spec: &SinkSpec) -> Result<Schema> {
    let mut fields = Vec::new();
    for (i, f) in spec.schema.fields().iter().enumerate() {
        let t = iceberg_type(f.data_type()).ok_or_else(|| not_supported!("iceberg sinks cannot store column \"{}\" of type {}", f.name(), f.data_type()))?;
        let id = i as i32 + 1;
        let field = if spec.key.contains(&i) { NestedField::required(id, f.name(), Type::Primitive(t)) } else { NestedField::optional(id, f.name(), Type::Primitive(t)) };
        fields.push(Arc::new(field));
    }
    Schema::builder()
        .with_schema_id(0)
        .with_fields(fields)
        .with_identifier_field_ids(spec.key.iter().map(|k| *k as i32 + 1))
        .build()
        .map_err(iceberg_error)
}

fn iceberg_error(e: iceberg::Error) -> EddyError {
    EddyError::external(format!("iceberg: {e}"))
}

/// The table's columns, each with the sink column it takes its values from.
fn column_map(spec: &SinkSpec, metadata: &TableMetadata) -> Result<(SchemaRef, Vec<Option<usize>>)> {
    let schema = metadata.current_schema();
    let arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema).map_err(iceberg_error)?);
    let mut map = Vec::new();
    for f in arrow_schema.fields() {
        let source = spec.schema.fields().iter().position(|s| s.name() == f.name() || s.name().eq_ignore_ascii_case(f.name()));
        if source.is_none() && !f.is_nullable() {
            return Err(user_err!(sqlstate::UNDEFINED_COLUMN, "iceberg table column \"{}\" is required but the sink has no such column", f.name()));
        }
        if let Some(s) = source {
            let from = spec.schema.field(s).data_type();
            if !arrow::compute::can_cast_types(from, f.data_type()) {
                return Err(user_err!(sqlstate::DATATYPE_MISMATCH, "sink column \"{}\" of type {from} cannot be written to iceberg column of type {}", f.name(), f.data_type()));
            }
        }
        map.push(source);
    }
    for f in spec.schema.fields() {
        if !arrow_schema.fields().iter().any(|t| t.name() == f.name() || t.name().eq_ignore_ascii_case(f.name())) {
            return Err(user_err!(sqlstate::UNDEFINED_COLUMN, "sink column \"{}\" is not a column of the iceberg table", f.name()));
        }
    }
    Ok((arrow_schema, map))
}

/// Checks the sink's table (creating it with `create_table_if_not_exists = 'true'`).
pub(crate) async fn prepare(spec: &SinkSpec) -> Result<()> {
    let cfg = config(&spec.options)?;
    let t = &cfg.table;
    let current = match t.load(&cfg.warehouse).await? {
        Some(c) => c,
        None if cfg.create => create_table(spec, &cfg).await?,
        None => {
            return Err(user_err!(
                sqlstate::UNDEFINED_TABLE,
                "iceberg table {}.{} does not exist in {} (set create_table_if_not_exists = 'true' to create it)",
                t.namespace,
                t.name,
                t.location
            ))
        }
    };
    column_map(spec, &current.metadata)?;
    if spec.format == SinkFormat::Upsert {
        let schema = current.metadata.current_schema();
        for k in &spec.key {
            let name = spec.schema.field(*k).name();
            let Some(f) = schema.as_struct().fields().iter().find(|f| f.name.eq_ignore_ascii_case(name)) else { continue };
            if matches!(*f.field_type, Type::Primitive(PrimitiveType::Float | PrimitiveType::Double)) {
                return Err(not_supported!("an iceberg upsert sink cannot key on column \"{name}\" of a floating-point type"));
            }
        }
    }
    Ok(())
}

async fn create_table(spec: &SinkSpec, cfg: &Config) -> Result<Current> {
    let t = &cfg.table;
    let creation = TableCreation::builder()
        .name(t.name.clone())
        .location(t.location.clone())
        .schema(table_schema(spec)?)
        .properties([("write.format.default".to_string(), "parquet".to_string())])
        .format_version(FormatVersion::V2)
        .build();
    let metadata = TableMetadataBuilder::from_table_creation(creation).and_then(|b| b.build()).map_err(iceberg_error)?.metadata;
    match t.commit(&cfg.warehouse, None, &metadata).await {
        Ok(c) => Ok(c),
        // Created meanwhile by someone else: use theirs.
        Err(e) => t.load(&cfg.warehouse).await?.ok_or(e),
    }
}

/// The sequence number after the last change sink `id` committed to the table (`None`: it
/// committed nothing yet), from the newest of its snapshots on the main branch.
fn committed_seq(metadata: &TableMetadata, id: &str) -> Option<u64> {
    let mut snapshot = metadata.current_snapshot().cloned();
    while let Some(s) = snapshot {
        let props = &s.summary().additional_properties;
        if props.get(SINK_ID_KEY).map(String::as_str) == Some(id) {
            return props.get(NEXT_SEQ_KEY).and_then(|v| v.parse().ok());
        }
        snapshot = s.parent_snapshot_id().and_then(|p| metadata.snapshot_by_id(p).cloned());
    }
    None
}

/// Changes staged for the next commit.
#[derive(Default)]
struct Staged {
    /// Rows in the table's columns: inserted ones, and for an upsert sink deleted ones (whose
    /// key goes to the delete file).
    batches: Vec<RecordBatch>,
    /// Upsert: each key's last change, `(batch, row, is an insert)`.
    keys: HashMap<Vec<u8>, (usize, usize, bool)>,
    /// Append-only: the rows to insert, `(batch, row)`.
    rows: Vec<(usize, usize)>,
    bytes: usize,
    /// The log sequence number after the last staged change.
    end: u64,
    /// The first epoch seen with changes staged.
    since: Option<Epoch>,
}

/// Writes a sink's changes to its Iceberg table.
pub struct IcebergSink {
    spec: SinkSpec,
    cfg: Config,
    /// The table as of its last load or commit (`None`: to be loaded).
    current: Option<Current>,
    /// The table's columns and the sink column of each.
    columns: Option<(SchemaRef, Vec<Option<usize>>)>,
    /// What the table holds of this sink: the sequence number after its last change.
    committed: u64,
    staged: Staged,
    /// Upsert: the key's encoder and the key columns (in the table's columns), once loaded.
    keys: Option<(RowConverter, Vec<usize>)>,
}

impl IcebergSink {
    /// A sink for `spec` (reads its table when it first delivers).
    pub fn new(spec: SinkSpec) -> Result<Self> {
        let cfg = config(&spec.options)?;
        Ok(Self { spec, cfg, current: None, columns: None, committed: 0, staged: Staged::default(), keys: None })
    }

    /// Loads the table and what it holds of this sink.
    async fn load(&mut self) -> Result<()> {
        if self.current.is_some() {
            return Ok(());
        }
        let t = &self.cfg.table;
        let current = t.load(&self.cfg.warehouse).await?.ok_or_else(|| EddyError::external(format!("iceberg table {}.{} no longer exists", t.namespace, t.name)))?;
        let (schema, map) = column_map(&self.spec, &current.metadata)?;
        if self.spec.format == SinkFormat::Upsert {
            let key_cols: Vec<usize> = self.spec.key.iter().map(|k| map.iter().position(|m| *m == Some(*k)).ok_or_else(|| EddyError::external("a key column is not in the iceberg table"))).collect::<Result<_>>()?;
            let conv = RowConverter::new(key_cols.iter().map(|k| SortField::new(schema.field(*k).data_type().clone())).collect())?;
            self.keys = Some((conv, key_cols));
        }
        self.columns = Some((schema, map));
        self.committed = self.committed.max(committed_seq(&current.metadata, &self.spec.uid).unwrap_or(0));
        self.current = Some(current);
        Ok(())
    }

    /// `batch` in the table's columns, without the rows that lack a value for a required
    /// column (logged and passed over: they can never be written); the index in `batch` of
    /// each row kept.
    fn table_rows(&self, batch: &RecordBatch) -> Result<(RecordBatch, Vec<usize>)> {
        let (schema, map) = self.columns.as_ref().expect("loaded");
        let cols = schema
            .fields()
            .iter()
            .zip(map)
            .map(|(f, m)| -> Result<ArrayRef> {
                Ok(match m {
                    None => new_null_array(f.data_type(), batch.num_rows()),
                    Some(i) if batch.column(*i).data_type() == f.data_type() => batch.column(*i).clone(),
                    Some(i) => arrow::compute::cast(batch.column(*i), f.data_type())?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut keep = vec![true; batch.num_rows()];
        for (f, c) in schema.fields().iter().zip(&cols) {
            if !f.is_nullable() && c.null_count() > 0 {
                for (i, k) in keep.iter_mut().enumerate() {
                    *k &= c.is_valid(i);
                }
            }
        }
        let kept: Vec<usize> = (0..keep.len()).filter(|i| keep[*i]).collect();
        if kept.len() == keep.len() {
            return Ok((RecordBatch::try_new(schema.clone(), cols)?, kept));
        }
        tracing::warn!("iceberg sink into {}.{}: {} changes with NULL in a required column were passed over", self.cfg.table.namespace, self.cfg.table.name, keep.len() - kept.len());
        let mask = arrow::array::BooleanArray::from(keep);
        let cols = cols.iter().map(|c| arrow::compute::filter(c, &mask)).collect::<std::result::Result<Vec<_>, _>>()?;
        Ok((RecordBatch::try_new(schema.clone(), cols)?, kept))
    }

    /// Writes the staged changes as one snapshot.
    async fn commit(&mut self) -> Result<()> {
        self.load().await?;
        let staged = std::mem::take(&mut self.staged);
        let current = self.current.take().expect("loaded");
        match self.write_snapshot(&current, &staged).await {
            Ok(c) => {
                self.committed = staged.end;
                self.current = Some(c);
                Ok(())
            }
            Err(e) => {
                // The outcome may be unknown: reload before staging again.
                self.columns = None;
                Err(e)
            }
        }
    }

    async fn write_snapshot(&self, current: &Current, staged: &Staged) -> Result<Current> {
        let meta = &current.metadata;
        let wh = &self.cfg.warehouse;
        let file_io = wh.file_io();
        let schema = meta.current_schema().clone();
        let snapshot_id = loop {
            let id = (rand::random::<u64>() >> 1) as i64;
            if id != 0 && meta.snapshot_by_id(id).is_none() {
                break id;
            }
        };
        let prefix = format!("eddy-{}-{snapshot_id}", self.spec.uid);
        let location = DefaultLocationGenerator::new(meta).map_err(iceberg_error)?;
        let props = || WriterProperties::builder().set_compression(parquet::basic::Compression::SNAPPY).build();
        let interleave = |at: &mut dyn Iterator<Item = (usize, usize)>| -> Result<Option<RecordBatch>> {
            let at: Vec<(usize, usize)> = at.collect();
            if at.is_empty() {
                return Ok(None);
            }
            let all = staged.batches.first().expect("staged rows").schema();
            let arrays = (0..all.fields().len())
                .map(|c| {
                    let parts: Vec<&dyn Array> = staged.batches.iter().map(|b| b.column(c).as_ref()).collect();
                    arrow::compute::interleave(&parts, &at)
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(Some(RecordBatch::try_new(all, arrays)?))
        };
        let inserts = match &self.keys {
            Some(_) => interleave(&mut staged.keys.values().filter(|(_, _, ins)| *ins).map(|(b, r, _)| (*b, *r)))?,
            None => interleave(&mut staged.rows.iter().copied())?,
        };
        let mut data_files: Vec<DataFile> = Vec::new();
        if let Some(rows) = inserts {
            let rolling = RollingFileWriterBuilder::new_with_default_file_size(
                ParquetWriterBuilder::new(props(), schema.clone()),
                file_io.clone(),
                location.clone(),
                DefaultFileNameGenerator::new(prefix.clone(), Some("data".into()), DataFileFormat::Parquet),
            );
            let mut w = DataFileWriterBuilder::new(rolling).build(None).await.map_err(iceberg_error)?;
            w.write(rows).await.map_err(iceberg_error)?;
            data_files.extend(w.close().await.map_err(iceberg_error)?);
        }
        let mut delete_files: Vec<DataFile> = Vec::new();
        if let Some((_, key_cols)) = self.keys.as_ref().filter(|_| !staged.keys.is_empty()) {
            let rows = interleave(&mut staged.keys.values().map(|(b, r, _)| (*b, *r)))?.expect("keys staged");
            // The table's columns are the current schema's fields, in order.
            let fields = schema.as_struct().fields();
            let key_ids: Vec<i32> = key_cols.iter().map(|c| fields[*c].id).collect();
            let config = EqualityDeleteWriterConfig::new(key_ids, schema.clone()).map_err(iceberg_error)?;
            let delete_schema = Arc::new(iceberg::arrow::arrow_schema_to_schema(config.projected_arrow_schema_ref()).map_err(iceberg_error)?);
            let rolling = RollingFileWriterBuilder::new_with_default_file_size(
                ParquetWriterBuilder::new(props(), delete_schema),
                file_io.clone(),
                location.clone(),
                DefaultFileNameGenerator::new(prefix.clone(), Some("eq-delete".into()), DataFileFormat::Parquet),
            );
            let mut w = EqualityDeleteFileWriterBuilder::new(rolling, config).build(None).await.map_err(iceberg_error)?;
            w.write(rows).await.map_err(iceberg_error)?;
            delete_files.extend(w.close().await.map_err(iceberg_error)?);
        }

        // Manifests: the current snapshot's, plus one for the new data files and one for the
        // new delete files.
        let sequence = meta.next_sequence_number();
        let parent = meta.current_snapshot_id();
        let mut manifests = Vec::new();
        if let Some(s) = meta.current_snapshot() {
            let table = iceberg::table::Table::builder()
                .metadata(meta.clone())
                .identifier(iceberg::TableIdent::from_strs([&self.cfg.table.namespace, &self.cfg.table.name]).map_err(iceberg_error)?)
                .file_io(file_io.clone())
                .metadata_location(current.location.clone())
                .runtime(iceberg::Runtime::try_current().map_err(iceberg_error)?)
                .build()
                .map_err(iceberg_error)?;
            manifests.extend(table.manifest_list_reader(s).load().await.map_err(iceberg_error)?.entries().iter().cloned());
        }
        let metadata_dir = format!("{}/metadata", meta.location());
        let spec = meta.default_partition_spec().as_ref().clone();
        if manifests.len() > MERGE_MANIFESTS {
            // Each commit adds a manifest or two: fold them, or the manifest list (read and
            // rewritten by every commit, and by every reader) grows without bound.
            let mut merged = Vec::new();
            for (n, content) in [(2, ManifestContentType::Data), (3, ManifestContentType::Deletes)] {
                let group: Vec<&ManifestFile> = manifests.iter().filter(|m| m.content == content).collect();
                if group.is_empty() {
                    continue;
                }
                let out = file_io.new_output(format!("{metadata_dir}/{prefix}-m{n}.avro")).map_err(iceberg_error)?;
                let builder = ManifestWriterBuilder::new(out, Some(snapshot_id), schema.clone(), spec.clone());
                let mut w = if content == ManifestContentType::Deletes { builder.build_v2_deletes() } else { builder.build_v2_data() };
                for m in group {
                    let manifest = m.load_manifest(&file_io).await.map_err(iceberg_error)?;
                    for e in manifest.entries().iter().filter(|e| e.is_alive()) {
                        let seq = e.sequence_number().unwrap_or(m.sequence_number);
                        w.add_existing_file(e.data_file().clone(), e.snapshot_id().unwrap_or(m.added_snapshot_id), seq, Some(e.file_sequence_number.unwrap_or(seq)))
                            .map_err(iceberg_error)?;
                    }
                }
                merged.push(w.write_manifest_file().await.map_err(iceberg_error)?);
            }
            manifests = merged;
        }
        for (n, (files, deletes)) in [(&data_files, false), (&delete_files, true)].into_iter().enumerate() {
            if files.is_empty() {
                continue;
            }
            let out = file_io.new_output(format!("{metadata_dir}/{prefix}-m{n}.avro")).map_err(iceberg_error)?;
            let builder = ManifestWriterBuilder::new(out, Some(snapshot_id), schema.clone(), spec.clone());
            let mut w = if deletes { builder.build_v2_deletes() } else { builder.build_v2_data() };
            for f in files {
                w.add_file(f.clone(), sequence).map_err(iceberg_error)?;
            }
            manifests.push(w.write_manifest_file().await.map_err(iceberg_error)?);
        }
        let list_path = format!("{metadata_dir}/snap-{snapshot_id}-1-{prefix}.avro");
        let mut list = ManifestListWriter::v2(file_io.new_output(&list_path).map_err(iceberg_error)?.writer().await.map_err(iceberg_error)?, snapshot_id, parent, sequence);
        list.add_manifests(manifests.into_iter()).map_err(iceberg_error)?;
        list.close().await.map_err(iceberg_error)?;

        let added: u64 = data_files.iter().map(DataFile::record_count).sum();
        let deleted: u64 = delete_files.iter().map(DataFile::record_count).sum();
        let mut summary = HashMap::from([
            (SINK_ID_KEY.to_string(), self.spec.uid.clone()),
            (NEXT_SEQ_KEY.to_string(), staged.end.to_string()),
            ("added-data-files".to_string(), data_files.len().to_string()),
            ("added-records".to_string(), added.to_string()),
        ]);
        if !delete_files.is_empty() {
            summary.insert("added-delete-files".to_string(), delete_files.len().to_string());
            summary.insert("added-equality-delete-files".to_string(), delete_files.len().to_string());
            summary.insert("added-equality-deletes".to_string(), deleted.to_string());
        }
        let operation = if delete_files.is_empty() { Operation::Append } else { Operation::Overwrite };
        let snapshot = Snapshot::builder()
            .with_snapshot_id(snapshot_id)
            .with_parent_snapshot_id(parent)
            .with_sequence_number(sequence)
            .with_timestamp_ms(chrono::Utc::now().timestamp_millis())
            .with_manifest_list(list_path)
            .with_summary(Summary { operation, additional_properties: summary })
            .with_schema_id(meta.current_schema_id())
            .build();
        let next = TableMetadataBuilder::new_from_metadata(meta.clone(), Some(current.location.clone()))
            .set_branch_snapshot(snapshot, MAIN_BRANCH)
            .and_then(|b| b.build())
            .map_err(iceberg_error)?
            .metadata;
        self.cfg.table.commit(wh, Some(current), &next).await
    }

    /// Stages `chunk` (the log's rows `from..`): rows already in the table are passed over.
    fn stage(&mut self, chunk: &StreamChunk, from: u64) -> Result<()> {
        let skip = self.committed.saturating_sub(from) as usize;
        let n = chunk.ops.len();
        if skip >= n {
            return Ok(());
        }
        let (rows, kept) = self.table_rows(&chunk.batch.slice(skip, n - skip))?;
        let ops = &chunk.ops[skip..];
        let b = self.staged.batches.len();
        let mut any = false;
        match &self.keys {
            Some((conv, key_cols)) => {
                let keys = conv.convert_columns(&key_cols.iter().map(|k| rows.column(*k).clone()).collect::<Vec<_>>())?;
                for (j, &i) in kept.iter().enumerate() {
                    let insert = matches!(ops[i], Op::Insert | Op::UpdateInsert);
                    self.staged.keys.insert(keys.row(j).as_ref().to_vec(), (b, j, insert));
                    any = true;
                }
            }
            None => {
                for (j, &i) in kept.iter().enumerate() {
                    if matches!(ops[i], Op::Insert | Op::UpdateInsert) {
                        self.staged.rows.push((b, j));
                        any = true;
                    }
                }
            }
        }
        if any {
            self.staged.bytes += rows.get_array_memory_size();
            self.staged.batches.push(rows);
        }
        Ok(())
    }

    /// Whether anything is staged for the next commit.
    fn has_staged(&self) -> bool {
        self.staged.end > self.committed
    }
}

#[async_trait]
impl SinkTarget for IcebergSink {
    async fn resume(&mut self) -> Result<Option<u64>> {
        self.load().await?;
        Ok(Some(self.committed))
    }

    async fn deliver(&mut self, chunk: &StreamChunk, seqs: std::ops::Range<u64>) -> Result<Option<u64>> {
        if self.columns.is_none() {
            self.current = None;
            self.load().await?;
        }
        if seqs.end <= self.committed && !self.has_staged() {
            return Ok(Some(seqs.end));
        }
        self.stage(chunk, seqs.start)?;
        self.staged.end = seqs.end;
        if self.staged.bytes >= MAX_STAGED_BYTES {
            self.commit().await?;
            return Ok(Some(self.committed));
        }
        Ok(None)
    }

    async fn flush(&mut self, epoch: Epoch) -> Result<Option<u64>> {
        if !self.has_staged() {
            return Ok(None);
        }
        let since = *self.staged.since.get_or_insert(epoch);
        let since = if epoch < since { *self.staged.since.insert(epoch) } else { since };
        if epoch.0 + 1 < since.0 + self.cfg.interval {
            return Ok(None);
        }
        if self.staged.batches.is_empty() {
            // Only changes an append-only table drops, or ones it already holds: nothing to
            // write, and the log may move on (a restart starts after its first row left).
            self.committed = self.staged.end;
            self.staged = Staged::default();
            return Ok(Some(self.committed));
        }
        self.commit().await?;
        Ok(Some(self.committed))
    }

    fn discard(&mut self) {
        self.staged = Staged::default();
        self.columns = None;
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::{Field, Schema as ArrowSchema};

    use super::*;

    fn spec(dir: &std::path::Path, kind: &str, uid: &str) -> SinkSpec {
        let schema: SchemaRef = Arc::new(ArrowSchema::new(vec![Field::new("id", DataType::Int32, false), Field::new("v", DataType::Utf8, true)]));
        let warehouse = format!("file://{}", dir.display());
        let pairs = [
            ("connector", "iceberg"),
            ("type", kind),
            ("primary_key", "id"),
            ("force_append_only", "true"),
            ("warehouse.path", warehouse.as_str()),
            ("database.name", "db"),
            ("table.name", kind),
            ("create_table_if_not_exists", "true"),
            ("commit_checkpoint_interval", "2"),
        ];
        let options = crate::Options::new(pairs.map(|(k, v)| (k.to_string(), v.to_string())));
        crate::sink::check(&options, &schema, None, false, uid.into()).unwrap()
    }

    fn chunk(rows: &[(Op, i32, Option<&str>)]) -> StreamChunk {
        let schema = Arc::new(ArrowSchema::new(vec![Field::new("id", DataType::Int32, false), Field::new("v", DataType::Utf8, true)]));
        let ids = Int32Array::from_iter_values(rows.iter().map(|r| r.1));
        let vs = StringArray::from_iter(rows.iter().map(|r| r.2));
        StreamChunk::try_new(RecordBatch::try_new(schema, vec![Arc::new(ids), Arc::new(vs)]).unwrap(), rows.iter().map(|r| r.0).collect()).unwrap()
    }

    fn temp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("eddy-iceberg-{name}-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    async fn table(spec: &SinkSpec) -> TableMetadata {
        let cfg = config(&spec.options).unwrap();
        cfg.table.load(&cfg.warehouse).await.unwrap().expect("table exists").metadata
    }

    #[tokio::test]
    async fn a_snapshot_keeps_each_keys_last_change_and_a_restarted_sink_commits_nothing_twice() {
        let dir = temp("upsert");
        let s = spec(&dir, "upsert", "first");
        prepare(&s).await.unwrap();
        let mut sink = IcebergSink::new(s.clone()).unwrap();
        assert_eq!(sink.resume().await.unwrap(), Some(0));
        let changes = chunk(&[(Op::Insert, 1, Some("a")), (Op::Insert, 2, Some("b")), (Op::Delete, 1, Some("a")), (Op::Insert, 1, Some("c")), (Op::Delete, 2, Some("b"))]);
        assert_eq!(sink.deliver(&changes, 0..5).await.unwrap(), None, "staged, not yet durable");
        assert_eq!(sink.flush(Epoch(7)).await.unwrap(), None, "one epoch of two");
        assert_eq!(sink.flush(Epoch(8)).await.unwrap(), Some(5));
        let meta = table(&s).await;
        let summary = &meta.current_snapshot().unwrap().summary().additional_properties;
        assert_eq!(summary.get("added-records").map(String::as_str), Some("1"), "only key 1's last row: {summary:?}");
        assert_eq!(summary.get("added-equality-deletes").map(String::as_str), Some("2"), "{summary:?}");
        assert_eq!(summary.get(NEXT_SEQ_KEY).map(String::as_str), Some("5"));

        // After a crash the log offers changes 3.. again: the table already holds them.
        let mut again = IcebergSink::new(s.clone()).unwrap();
        assert_eq!(again.resume().await.unwrap(), Some(5));
        assert_eq!(again.deliver(&chunk(&[(Op::Insert, 1, Some("c")), (Op::Delete, 2, Some("b"))]), 3..5).await.unwrap(), Some(5));
        // A chunk straddling the commit stages only its new part.
        let straddling = chunk(&[(Op::Delete, 2, Some("b")), (Op::Insert, 3, Some("d"))]);
        assert_eq!(again.deliver(&straddling, 4..6).await.unwrap(), None);
        assert_eq!(again.flush(Epoch(1)).await.unwrap(), None);
        assert_eq!(again.flush(Epoch(2)).await.unwrap(), Some(6));
        let meta = table(&s).await;
        assert_eq!(meta.snapshots().len(), 2);
        let summary = &meta.current_snapshot().unwrap().summary().additional_properties;
        assert_eq!((summary.get("added-records").map(String::as_str), summary.get("added-equality-deletes").map(String::as_str)), (Some("1"), Some("1")));

        // A sink created anew under the same table is not taken for the old one.
        let mut other = IcebergSink::new(spec(&dir, "upsert", "second")).unwrap();
        assert_eq!(other.resume().await.unwrap(), Some(0));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn append_only_sinks_write_inserted_rows_and_move_past_dropped_deletes() {
        let dir = temp("append");
        let s = spec(&dir, "append-only", "a");
        prepare(&s).await.unwrap();
        let mut sink = IcebergSink::new(s.clone()).unwrap();
        assert_eq!(sink.resume().await.unwrap(), Some(0));
        assert_eq!(sink.deliver(&chunk(&[(Op::Insert, 1, None), (Op::Insert, 2, Some("b")), (Op::Delete, 1, None)]), 0..3).await.unwrap(), None);
        assert_eq!(sink.flush(Epoch(1)).await.unwrap(), None);
        assert_eq!(sink.flush(Epoch(2)).await.unwrap(), Some(3));
        // Only a delete: nothing to write, yet the position moves on.
        assert_eq!(sink.deliver(&chunk(&[(Op::Delete, 2, Some("b"))]), 3..4).await.unwrap(), None);
        assert_eq!(sink.flush(Epoch(3)).await.unwrap(), None);
        assert_eq!(sink.flush(Epoch(4)).await.unwrap(), Some(4));
        let meta = table(&s).await;
        assert_eq!(meta.snapshots().len(), 1);
        let summary = &meta.current_snapshot().unwrap().summary().additional_properties;
        assert_eq!(summary.get("added-records").map(String::as_str), Some("2"));
        assert!(!summary.contains_key("added-delete-files"));
        // A table whose columns do not fit is refused at CREATE SINK.
        let mut narrow = s.clone();
        narrow.schema = Arc::new(ArrowSchema::new(vec![Field::new("id", DataType::Int32, false), Field::new("w", DataType::Utf8, true)]));
        assert_eq!(prepare(&narrow).await.unwrap_err().sqlstate, sqlstate::UNDEFINED_COLUMN);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn many_commits_fold_their_manifests_and_keep_every_row() {
        let dir = temp("fold");
        let mut s = spec(&dir, "append-only", "f");
        s.options.0.insert("commit_checkpoint_interval".into(), "1".into());
        prepare(&s).await.unwrap();
        let mut sink = IcebergSink::new(s.clone()).unwrap();
        assert_eq!(sink.resume().await.unwrap(), Some(0));
        let commits = MERGE_MANIFESTS as u64 + 8;
        for i in 0..commits {
            sink.deliver(&chunk(&[(Op::Insert, i as i32, Some("x"))]), i..i + 1).await.unwrap();
            assert_eq!(sink.flush(Epoch(i + 1)).await.unwrap(), Some(i + 1));
        }
        let meta = table(&s).await;
        let cfg = config(&s.options).unwrap();
        let file_io = cfg.warehouse.file_io();
        let list = iceberg::table::Table::builder()
            .metadata(meta.clone())
            .identifier(iceberg::TableIdent::from_strs(["db", "append-only"]).unwrap())
            .file_io(file_io.clone())
            .runtime(iceberg::Runtime::try_current().unwrap())
            .build()
            .unwrap()
            .manifest_list_reader(meta.current_snapshot().unwrap())
            .load()
            .await
            .unwrap();
        assert!(list.entries().len() <= MERGE_MANIFESTS + 1, "{} manifests", list.entries().len());
        let mut rows = 0;
        for m in list.entries() {
            rows += m.load_manifest(&file_io).await.unwrap().entries().iter().filter(|e| e.is_alive()).map(|e| e.record_count()).sum::<u64>();
        }
        assert_eq!(rows, commits, "every committed row is still in the table");
        let _ = std::fs::remove_dir_all(dir);
    }
}
