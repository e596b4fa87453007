//! `StreamChunk`: an Arrow `RecordBatch` plus a parallel column of change operations. This is the
//! unit that flows between operators and from DML into tables (docs/architecture.md, "StreamChunk").

use arrow::array::RecordBatch;

/// What a row in a chunk means. An update is an adjacent `UpdateDelete`/`UpdateInsert` pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Insert,
    Delete,
    UpdateDelete,
    UpdateInsert,
}

impl Op {
    /// True for ops that add the row (`Insert`, `UpdateInsert`).
    pub fn is_insert(self) -> bool {
        matches!(self, Op::Insert | Op::UpdateInsert)
    }
}

/// A batch of changes: `ops[i]` applies to row `i` of `batch`.
#[derive(Debug, Clone)]
pub struct StreamChunk {
    /// The rows.
    pub batch: RecordBatch,
    /// One op per row.
    pub ops: Vec<Op>,
}

impl StreamChunk {
    /// A chunk; fails if `ops` and `batch` disagree on the row count.
    pub fn try_new(batch: RecordBatch, ops: Vec<Op>) -> crate::Result<Self> {
        if batch.num_rows() != ops.len() {
            return Err(crate::internal_err!(
                "chunk has {} rows but {} ops",
                batch.num_rows(),
                ops.len()
            ));
        }
        Ok(Self { batch, ops })
    }

    /// A chunk where every row is an insert.
    pub fn inserts(batch: RecordBatch) -> Self {
        let ops = vec![Op::Insert; batch.num_rows()];
        Self { batch, ops }
    }

    /// A chunk where every row is a delete.
    pub fn deletes(batch: RecordBatch) -> Self {
        let ops = vec![Op::Delete; batch.num_rows()];
        Self { batch, ops }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the chunk carries no rows.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The rows where `keep` is true (NULL counts as false), as plain inserts and deletes: a
    /// filter may keep one half of an update pair only.
    pub fn filter_plain(&self, keep: &arrow::array::BooleanArray) -> crate::Result<StreamChunk> {
        let batch = arrow::compute::filter_record_batch(&self.batch, keep)?;
        let ops = self
            .ops
            .iter()
            .zip(keep.iter())
            .filter(|(_, k)| k.unwrap_or(false))
            .map(|(op, _)| if op.is_insert() { Op::Insert } else { Op::Delete })
            .collect();
        StreamChunk::try_new(batch, ops)
    }
}

impl StreamChunk {
    /// A chunk from a readable table, for tests and docs. The first line names the column
    /// types (`I` = Int64, `i` = Int32, `T` = Utf8, `F` = Float64, `B` = Boolean); each
    /// following line is an op (`+`, `-`, `U-`, `U+`) and the values, `.` for NULL:
    ///
    /// ```text
    ///  I T
    ///  + 1 foo
    ///  - 2 .
    /// ```
    pub fn from_pretty(text: &str) -> crate::Result<StreamChunk> {
        use std::sync::Arc;

        use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray};
        use arrow::datatypes::{DataType, Field, Schema};

        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let header: Vec<&str> = lines.next().map(|l| l.split_whitespace().collect()).unwrap_or_default();
        let mut ops = Vec::new();
        let mut cells: Vec<Vec<Option<String>>> = vec![Vec::new(); header.len()];
        for line in lines {
            let mut parts = line.split_whitespace();
            ops.push(match parts.next() {
                Some("+") => Op::Insert,
                Some("-") => Op::Delete,
                Some("U-") => Op::UpdateDelete,
                Some("U+") => Op::UpdateInsert,
                other => return Err(crate::internal_err!("bad op {other:?} in pretty chunk")),
            });
            for (i, c) in cells.iter_mut().enumerate() {
                let v = parts.next().ok_or_else(|| crate::internal_err!("missing column {i} in {line:?}"))?;
                c.push((v != ".").then(|| v.to_string()));
            }
        }
        let bad = |v: &str| crate::internal_err!("bad value {v:?} in pretty chunk");
        let mut fields = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        for (i, (t, vals)) in header.iter().zip(cells).enumerate() {
            let name = format!("c{i}");
            let (dt, arr): (DataType, ArrayRef) = match *t {
                "I" => (DataType::Int64, Arc::new(vals.iter().map(|v| v.as_deref().map(|s| s.parse::<i64>().map_err(|_| bad(s))).transpose()).collect::<crate::Result<Int64Array>>()?)),
                "i" => (DataType::Int32, Arc::new(vals.iter().map(|v| v.as_deref().map(|s| s.parse::<i32>().map_err(|_| bad(s))).transpose()).collect::<crate::Result<Int32Array>>()?)),
                "F" => (DataType::Float64, Arc::new(vals.iter().map(|v| v.as_deref().map(|s| s.parse::<f64>().map_err(|_| bad(s))).transpose()).collect::<crate::Result<Float64Array>>()?)),
                "B" => (DataType::Boolean, Arc::new(vals.iter().map(|v| v.as_deref().map(|s| s == "t" || s == "true")).collect::<BooleanArray>())),
                _ => (DataType::Utf8, Arc::new(vals.iter().map(|v| v.as_deref()).collect::<StringArray>())),
            };
            fields.push(Field::new(name, dt, true));
            columns.push(arr);
        }
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        StreamChunk::try_new(batch, ops)
    }
}
