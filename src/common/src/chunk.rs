//! `StreamChunk`: an Arrow `RecordBatch` plus a parallel column of change operations. This is the
//! unit that flows between operators and from DML into tables (DESIGN.md, "StreamChunk").

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
}
