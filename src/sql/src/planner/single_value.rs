//! A scalar subquery's value as PostgreSQL defines it: NULL over no rows, the row's value over
//! one, and over more the error "more than one row returned by a subquery used as an
//! expression" (SQLSTATE 21000) — but only where the outer query reads it.
//!
//! `pg::subquery` writes a non-aggregating scalar subquery `(SELECT x FROM ...)` as
//! `eddy_one_row((SELECT eddy_single_value(x) FROM ...))`, an aggregate DataFusion decorrelates
//! into a join. A correlated subquery becomes an aggregation grouped by the correlation keys
//! over every inner row, so the aggregate cannot fail itself (a key the outer query never asks
//! for may have many rows): it returns `{value, many}` (NULL over no rows) and `eddy_one_row`
//! fails on `many` where the outer row reads it. In a materialized view the stream planner
//! keeps the first row by every column instead (`arbitrary.rs`), as `first_value` would.

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility};
use eddy_common::error::sqlstate;

/// The aggregate's name.
pub const NAME: &str = "eddy_single_value";

/// The name of the function that reads the aggregate's result.
pub const READ: &str = "eddy_one_row";

/// The aggregate's result type over values of type `value`.
fn result_type(value: &DataType) -> DataType {
    DataType::Struct(vec![Field::new("value", value.clone(), true), Field::new("many", DataType::Boolean, false)].into())
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SingleValue {
    signature: Signature,
}

fn too_many_rows() -> datafusion::error::DataFusionError {
    crate::planner::udf::user_error(sqlstate::CARDINALITY_VIOLATION, "more than one row returned by a subquery used as an expression".into())
}

impl AggregateUDFImpl for SingleValue {
    fn name(&self) -> &str {
        NAME
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        Ok(result_type(&args[0]))
    }
    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let value = args.input_fields[0].data_type().clone();
        Ok(vec![Arc::new(Field::new("value", value, true)), Arc::new(Field::new("rows", DataType::UInt64, true))])
    }
    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let value = args.exprs[0].data_type(args.schema)?;
        Ok(Box::new(Acc { value: ScalarValue::try_from(&value)?, rows: 0 }))
    }
}

/// The value seen and how many rows carried it (more than one is an error).
#[derive(Debug)]
struct Acc {
    value: ScalarValue,
    rows: u64,
}

impl Acc {
    fn add(&mut self, rows: u64, first: impl FnOnce() -> DfResult<ScalarValue>) -> DfResult<()> {
        if rows > 0 && self.rows == 0 {
            self.value = first()?;
        }
        self.rows = self.rows.saturating_add(rows);
        Ok(())
    }
}

impl Accumulator for Acc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let v = &values[0];
        self.add(v.len() as u64, || ScalarValue::try_from_array(v, 0))
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        use arrow::array::{Array, AsArray};
        let rows = states[1].as_primitive::<arrow::datatypes::UInt64Type>();
        for i in 0..rows.len() {
            let n = if rows.is_null(i) { 0 } else { rows.value(i) };
            self.add(n, || ScalarValue::try_from_array(&states[0], i))?;
        }
        Ok(())
    }
    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![self.value.clone(), ScalarValue::UInt64(Some(self.rows))])
    }
    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let ty = result_type(&self.value.data_type());
        if self.rows == 0 {
            return ScalarValue::try_from(&ty);
        }
        let value = if self.rows == 1 { self.value.clone() } else { ScalarValue::try_from(&self.value.data_type())? };
        let DataType::Struct(fields) = ty else { unreachable!("result_type is a struct") };
        let arrays = vec![value.to_array()?, Arc::new(arrow::array::BooleanArray::from(vec![self.rows > 1])) as ArrayRef];
        Ok(ScalarValue::Struct(Arc::new(arrow::array::StructArray::try_new(fields, arrays, None)?)))
    }
    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.value.size() - std::mem::size_of_val(&self.value)
    }
}

/// `eddy_one_row(r)`: the value of the aggregate's result `r`; NULL for NULL, 21000 if `many`.
/// Any other argument is its own value (a view's plan reads `first_value` instead).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ReadOneRow {
    signature: Signature,
}

impl datafusion::logical_expr::ScalarUDFImpl for ReadOneRow {
    fn name(&self) -> &str {
        READ
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        Ok(match &args[0] {
            DataType::Struct(f) if f.len() == 2 && f[1].name() == "many" => f[0].data_type().clone(),
            other => other.clone(),
        })
    }
    fn invoke_with_args(&self, args: datafusion::logical_expr::ScalarFunctionArgs) -> DfResult<datafusion::logical_expr::ColumnarValue> {
        use arrow::array::{Array, AsArray};
        use datafusion::logical_expr::ColumnarValue;
        let arg = &args.args[0];
        let arr = arg.to_array(args.number_rows)?;
        let Some(s) = arr.as_struct_opt() else { return Ok(arg.clone()) };
        let many = s.column(1).as_boolean();
        if (0..s.len()).any(|i| s.is_valid(i) && many.is_valid(i) && many.value(i)) {
            return Err(too_many_rows());
        }
        // A NULL result (no rows) is a NULL value.
        let value = match s.logical_nulls() {
            Some(n) if n.null_count() > 0 => {
                let absent: arrow::array::BooleanArray = n.iter().map(|valid| Some(!valid)).collect();
                arrow::compute::nullif(s.column(0), &absent)?
            }
            _ => s.column(0).clone(),
        };
        Ok(match arg {
            ColumnarValue::Scalar(_) => ColumnarValue::Scalar(ScalarValue::try_from_array(&value, 0)?),
            ColumnarValue::Array(_) => ColumnarValue::Array(value),
        })
    }
}

/// Registers `eddy_single_value` and `eddy_one_row` on `ctx`.
pub fn register(ctx: &datafusion::prelude::SessionContext) {
    ctx.register_udaf(AggregateUDF::new_from_impl(SingleValue { signature: Signature::any(1, Volatility::Immutable) }));
    ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(ReadOneRow { signature: Signature::any(1, Volatility::Immutable) }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int32Array;

    fn many(a: &mut Acc) -> bool {
        match a.evaluate().unwrap() {
            ScalarValue::Struct(s) => s.column(1).as_any().downcast_ref::<arrow::array::BooleanArray>().unwrap().value(0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_rows_is_null_one_is_its_value_and_two_are_many() {
        let mut a = Acc { value: ScalarValue::Int32(None), rows: 0 };
        assert!(a.evaluate().unwrap().is_null());
        a.update_batch(&[Arc::new(Int32Array::from(Vec::<i32>::new()))]).unwrap();
        a.update_batch(&[Arc::new(Int32Array::from(vec![7]))]).unwrap();
        assert!(!many(&mut a));
        a.update_batch(&[Arc::new(Int32Array::from(vec![8]))]).unwrap();
        assert!(many(&mut a));
        // A NULL row is a row.
        let mut b = Acc { value: ScalarValue::Int32(None), rows: 0 };
        b.update_batch(&[Arc::new(Int32Array::from(vec![None, Some(1)]))]).unwrap();
        assert!(many(&mut b));
    }
}
