//! `AND` and `OR` that evaluate their right side only where the left side leaves the result
//! open, as PostgreSQL does: `WHERE b <> 0 AND a / b > 1` never divides by a zero `b`, and
//! neither does `b = 0 OR a / b > 1`.
//!
//! DataFusion evaluates both sides over a whole batch and skips the right side only when the
//! left side decides every row, so one row with `b = 0` failed the query with 22012 (a view,
//! whose failing chunks are evaluated again row by row, did not fail). [`LazyLogic`] keeps
//! DataFusion's evaluation while it succeeds; only when it fails is the right side evaluated
//! again over the rows the left side leaves open, so an error is raised only by a row
//! PostgreSQL would also have evaluated it for.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, BooleanBuilder, RecordBatch};
use arrow::compute::kernels::boolean::{and_kleene, or_kleene};
use arrow::datatypes::{DataType, Schema};
use datafusion::common::tree_node::Transformed;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::expressions::BinaryExpr;
use datafusion::physical_expr::PhysicalExpr;

/// `e` as a [`LazyLogic`] if it is an `AND` or an `OR`.
pub fn lazy(e: Arc<dyn PhysicalExpr>) -> Transformed<Arc<dyn PhysicalExpr>> {
    let Some(b) = e.downcast_ref::<BinaryExpr>() else { return Transformed::no(e) };
    if !matches!(b.op(), Operator::And | Operator::Or) {
        return Transformed::no(e);
    }
    let inner = BinaryExpr::new(Arc::clone(b.left()), *b.op(), Arc::clone(b.right()));
    Transformed::yes(Arc::new(LazyLogic(inner)))
}

/// An `AND` or `OR` whose right side is evaluated only where it can change the result (see the
/// module docs). Not a [`BinaryExpr`] itself, so rewriting a tree twice wraps nothing twice.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct LazyLogic(BinaryExpr);

impl std::fmt::Display for LazyLogic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl LazyLogic {
    fn is_and(&self) -> bool {
        *self.0.op() == Operator::And
    }

    /// The evaluation of the module docs, after the whole-batch one failed with `failure`.
    fn evaluate_lazily(&self, batch: &RecordBatch, failure: DataFusionError) -> DfResult<ColumnarValue> {
        let rows = batch.num_rows();
        let left = self.0.left().evaluate(batch)?.to_array(rows)?;
        let left = left.as_boolean_opt().ok_or_else(|| DataFusionError::Internal(format!("{} of a non-boolean", self.0.op())))?;
        // AND needs its right side where the left is TRUE or NULL, OR where it is FALSE or NULL.
        let decided = !self.is_and();
        let open = BooleanArray::from_iter((0..rows).map(|i| Some(left.is_null(i) || left.value(i) != decided)));
        let open_rows = open.true_count();
        if open_rows == 0 {
            return Ok(ColumnarValue::Array(Arc::new(left.clone())));
        }
        if open_rows == rows {
            return Err(failure);
        }
        let subset = arrow::compute::filter_record_batch(batch, &open)?;
        let right = self.0.right().evaluate(&subset)?.to_array(open_rows)?;
        let right = right.as_boolean_opt().ok_or_else(|| DataFusionError::Internal(format!("{} of a non-boolean", self.0.op())))?;
        // The right side's values at the open rows; elsewhere the left side decides alone.
        let mut scattered = BooleanBuilder::with_capacity(rows);
        let mut next = 0;
        for i in 0..rows {
            if open.value(i) {
                scattered.append_option(right.is_valid(next).then(|| right.value(next)));
                next += 1;
            } else {
                scattered.append_value(decided);
            }
        }
        let scattered = scattered.finish();
        let out: ArrayRef = Arc::new(if self.is_and() { and_kleene(left, &scattered)? } else { or_kleene(left, &scattered)? });
        Ok(ColumnarValue::Array(out))
    }
}

impl PhysicalExpr for LazyLogic {
    fn data_type(&self, input_schema: &Schema) -> DfResult<DataType> {
        self.0.data_type(input_schema)
    }

    fn nullable(&self, input_schema: &Schema) -> DfResult<bool> {
        self.0.nullable(input_schema)
    }

    fn evaluate(&self, batch: &RecordBatch) -> DfResult<ColumnarValue> {
        match self.0.evaluate(batch) {
            Ok(v) => Ok(v),
            Err(failure) => self.evaluate_lazily(batch, failure),
        }
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![self.0.left(), self.0.right()]
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn PhysicalExpr>>) -> DfResult<Arc<dyn PhysicalExpr>> {
        let [left, right]: [Arc<dyn PhysicalExpr>; 2] = children.try_into().map_err(|_| DataFusionError::Internal("AND/OR takes two children".into()))?;
        Ok(Arc::new(LazyLogic(BinaryExpr::new(left, *self.0.op(), right))))
    }

    fn fmt_sql(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt_sql(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int32Array;
    use arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{col, lit};

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, true), Field::new("b", DataType::Int32, true)]));
        let a = Int32Array::from(vec![Some(1), Some(4), None, Some(9)]);
        let b = Int32Array::from(vec![Some(0), Some(2), Some(1), None]);
        RecordBatch::try_new(schema, vec![Arc::new(a), Arc::new(b)]).unwrap()
    }

    fn eager(op: Operator, guard: Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Arc<dyn PhysicalExpr> {
        let schema = batch.schema();
        let quotient = Arc::new(BinaryExpr::new(col("a", &schema).unwrap(), Operator::Divide, col("b", &schema).unwrap()));
        let test = Arc::new(BinaryExpr::new(quotient, Operator::Gt, lit(1)));
        Arc::new(BinaryExpr::new(guard, op, test))
    }

    fn logic(op: Operator, guard: Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Arc<dyn PhysicalExpr> {
        lazy(eager(op, guard, batch)).data
    }

    fn values(e: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Vec<Option<bool>> {
        let out = e.evaluate(batch).unwrap().to_array(batch.num_rows()).unwrap();
        out.as_boolean().iter().collect()
    }

    #[test]
    fn and_skips_rows_its_left_side_rejects() {
        let batch = batch();
        let schema = batch.schema();
        let guard = Arc::new(BinaryExpr::new(col("b", &schema).unwrap(), Operator::NotEq, lit(0)));
        // DataFusion's own AND fails on the row with b = 0.
        assert!(eager(Operator::And, Arc::clone(&guard) as _, &batch).evaluate(&batch).is_err());
        let e = logic(Operator::And, guard, &batch);
        assert!(e.downcast_ref::<LazyLogic>().is_some());
        assert_eq!(values(&e, &batch), vec![Some(false), Some(true), None, None]);
    }

    #[test]
    fn or_skips_rows_its_left_side_accepts() {
        let batch = batch();
        let schema = batch.schema();
        let guard = Arc::new(BinaryExpr::new(col("b", &schema).unwrap(), Operator::Eq, lit(0)));
        let e = logic(Operator::Or, guard, &batch);
        assert_eq!(values(&e, &batch), vec![Some(true), Some(true), None, None]);
    }

    #[test]
    fn a_row_the_left_side_leaves_open_still_fails() {
        let batch = batch();
        let schema = batch.schema();
        // b IS NOT NULL leaves the row with b = 0 open.
        let guard = Arc::new(datafusion::physical_expr::expressions::IsNotNullExpr::new(col("b", &schema).unwrap()));
        let e = logic(Operator::And, guard, &batch);
        let err = e.evaluate(&batch).unwrap_err().to_string();
        assert!(err.to_lowercase().contains("divide by zero"), "{err}");
    }

    #[test]
    fn rewriting_twice_wraps_once() {
        let batch = batch();
        let schema = batch.schema();
        let guard = Arc::new(BinaryExpr::new(col("b", &schema).unwrap(), Operator::NotEq, lit(0)));
        let e = logic(Operator::And, guard, &batch);
        assert!(!lazy(Arc::clone(&e)).transformed);
    }
}
