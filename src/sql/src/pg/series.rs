//! `generate_series(start, stop [, step])` over integers with PostgreSQL's semantics at the
//! edges of `bigint`: the series stops at the last value before `stop` or before the next value
//! would overflow. DataFusion's version adds the step unchecked, so
//! `generate_series(1, 9223372036854775807, 4611686018427387904)` overflowed (a panic in debug
//! builds, an endless wrapped series in release builds). Rows are produced lazily, one batch at
//! a time, so a long series streams in constant memory. Timestamp and date series are
//! delegated to DataFusion's implementation, whose interval arithmetic is checked.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use arrow::array::Int64Array;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::memory::{LazyBatchGenerator, LazyMemoryExec};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::scalar::ScalarValue;
use parking_lot::RwLock;

/// The `generate_series` table function (and DataFusion's `range`, which excludes `stop`).
#[derive(Debug)]
pub struct GenerateSeries {
    /// DataFusion's implementation, for timestamps and dates.
    fallback: Arc<dyn TableFunctionImpl>,
    /// `stop` is part of the series (`generate_series`), or not (`range`).
    inclusive: bool,
}

impl GenerateSeries {
    /// Wraps DataFusion's `generate_series` or `range` (used for non-integer series).
    pub fn new(fallback: Arc<dyn TableFunctionImpl>, inclusive: bool) -> Self {
        Self { fallback, inclusive }
    }
}

/// The integer arguments, `None` for a NULL one (the series is then empty).
fn int_args(exprs: &[Expr]) -> Option<Vec<Option<i64>>> {
    exprs
        .iter()
        .map(|e| match e {
            Expr::Literal(ScalarValue::Int64(v), _) => Some(*v),
            Expr::Literal(ScalarValue::Null, _) => Some(None),
            _ => None,
        })
        .collect()
}

/// How many values `start, start + step, ...` has up to `stop` (inclusive), counting in 128
/// bits so no intermediate value overflows.
pub fn series_len(start: i64, stop: i64, step: i64) -> u64 {
    len_to(start, i128::from(stop), step)
}

fn len_to(start: i64, stop: i128, step: i64) -> u64 {
    let (start, step) = (i128::from(start), i128::from(step));
    let span = stop - start;
    if step == 0 || span != 0 && (span > 0) != (step > 0) {
        return 0;
    }
    (span / step + 1).min(i128::from(u64::MAX)) as u64
}

/// An argument as the series read it: any integer as a bigint (`'2'::INT`), a timestamp in
/// nanoseconds (DataFusion's series takes only those; Eddy's timestamps are microseconds), a
/// date as a timestamptz.
fn widened(e: &Expr) -> Expr {
    let Expr::Literal(v, meta) = e else { return e.clone() };
    let to = match v.data_type() {
        t if t.is_integer() && t != DataType::Int64 => DataType::Int64,
        DataType::Timestamp(unit, tz) if unit != arrow::datatypes::TimeUnit::Nanosecond => DataType::Timestamp(arrow::datatypes::TimeUnit::Nanosecond, tz),
        // PostgreSQL has no date series: dates resolve to its timestamptz one.
        DataType::Date32 => DataType::Timestamp(arrow::datatypes::TimeUnit::Nanosecond, Some(eddy_common::types::UTC.into())),
        _ => return e.clone(),
    };
    match v.cast_to(&to) {
        Ok(w) => Expr::Literal(w, meta.clone()),
        Err(_) => e.clone(),
    }
}

impl TableFunctionImpl for GenerateSeries {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let widened: Vec<Expr> = args.exprs().iter().map(widened).collect();
        let exprs = widened.as_slice();
        let Some(values) = int_args(exprs) else { return self.fallback.call_with_args(TableFunctionArgs::new(exprs, args.session())) };
        let (start, stop, step) = match values.as_slice() {
            [stop] => (Some(0), *stop, Some(1)),
            [start, stop] => (*start, *stop, Some(1)),
            [start, stop, step] => (*start, *stop, *step),
            _ => return Err(DataFusionError::Plan("generate_series takes 1 to 3 arguments".into())),
        };
        if step == Some(0) {
            return Err(DataFusionError::Plan("step size cannot equal zero".into()));
        }
        let (start, len, step) = match (start, stop, step) {
            (Some(a), Some(b), Some(s)) if self.inclusive => (a, series_len(a, b, s), s),
            (Some(a), Some(b), Some(s)) => (a, len_to(a, i128::from(b) - i128::from(s.signum()), s), s),
            _ => (0, 0, 1),
        };
        Ok(Arc::new(Series { schema: Arc::new(Schema::new(vec![Field::new("value", DataType::Int64, false)])), start, step, len }))
    }
}

/// A finite integer series: `len` values from `start` by `step`.
#[derive(Debug)]
struct Series {
    /// One non-null `value` column.
    schema: SchemaRef,
    /// First value.
    start: i64,
    /// Distance between values (never zero).
    step: i64,
    /// Number of values (every one fits in `i64` by construction).
    len: u64,
}

#[async_trait]
impl TableProvider for Series {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let batch_size = state.config_options().execution.batch_size.max(1);
        let generator = SeriesBatches { schema: self.schema.clone(), start: self.start, step: self.step, len: self.len, done: 0, batch_size };
        let exec = LazyMemoryExec::try_new(self.schema.clone(), vec![Arc::new(RwLock::new(generator))])?;
        Ok(Arc::new(exec.with_projection(projection.cloned())))
    }
}

/// Produces a [`Series`] one batch at a time.
#[derive(Debug, Clone)]
struct SeriesBatches {
    schema: SchemaRef,
    start: i64,
    step: i64,
    len: u64,
    /// Values produced so far.
    done: u64,
    batch_size: usize,
}

impl fmt::Display for SeriesBatches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "generate_series: start={}, step={}, count={}", self.start, self.step, self.len)
    }
}

impl LazyBatchGenerator for SeriesBatches {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn generate_next_batch(&mut self) -> DfResult<Option<RecordBatch>> {
        let n = (self.len - self.done).min(self.batch_size as u64);
        if n == 0 {
            return Ok(None);
        }
        let first = i128::from(self.start) + i128::from(self.done) * i128::from(self.step);
        let values = (0..n as i128).map(|i| (first + i * i128::from(self.step)) as i64);
        self.done += n;
        Ok(Some(RecordBatch::try_new(self.schema.clone(), vec![Arc::new(Int64Array::from_iter_values(values))])?))
    }

    fn reset_state(&self) -> Arc<RwLock<dyn LazyBatchGenerator>> {
        Arc::new(RwLock::new(Self { done: 0, ..self.clone() }))
    }
}

#[cfg(test)]
mod tests {
    use super::series_len;

    #[test]
    fn series_lengths_stop_before_overflow_like_postgres() {
        assert_eq!(series_len(1, 3, 1), 3);
        assert_eq!(series_len(3, 1, 1), 0);
        assert_eq!(series_len(3, 1, -1), 3);
        assert_eq!(series_len(1, 10, 4), 3);
        assert_eq!(series_len(5, 5, 7), 1);
        // 1, 2^62 + 1; the next value would pass i64::MAX.
        assert_eq!(series_len(1, i64::MAX, 1 << 62), 2);
        assert_eq!(series_len(i64::MIN, i64::MAX, i64::MAX), 3);
        assert_eq!(series_len(i64::MAX, i64::MIN, i64::MIN), 2);
        assert_eq!(series_len(0, i64::MAX, 1), i64::MAX as u64 + 1);
        assert_eq!(series_len(i64::MIN, i64::MAX, 1), u64::MAX);
    }
}
