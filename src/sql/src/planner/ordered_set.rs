//! PostgreSQL's ordered-set aggregates for queries: `percentile_cont(p)`, `percentile_disc(p)`
//! and `mode()` `WITHIN GROUP (ORDER BY x [DESC])`, with `p` a constant fraction or an array
//! of them (one result per fraction). They replace DataFusion's `percentile_cont`, which
//! quantizes its interpolation weight to 1e-6 and so differs from PostgreSQL in the last
//! digits. Positions come from [`eddy_common::percentile`], which views use too, so a view
//! and the query it was defined by agree.
//!
//! The group's non-null values are kept and sorted at the end, as PostgreSQL does.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, Signature, Volatility};
use datafusion::prelude::SessionContext;
use eddy_common::percentile::{ordered_set_result, Fractions, OrderedSet};

/// Registers the three on `ctx`.
pub fn register(ctx: &SessionContext) {
    for kind in [OrderedSet::Cont, OrderedSet::Disc, OrderedSet::Mode] {
        ctx.register_udaf(AggregateUDF::new_from_impl(OrderedSetUdaf { kind, signature: Signature::user_defined(Volatility::Immutable) }));
    }
}

/// The value of `e` when it reads no column (it is evaluated over one row of no columns);
/// `None` when it is not a single value.
pub fn constant_value(e: &Arc<dyn datafusion::physical_expr::PhysicalExpr>) -> DfResult<Option<ScalarValue>> {
    let one_row = RecordBatch::try_new_with_options(Arc::new(Schema::empty()), vec![], &arrow::array::RecordBatchOptions::new().with_row_count(Some(1)))?;
    Ok(match e.evaluate(&one_row)? {
        ColumnarValue::Scalar(v) => Some(v),
        ColumnarValue::Array(a) if a.len() == 1 => Some(ScalarValue::try_from_array(&a, 0)?),
        ColumnarValue::Array(_) => None,
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct OrderedSetUdaf {
    kind: OrderedSet,
    signature: Signature,
}

fn plan_err(msg: String) -> DataFusionError {
    DataFusionError::Plan(msg)
}

/// Keeps an Eddy error's SQLSTATE through DataFusion.
fn external(e: eddy_common::EddyError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

impl AggregateUDFImpl for OrderedSetUdaf {
    fn name(&self) -> &str {
        self.kind.name()
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        let want = if self.kind == OrderedSet::Mode { 1 } else { 2 };
        if args.len() != want {
            return Err(plan_err(format!("{}() WITHIN GROUP (ORDER BY x) takes {} direct argument(s)", self.kind.name(), want - 1)));
        }
        let mut out = args.to_vec();
        if self.kind == OrderedSet::Cont {
            if !(args[0].is_numeric() || args[0].is_null()) {
                return Err(plan_err(format!("function percentile_cont(double precision) does not take {} values", args[0])));
            }
            out[0] = DataType::Float64;
        }
        if want == 2 {
            out[1] = match &args[1] {
                DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => DataType::new_list(DataType::Float64, true),
                _ => DataType::Float64,
            };
        }
        Ok(out)
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        let value = match (self.kind, &args[0]) {
            (OrderedSet::Cont, _) | (_, DataType::Null) => DataType::Float64,
            (_, t) => t.clone(),
        };
        Ok(match args.get(1) {
            Some(DataType::List(_)) => DataType::new_list(value, true),
            _ => value,
        })
    }
    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let t = args.input_fields[0].data_type().clone();
        Ok(vec![Arc::new(Field::new(format!("{}[values]", args.name), DataType::new_list(t, true), true))])
    }
    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let fractions = match args.exprs.get(1) {
            None => Fractions::None,
            Some(e) => match constant_value(e) {
                Ok(Some(v)) => Fractions::from_scalar(&v).map_err(external)?,
                _ => return Err(plan_err(format!("the fraction of {}() must be a constant", self.kind.name()))),
            },
        };
        let descending = args.order_bys.first().is_some_and(|o| o.options.descending);
        Ok(Box::new(OrderedSetAcc {
            kind: self.kind,
            fractions,
            descending,
            data_type: args.expr_fields[0].data_type().clone(),
            values: Vec::new(),
            output: args.return_field.data_type().clone(),
        }))
    }
    fn supports_within_group_clause(&self) -> bool {
        true
    }
}

#[derive(Debug)]
struct OrderedSetAcc {
    kind: OrderedSet,
    fractions: Fractions,
    descending: bool,
    data_type: DataType,
    /// Non-null input values, in arrival order.
    values: Vec<ArrayRef>,
    output: DataType,
}

impl OrderedSetAcc {
    fn push(&mut self, a: &ArrayRef) -> DfResult<()> {
        let a = if a.null_count() > 0 { arrow::compute::filter(a, &arrow::compute::is_not_null(a)?)? } else { a.clone() };
        if !a.is_empty() {
            self.values.push(a);
        }
        Ok(())
    }

    fn all(&self) -> DfResult<ArrayRef> {
        if self.values.is_empty() {
            return Ok(arrow::array::new_empty_array(&self.data_type));
        }
        let parts: Vec<&dyn Array> = self.values.iter().map(|a| a.as_ref()).collect();
        Ok(arrow::compute::concat(&parts)?)
    }
}

impl Accumulator for OrderedSetAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        self.push(&values[0])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let lists = states[0].as_list::<i32>();
        for i in 0..lists.len() {
            if lists.is_valid(i) {
                self.push(&lists.value(i))?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let all = self.all()?;
        self.values = vec![all.clone()];
        Ok(vec![ScalarValue::List(Arc::new(SingleRowListArrayBuilder::new(all).with_nullable(true).build_list_array()))])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let all = self.all()?;
        let order = arrow::compute::sort_to_indices(&all, Some(SortOptions::new(self.descending, false)), None)?;
        let sorted = arrow::compute::take(&all, &order, None)?;
        ordered_set_result(self.kind, &self.fractions, &sorted, &self.output).map_err(external)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.values.iter().map(|a| a.get_array_memory_size()).sum::<usize>()
    }
}
