//! Row and key encoding for the state store (docs/architecture.md, "Keys").
//!
//! A key is `table_id (u32 BE) | vnode (u16 BE) | memcomparable pk`, the pk encoded with
//! `arrow-row` so byte order equals SQL order. `vnode = hash(pk bytes) % VNODE_COUNT`. A value
//! is the whole row, also `arrow-row` encoded, so decoding a scan back into a `RecordBatch` is
//! one vectorized call.
//!
//! The encoding is deterministic for a given arrow version; Eddy pins arrow in the workspace
//! because a change of `arrow-row`'s format would need a migration of stored state.

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows, SortField};

use crate::Result;

/// Number of virtual nodes a table's key space is split into.
pub const VNODE_COUNT: u16 = 256;

/// Bytes of a key before the pk: table id and vnode.
pub const KEY_PREFIX_LEN: usize = 6;

/// The 4-byte key prefix of every entry of `table_id`.
pub fn table_prefix(table_id: u32) -> [u8; 4] {
    table_id.to_be_bytes()
}

/// The vnode of an encoded distribution key. FNV-1a: stable across versions and platforms,
/// which matters because vnodes are part of stored keys.
pub fn vnode_of(dist_key: &[u8]) -> u16 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in dist_key {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(VNODE_COUNT)) as u16
}

/// The actor among `n` parallel ones that owns `vnode`: vnodes are split into `n` contiguous
/// ranges (see [`vnodes_of`]), so moving ownership moves whole ranges, never single keys.
pub fn owner_of(vnode: u16, n: usize) -> usize {
    usize::from(vnode) * n / usize::from(VNODE_COUNT)
}

/// The vnodes actor `i` of `n` owns (the inverse of [`owner_of`]).
pub fn vnodes_of(i: usize, n: usize) -> std::ops::Range<u16> {
    let at = |i: usize| (i * usize::from(VNODE_COUNT)).div_ceil(n) as u16;
    at(i)..at(i + 1)
}

/// Full state-store key for one row.
pub fn make_key(table_id: u32, pk: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(KEY_PREFIX_LEN + pk.len());
    key.extend_from_slice(&table_prefix(table_id));
    key.extend_from_slice(&vnode_of(pk).to_be_bytes());
    key.extend_from_slice(pk);
    key
}

/// Prefix of the failing-row counts of materialized view `view_id` (system key space): one
/// entry per (actor shard, SQLSTATE, message), value the count as i64 big-endian. Each actor
/// of the view's last fragment keeps its own counts (see [`view_error_key`]); the view's count
/// is their sum.
pub fn view_errors_prefix(view_id: u32) -> Vec<u8> {
    let mut k = b"\0\0\0\0err/".to_vec();
    k.extend_from_slice(&view_id.to_be_bytes());
    k
}

/// Prefix of the failing-row counts shard `shard` of view `view_id` keeps.
pub fn view_error_shard_prefix(view_id: u32, shard: u16) -> Vec<u8> {
    let mut k = view_errors_prefix(view_id);
    k.extend_from_slice(&shard.to_be_bytes());
    k
}

/// Key of shard `shard`'s count of view `view_id`'s rows failing with `sqlstate` and `message`.
pub fn view_error_key(view_id: u32, shard: u16, sqlstate: &str, message: &str) -> Vec<u8> {
    let mut k = view_error_shard_prefix(view_id, shard);
    k.extend_from_slice(sqlstate.as_bytes());
    k.extend_from_slice(message.as_bytes());
    k
}

/// (SQLSTATE, message, count) of an entry under [`view_errors_prefix`] (one shard's count).
pub fn decode_view_error(key: &[u8], value: &[u8]) -> Option<(String, String, i64)> {
    let rest = key.get(view_errors_prefix(0).len() + 2..)?;
    let sqlstate = std::str::from_utf8(rest.get(..5)?).ok()?.to_string();
    let message = String::from_utf8_lossy(rest.get(5..)?).into_owned();
    let count = i64::from_be_bytes(value.try_into().ok()?);
    Some((sqlstate, message, count))
}

/// Prefix of the records of failed actors (system key space): key + actor id (u32 BE), value
/// the failure's message. A failed view stays failed across restarts until it is dropped.
pub const FAILURES_PREFIX: &[u8] = b"\0\0\0\0failed/";

/// Key of the relation-id high-water mark: ids below it may have state (a view whose creation
/// crashed leaves state without a catalog entry), so they are never handed out again.
pub const NEXT_ID_KEY: &[u8] = b"\0\0\0\0next_id";

/// Key of the committed position of the connector that feeds table `table_id` (system key
/// space: the table's own key space holds only its rows).
pub fn ingest_position_key(table_id: u32) -> Vec<u8> {
    let mut k = b"\0\0\0\0srcpos/".to_vec();
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

/// Key of the watermark generator state of table `table_id` (system key space).
pub fn watermark_key(table_id: u32) -> Vec<u8> {
    let mut k = b"\0\0\0\0watermark/".to_vec();
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

/// Prefix of the records of views being created in the background (`SET background_ddl`):
/// key + view id (u32 BE), value the view's catalog entry and backfill settings. A record
/// outlives a crash, so recovery resumes the view's backfill; it is deleted in the epoch the
/// view's catalog entry commits (or when the creation is abandoned).
pub const CREATING_PREFIX: &[u8] = b"\0\0\0\0creating/";

/// Key of the creation record of view `view_id` (see [`CREATING_PREFIX`]).
pub fn creating_key(view_id: u32) -> Vec<u8> {
    let mut k = CREATING_PREFIX.to_vec();
    k.extend_from_slice(&view_id.to_be_bytes());
    k
}

/// Prefix of the backfill positions of view `view_id` (system key space): how far each of
/// its actors has read each upstream, committed with the state those reads produced.
pub fn backfill_prefix(view_id: u32) -> Vec<u8> {
    let mut k = b"\0\0\0\0backfill/".to_vec();
    k.extend_from_slice(&view_id.to_be_bytes());
    k
}

/// Key of the backfill position of input `branch` of actor `shard` of fragment `fragment` of
/// view `view_id` (a view is re-planned into the same fragments, actors and branches).
pub fn backfill_key(view_id: u32, fragment: u16, shard: u16, branch: u16) -> Vec<u8> {
    let mut k = backfill_prefix(view_id);
    for part in [fragment, shard, branch] {
        k.extend_from_slice(&part.to_be_bytes());
    }
    k
}

/// Key of the failure record of actor `id`.
pub fn failure_key(id: u32) -> Vec<u8> {
    let mut k = FAILURES_PREFIX.to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// Encodes and decodes rows of one schema: keys from the pk columns, values from all columns.
#[derive(Debug)]
pub struct RowCodec {
    /// Schema of decoded rows (including any hidden row-id column).
    schema: SchemaRef,
    /// Indices of the primary-key columns in `schema`.
    pk_indices: Vec<usize>,
    /// Converter for the pk columns (memcomparable).
    pk_converter: RowConverter,
    /// Converter for whole rows.
    value_converter: RowConverter,
}

impl RowCodec {
    /// A codec for `schema` keyed by `pk_indices`.
    pub fn try_new(schema: SchemaRef, pk_indices: Vec<usize>) -> Result<Self> {
        let pk_fields = pk_indices
            .iter()
            .map(|&i| SortField::new(schema.field(i).data_type().clone()))
            .collect();
        let value_fields = schema.fields().iter().map(|f| SortField::new(f.data_type().clone())).collect();
        Ok(Self {
            pk_converter: RowConverter::new(pk_fields)?,
            value_converter: RowConverter::new(value_fields)?,
            schema,
            pk_indices,
        })
    }

    /// Schema of the rows this codec handles.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Indices of the key columns.
    pub fn pk_indices(&self) -> &[usize] {
        &self.pk_indices
    }

    /// Memcomparable pk of every row of `batch`.
    pub fn encode_pks(&self, batch: &RecordBatch) -> Result<Rows> {
        let cols: Vec<ArrayRef> = self.pk_indices.iter().map(|&i| batch.column(i).clone()).collect();
        Ok(self.pk_converter.convert_columns(&cols)?)
    }

    /// Full keys of every row of `batch` in table `table_id`. With no key columns every row
    /// has the same key (a table of at most one row, e.g. a global aggregate's view).
    pub fn encode_keys(&self, table_id: u32, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
        if self.pk_indices.is_empty() {
            return Ok(vec![make_key(table_id, &[]); batch.num_rows()]);
        }
        let pks = self.encode_pks(batch)?;
        Ok(pks.iter().map(|pk| make_key(table_id, pk.as_ref())).collect())
    }

    /// Encoded values of every row of `batch`.
    pub fn encode_values(&self, batch: &RecordBatch) -> Result<Rows> {
        Ok(self.value_converter.convert_columns(batch.columns())?)
    }

    /// Decodes stored values back into a batch with this codec's schema.
    pub fn decode_values<'a>(&self, values: impl IntoIterator<Item = &'a [u8]>) -> Result<RecordBatch> {
        let parser = self.value_converter.parser();
        let rows: Vec<_> = values.into_iter().map(|v| parser.parse(v)).collect();
        let columns = decode_rows(&self.value_converter, rows)?;
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

/// Rows of `converter`'s format decoded into columns, with [`zero_null_slots`] applied.
pub fn decode_rows<'a>(converter: &arrow::row::RowConverter, rows: impl IntoIterator<Item = arrow::row::Row<'a>>) -> Result<Vec<arrow::array::ArrayRef>> {
    Ok(converter.convert_rows(rows)?.into_iter().map(zero_null_slots).collect())
}

/// The row format decodes a NULL date or timestamp with the minimum value in its slot; casts
/// that scale every slot (a date to a timestamp) would overflow on it (a panic in a debug
/// build: a view over an outer join's NULL-padded dates stopped), so such slots get zero.
pub fn zero_null_slots(col: arrow::array::ArrayRef) -> arrow::array::ArrayRef {
    use arrow::array::{Array, AsArray, PrimitiveArray};
    use arrow::datatypes::{
        ArrowPrimitiveType, DataType, Date32Type, Date64Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
        TimestampSecondType,
    };
    fn zeroed<T: ArrowPrimitiveType>(col: &arrow::array::ArrayRef) -> arrow::array::ArrayRef {
        let p = col.as_primitive::<T>();
        let values: Vec<T::Native> = p.iter().map(|v| v.unwrap_or_default()).collect();
        std::sync::Arc::new(PrimitiveArray::<T>::new(values.into(), p.nulls().cloned()).with_data_type(p.data_type().clone()))
    }
    if col.null_count() == 0 {
        return col;
    }
    match col.data_type() {
        DataType::Date32 => zeroed::<Date32Type>(&col),
        DataType::Date64 => zeroed::<Date64Type>(&col),
        DataType::Timestamp(TimeUnit::Microsecond, _) => zeroed::<TimestampMicrosecondType>(&col),
        DataType::Timestamp(TimeUnit::Millisecond, _) => zeroed::<TimestampMillisecondType>(&col),
        DataType::Timestamp(TimeUnit::Second, _) => zeroed::<TimestampSecondType>(&col),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => zeroed::<TimestampNanosecondType>(&col),
        _ => col,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    #[test]
    fn keys_sort_like_sql_within_a_vnode_and_values_round_trip() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("b", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int32Array::from(vec![-5, 3, 100])), Arc::new(StringArray::from(vec![Some("x"), None, Some("z")]))],
        )
        .unwrap();
        let codec = RowCodec::try_new(schema, vec![0]).unwrap();
        let pks = codec.encode_pks(&batch).unwrap();
        assert!(pks.row(0) < pks.row(1) && pks.row(1) < pks.row(2));
        let keys = codec.encode_keys(7, &batch).unwrap();
        assert!(keys.iter().all(|k| k[..4] == [0, 0, 0, 7]));
        let values = codec.encode_values(&batch).unwrap();
        let decoded = codec.decode_values(values.iter().map(|r| r.data())).unwrap();
        assert_eq!(decoded, batch);
    }

    #[test]
    fn vnodes_are_stable_and_in_range() {
        assert_eq!(vnode_of(b""), vnode_of(b""));
        assert!((0..1000u32).all(|i| vnode_of(&i.to_be_bytes()) < VNODE_COUNT));
    }
}
