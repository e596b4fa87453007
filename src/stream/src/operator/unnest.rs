//! `Unnest`: set-returning functions in a view's select list (`unnest(arr)`,
//! `generate_series(1, n)`), one level deep. Each input row becomes one row per element of its
//! longest list; shorter lists give NULL past their end (PostgreSQL's zipping of several
//! set-returning functions), and a NULL or empty list gives no row unless another list of the
//! row has elements. Stateless: a deleted input row deletes exactly the rows it made.
//!
//! Output layout: the unnested query's columns, then the input row's stream key and the
//! element's ordinal (hidden; together the output's stream key).

use std::fmt;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, UInt32Array};
use arrow::datatypes::{DataType, SchemaRef};
use async_trait::async_trait;
use eddy_common::{internal_err, Epoch, Result, StreamChunk};
use eddy_storage::EpochBatch;

use super::eval::RowErrors;
use super::Operator;

/// One output column: the input column it comes from, and whether its lists are unnested.
#[derive(Debug, Clone, Copy)]
pub struct UnnestColumn {
    pub input: usize,
    pub unnest: bool,
}

/// Unnests list columns (see the module docs).
pub struct Unnest {
    /// The query's output columns.
    columns: Vec<UnnestColumn>,
    /// The input's stream key, appended to each output row.
    key: Vec<usize>,
    /// A NULL list yields one NULL element (DataFusion's `preserve_nulls`) instead of none.
    preserve_nulls: bool,
    /// Output schema: the columns, the key, the ordinal.
    schema: SchemaRef,
}

impl Unnest {
    /// An unnest producing `schema` (`columns`, then `key`'s columns, then an Int64 ordinal).
    pub fn try_new(columns: Vec<UnnestColumn>, key: Vec<usize>, preserve_nulls: bool, schema: SchemaRef) -> Result<Self> {
        if schema.fields().len() != columns.len() + key.len() + 1 {
            return Err(internal_err!("unnest has {} columns for a schema of {}", columns.len() + key.len() + 1, schema.fields().len()));
        }
        Ok(Self { columns, key, preserve_nulls, schema })
    }
}

impl fmt::Display for Unnest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cols: Vec<String> = self.columns.iter().map(|c| if c.unnest { format!("unnest(#{})", c.input) } else { format!("#{}", c.input) }).collect();
        write!(f, "Unnest [{}]", cols.join(", "))
    }
}

/// A list column's `(start, length)` per row and its elements.
type ListParts = (Vec<(usize, usize)>, ArrayRef);

/// A list column's parts (List and LargeList; others are not lists).
fn list_parts(a: &ArrayRef) -> Result<ListParts> {
    let bounds = |i: usize, start: usize, end: usize| if a.is_valid(i) { (start, end - start) } else { (start, 0) };
    match a.data_type() {
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            let o = l.value_offsets();
            Ok(((0..l.len()).map(|i| bounds(i, o[i] as usize, o[i + 1] as usize)).collect(), l.values().clone()))
        }
        DataType::LargeList(_) => {
            let l = a.as_list::<i64>();
            let o = l.value_offsets();
            Ok(((0..l.len()).map(|i| bounds(i, o[i] as usize, o[i + 1] as usize)).collect(), l.values().clone()))
        }
        other => Err(internal_err!("unnest of a {other} column")),
    }
}

#[async_trait]
impl Operator for Unnest {
    /// Stateless, keyed by its input's key: runs wherever its input is.
    fn distribution(&self) -> super::Distribution {
        super::Distribution::Any
    }

    fn process(&mut self, chunk: StreamChunk, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        let n = chunk.len();
        let batch = &chunk.batch;
        // Per unnested output column: (start, length) of each row's list, and the elements.
        let lists: Vec<Option<ListParts>> =
            self.columns.iter().map(|c| c.unnest.then(|| list_parts(batch.column(c.input))).transpose()).collect::<Result<_>>()?;
        let lengths: Vec<usize> = (0..n)
            .map(|i| {
                let longest = lists.iter().flatten().map(|(b, _)| b[i].1).max().unwrap_or(0);
                let null_row = self.preserve_nulls && longest == 0 && self.columns.iter().any(|c| c.unnest && batch.column(c.input).is_null(i));
                if null_row { 1 } else { longest }
            })
            .collect();
        let total: usize = lengths.iter().sum();
        if total == 0 {
            return Ok(vec![]);
        }
        let mut rows = Vec::with_capacity(total);
        let mut ordinals = Vec::with_capacity(total);
        let mut ops = Vec::with_capacity(total);
        for (i, &len) in lengths.iter().enumerate() {
            for j in 0..len {
                rows.push(i as u32);
                ordinals.push(j as i64 + 1);
                ops.push(chunk.ops[i]);
            }
        }
        let rows = UInt32Array::from(rows);
        let mut out: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for (c, list) in self.columns.iter().zip(&lists) {
            out.push(match list {
                None => arrow::compute::take(batch.column(c.input), &rows, None)?,
                Some((bounds, values)) => {
                    let picks: UInt32Array = rows
                        .values()
                        .iter()
                        .zip(&ordinals)
                        .map(|(&i, &j)| {
                            let (start, len) = bounds[i as usize];
                            let j = (j - 1) as usize;
                            (j < len).then(|| (start + j) as u32)
                        })
                        .collect();
                    arrow::compute::take(values, &picks, None)?
                }
            });
        }
        for &k in &self.key {
            out.push(arrow::compute::take(batch.column(k), &rows, None)?);
        }
        out.push(std::sync::Arc::new(Int64Array::from(ordinals)));
        let out = out
            .into_iter()
            .zip(self.schema.fields())
            .map(|(a, f)| if a.data_type() == f.data_type() { Ok(a) } else { Ok(arrow::compute::cast(&a, f.data_type())?) })
            .collect::<Result<Vec<_>>>()?;
        Ok(vec![StreamChunk::try_new(RecordBatch::try_new(self.schema.clone(), out)?, ops)?])
    }

    async fn on_barrier(&mut self, _epoch: Epoch, _batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        Ok(vec![])
    }

    fn on_watermarks(&mut self, input: &[crate::watermark::Watermark]) -> Result<Vec<crate::watermark::Watermark>> {
        // Columns copied from the input keep their watermarks.
        Ok(self
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.unnest)
            .filter_map(|(o, c)| input.iter().find(|w| w.col == c.input).map(|w| crate::watermark::Watermark { col: o, value: w.value.clone() }))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int32Array, ListArray};
    use arrow::datatypes::{Field, Int32Type, Int64Type, Schema};
    use eddy_common::Op;

    use super::*;

    #[test]
    fn lists_zip_pad_with_nulls_and_deletes_delete_the_same_rows() {
        let list = |v: Vec<Option<Vec<Option<i32>>>>| Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(v)) as ArrayRef;
        let item = Arc::new(Field::new("item", DataType::Int32, true));
        let input = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("a", DataType::List(item.clone()), true),
            Field::new("b", DataType::List(item), true),
        ]));
        let batch = RecordBatch::try_new(
            input,
            vec![
                Arc::new(Int32Array::from(vec![1, 2, 3, 4])),
                list(vec![Some(vec![Some(10), Some(20)]), None, Some(vec![]), None]),
                list(vec![Some(vec![Some(7)]), Some(vec![Some(8), Some(9)]), Some(vec![]), None]),
            ],
        )
        .unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Int32, true),
            Field::new("_key", DataType::Int32, false),
            Field::new("_ordinal", DataType::Int64, false),
        ]));
        let columns = vec![UnnestColumn { input: 0, unnest: false }, UnnestColumn { input: 1, unnest: true }, UnnestColumn { input: 2, unnest: true }];
        let mut u = Unnest::try_new(columns, vec![0], false, schema).unwrap();
        let ops = vec![Op::Insert, Op::Insert, Op::Insert, Op::Delete];
        let out = u.process(StreamChunk::try_new(batch, ops).unwrap(), &mut RowErrors::default()).unwrap();
        let b = &out[0].batch;
        let ints = |c: usize| (0..b.num_rows()).map(|i| b.column(c).as_primitive::<Int32Type>().is_valid(i).then(|| b.column(c).as_primitive::<Int32Type>().value(i))).collect::<Vec<_>>();
        assert_eq!(ints(0), [Some(1), Some(1), Some(2), Some(2)]);
        assert_eq!(ints(1), [Some(10), Some(20), None, None]);
        assert_eq!(ints(2), [Some(7), None, Some(8), Some(9)]);
        assert_eq!(b.column(4).as_primitive::<Int64Type>().values().to_vec(), [1, 2, 1, 2]);
        assert_eq!(out[0].ops, [Op::Insert; 4]);
    }
}
