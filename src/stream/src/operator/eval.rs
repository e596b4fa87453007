//! Expression evaluation where a failing row is data, not a fault (as in Materialize): rows
//! whose expressions fail with a user error (division by zero, overflow, a bad cast) are left
//! out of the operator's output and counted in [`RowErrors`] with the sign of their op, so
//! deleting the offending input row retracts its error exactly. Only internal errors fail the
//! actor.
//!
//! Evaluation stays vectorized: the whole chunk is evaluated first, and only a chunk that
//! fails is evaluated again row by row to find the failing rows.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray};
use arrow::compute::filter_record_batch;
use datafusion::physical_expr::PhysicalExpr;
use eddy_common::{EddyError, ErrorKind, Op, Result, StreamChunk};

/// A change to a view's count of failing input rows: `delta` rows failed (or stopped failing,
/// when negative) with this SQLSTATE and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorDelta {
    /// SQLSTATE of the failure.
    pub sqlstate: String,
    /// Its message.
    pub message: String,
    /// Rows added (positive) or retracted (negative).
    pub delta: i64,
}

/// Per-row failures collected while processing; summed per (SQLSTATE, message).
#[derive(Debug, Default, Clone)]
pub struct RowErrors {
    deltas: BTreeMap<(String, String), i64>,
}

impl RowErrors {
    /// Counts one row failing with `e`: +1 for an inserted row, -1 for a retracted one.
    pub fn add(&mut self, e: &EddyError, op: Op) {
        self.add_delta(e.sqlstate, &e.message, if op.is_insert() { 1 } else { -1 });
    }

    /// Adds `delta` rows failing with `sqlstate` and `message`.
    pub fn add_delta(&mut self, sqlstate: &str, message: &str, delta: i64) {
        let e = self.deltas.entry((sqlstate.to_string(), message.to_string())).or_default();
        *e += delta;
        if *e == 0 {
            self.deltas.remove(&(sqlstate.to_string(), message.to_string()));
        }
    }

    /// Adds every delta of `other`.
    pub fn merge(&mut self, other: &[ErrorDelta]) {
        for d in other {
            self.add_delta(&d.sqlstate, &d.message, d.delta);
        }
    }

    /// True if nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.deltas.is_empty()
    }

    /// The collected deltas, leaving this empty.
    pub fn take(&mut self) -> Vec<ErrorDelta> {
        std::mem::take(&mut self.deltas)
            .into_iter()
            .map(|((sqlstate, message), delta)| ErrorDelta { sqlstate, message, delta })
            .collect()
    }
}

/// Evaluates `exprs` over `chunk`. Rows where one fails with a user error are dropped and
/// counted in `errors`; returns the remaining rows (update pairs split by a dropped half become
/// plain inserts and deletes) and the expressions' values for them.
pub fn evaluate(exprs: &[Arc<dyn PhysicalExpr>], chunk: StreamChunk, errors: &mut RowErrors) -> Result<(StreamChunk, Vec<ArrayRef>)> {
    let n = chunk.len();
    match eval_all(exprs, &chunk.batch, n) {
        Ok(cols) => return Ok((chunk, cols)),
        Err(e) if e.kind != ErrorKind::User => return Err(e),
        Err(_) => {}
    }
    // Find the failing rows one by one.
    let mut keep = Vec::with_capacity(n);
    for i in 0..n {
        match eval_all(exprs, &chunk.batch.slice(i, 1), 1) {
            Ok(_) => keep.push(true),
            Err(e) if e.kind == ErrorKind::User => {
                errors.add(&e, chunk.ops[i]);
                keep.push(false);
            }
            Err(e) => return Err(e),
        }
    }
    let chunk = filter_chunk(&chunk, &keep)?;
    let cols = eval_all(exprs, &chunk.batch, chunk.len())?;
    Ok((chunk, cols))
}

/// Evaluates the boolean `predicate` over `batch` (whose rows carry `ops`): true where it is
/// true; false where it is false or NULL, or fails with a user error (counted in `errors`).
pub fn predicate_mask(predicate: &Arc<dyn PhysicalExpr>, batch: &arrow::array::RecordBatch, ops: &[Op], errors: &mut RowErrors) -> Result<Vec<bool>> {
    use arrow::array::AsArray;
    let n = batch.num_rows();
    let truth = |a: &ArrayRef| -> Result<Vec<bool>> {
        let b = a.as_boolean_opt().ok_or_else(|| eddy_common::internal_err!("join condition is not boolean"))?;
        Ok(b.iter().map(|v| v.unwrap_or(false)).collect())
    };
    match eval_all(std::slice::from_ref(predicate), batch, n) {
        Ok(cols) => return truth(&cols[0]),
        Err(e) if e.kind != ErrorKind::User => return Err(e),
        Err(_) => {}
    }
    let mut out = Vec::with_capacity(n);
    for (i, op) in ops.iter().enumerate().take(n) {
        match eval_all(std::slice::from_ref(predicate), &batch.slice(i, 1), 1) {
            Ok(cols) => out.push(truth(&cols[0])?[0]),
            Err(e) if e.kind == ErrorKind::User => {
                errors.add(&e, *op);
                out.push(false);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

pub(crate) fn eval_all(exprs: &[Arc<dyn PhysicalExpr>], batch: &arrow::array::RecordBatch, n: usize) -> Result<Vec<ArrayRef>> {
    exprs.iter().map(|e| Ok(e.evaluate(batch)?.into_array(n)?)).collect()
}

/// The rows of `chunk` where `keep` is true; an update half whose partner is dropped becomes a
/// plain insert or delete.
pub fn filter_chunk(chunk: &StreamChunk, keep: &[bool]) -> Result<StreamChunk> {
    let mask = BooleanArray::from(keep.to_vec());
    let batch = filter_record_batch(&chunk.batch, &mask)?;
    let n = keep.len();
    let mut ops = Vec::with_capacity(batch.num_rows());
    for i in 0..n {
        if !keep[i] {
            continue;
        }
        let op = match chunk.ops[i] {
            Op::UpdateDelete if i + 1 >= n || !keep[i + 1] => Op::Delete,
            Op::UpdateInsert if i == 0 || !keep[i - 1] => Op::Insert,
            other => other,
        };
        ops.push(op);
    }
    StreamChunk::try_new(batch, ops)
}

#[cfg(test)]
mod tests {
    use arrow::array::Array;
    use datafusion::logical_expr::Operator as BinOp;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
    use datafusion::scalar::ScalarValue;

    use super::*;

    /// 100 / c0: Arrow's integer division fails on a zero divisor (22012).
    fn inverse() -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(Arc::new(Literal::new(ScalarValue::Int64(Some(100)))), BinOp::Divide, Arc::new(Column::new("c0", 0))))
    }

    #[test]
    fn failing_rows_are_counted_with_their_sign_and_the_rest_pass() {
        let mut errors = RowErrors::default();
        let chunk = StreamChunk::from_pretty(" I\n + 4\n + 0\n - 0\n U- 5\n U+ 0").unwrap();
        let (out, cols) = evaluate(&[inverse()], chunk, &mut errors).unwrap();
        assert_eq!(out.ops, vec![Op::Insert, Op::Delete]);
        assert_eq!(cols[0].len(), 2);
        let d = errors.take();
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].sqlstate.as_str(), d[0].delta), ("22012", 1), "+1 -1 +1");
    }

    #[test]
    fn a_chunk_without_failures_is_evaluated_once_and_passes_unchanged() {
        let mut errors = RowErrors::default();
        let (out, _) = evaluate(&[inverse()], StreamChunk::from_pretty(" I\n + 4\n + 5").unwrap(), &mut errors).unwrap();
        assert_eq!(out.len(), 2);
        assert!(errors.is_empty());
    }
}
