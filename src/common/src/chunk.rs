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

    /// The chunk in consecutive pieces of at most `max_rows` rows (one more where a piece
    /// would end between the halves of an update); itself if it is no larger.
    pub fn split_rows(self, max_rows: usize) -> Vec<StreamChunk> {
        let max_rows = max_rows.max(2);
        if self.len() <= max_rows {
            return vec![self];
        }
        let mut out = Vec::with_capacity(self.len() / max_rows + 1);
        let mut start = 0;
        while start < self.len() {
            let mut end = (start + max_rows).min(self.len());
            if end < self.len() && self.ops[end - 1] == Op::UpdateDelete {
                end += 1;
            }
            out.push(StreamChunk { batch: self.batch.slice(start, end - start), ops: self.ops[start..end].to_vec() });
            start = end;
        }
        out
    }

    /// Splits the chunk among `n` owners, row `i` going to `owner(vnodes[i])` (contiguous vnode
    /// ranges, [`crate::codec::owner_of`]): one chunk per owner that gets rows, each in
    /// the input's order. An update whose halves go to different owners becomes a delete and an
    /// insert.
    pub fn split_by_owner(&self, vnodes: &[u16], n: usize) -> crate::Result<Vec<Option<StreamChunk>>> {
        if vnodes.len() != self.len() {
            return Err(crate::internal_err!("{} vnodes for a chunk of {} rows", vnodes.len(), self.len()));
        }
        let owners: Vec<usize> = vnodes.iter().map(|&v| crate::codec::owner_of(v, n)).collect();
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut ops: Vec<Vec<Op>> = vec![Vec::new(); n];
        for (i, (&o, &op)) in owners.iter().zip(&self.ops).enumerate() {
            let op = match op {
                Op::UpdateDelete if owners.get(i + 1) != Some(&o) => Op::Delete,
                Op::UpdateInsert if i == 0 || owners[i - 1] != o => Op::Insert,
                op => op,
            };
            rows[o].push(i as u32);
            ops[o].push(op);
        }
        if let Some(o) = rows.iter().position(|r| r.len() == self.len()) {
            let mut out: Vec<Option<StreamChunk>> = vec![None; n];
            out[o] = Some(self.clone());
            return Ok(out);
        }
        rows.into_iter()
            .zip(ops)
            .map(|(r, ops)| {
                if r.is_empty() {
                    return Ok(None);
                }
                let batch = arrow::compute::take_record_batch(&self.batch, &arrow::array::UInt32Array::from(r))?;
                StreamChunk::try_new(batch, ops).map(Some)
            })
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{owner_of, vnodes_of, VNODE_COUNT};

    #[test]
    fn vnode_ranges_cover_every_vnode_once_and_agree_with_owners() {
        for n in [1, 2, 3, 7, 256] {
            let mut next = 0;
            for i in 0..n {
                let r = vnodes_of(i, n);
                assert_eq!(r.start, next);
                assert!(r.start < r.end, "actor {i} of {n} owns no vnode");
                assert!(r.clone().all(|v| owner_of(v, n) == i));
                next = r.end;
            }
            assert_eq!(next, VNODE_COUNT);
        }
    }

    #[test]
    fn a_split_keeps_each_owners_rows_in_order_and_breaks_updates_that_move() {
        let chunk = StreamChunk::from_pretty(" I\n + 1\n U- 2\n U+ 3\n U- 4\n U+ 5\n - 6").unwrap();
        // Rows 1, 2, 4, 5 on owner 0; 3 and 6 on owner 1.
        let vnodes = [0, 10, 200, 20, 30, 255];
        let parts = chunk.split_by_owner(&vnodes, 2).unwrap();
        let show = |c: &StreamChunk| {
            let vals = c.batch.column(0).as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().values().to_vec();
            c.ops.iter().copied().zip(vals).collect::<Vec<_>>()
        };
        assert_eq!(
            show(parts[0].as_ref().unwrap()),
            vec![(Op::Insert, 1), (Op::Delete, 2), (Op::UpdateDelete, 4), (Op::UpdateInsert, 5)]
        );
        assert_eq!(show(parts[1].as_ref().unwrap()), vec![(Op::Insert, 3), (Op::Delete, 6)]);
        // All rows on one owner: the chunk itself, nothing for the other.
        let parts = chunk.split_by_owner(&[0; 6], 2).unwrap();
        assert!(parts[1].is_none());
        assert_eq!(parts[0].as_ref().unwrap().ops, chunk.ops);
    }

    #[test]
    fn pieces_of_a_large_chunk_keep_its_rows_in_order_and_updates_whole() {
        let chunk = StreamChunk::from_pretty(" I\n + 1\n U- 2\n U+ 3\n - 4\n + 5\n U- 6\n U+ 7").unwrap();
        let pieces = chunk.clone().split_rows(2);
        let lens: Vec<usize> = pieces.iter().map(StreamChunk::len).collect();
        assert_eq!(lens, vec![3, 2, 2], "no piece ends between U- and U+");
        assert!(pieces.iter().all(|p| p.ops.first() != Some(&Op::UpdateInsert)));
        let ops: Vec<Op> = pieces.iter().flat_map(|p| p.ops.clone()).collect();
        assert_eq!(ops, chunk.ops);
        assert_eq!(chunk.clone().split_rows(7).len(), 1);
    }
}
