//! PostgreSQL's result types for `sum` and `avg`, for queries and views alike:
//!
//! * `sum(bigint)` is `numeric` (DataFusion's is a `bigint` that wraps around on overflow): the
//!   argument is summed as `numeric(38,0)`.
//! * `avg` of integers is `numeric`, and of `numeric(p,s)` keeps at least 16 decimals, rounded
//!   half away from zero (DataFusion's is a `double`, or a truncated decimal): the argument is
//!   averaged as a decimal with one more digit than needed, and a projection above the
//!   aggregation rounds it to the result's scale.
//!
//! PostgreSQL picks the scale of each `avg` value by its magnitude (16 digits after the point
//! for averages from 1 to 9999, more below, fewer above); a column here has one scale, 16 (or
//! the input's, if larger), which matches PostgreSQL's text for averages from 1 to 9999.
//!
//! An analyzer rule, run before type coercion (which then fits the expressions above an
//! aggregation to the new types), so it sees the argument types as written.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::{cast, col, Aggregate, Expr, ExprSchemable, LogicalPlan, Projection};
use datafusion::optimizer::AnalyzerRule;

/// Decimal digits of `avg` results (PostgreSQL's for averages from 1 to 9999).
const AVG_SCALE: i8 = 16;

/// The session's analyzer rules: DataFusion's, with [`PgAggregates`] just before type coercion.
pub fn analyzer_rules() -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    let mut rules = datafusion::optimizer::Analyzer::new().rules;
    let at = rules.iter().position(|r| r.name() == "type_coercion").unwrap_or(rules.len());
    rules.insert(at, Arc::new(PgAggregates));
    rules
}

/// The analyzer rule of the module docs.
#[derive(Debug, Default)]
pub struct PgAggregates;

impl AnalyzerRule for PgAggregates {
    fn name(&self) -> &str {
        "eddy_pg_aggregates"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        // Nodes above a rewritten aggregation see new column types: their schemas are
        // recomputed on the way up.
        let mut changed_below = false;
        plan.transform_up_with_subqueries(|node| match node {
            LogicalPlan::Aggregate(a) => {
                let a = if changed_below { Aggregate::try_new(a.input, a.group_expr, a.aggr_expr)? } else { a };
                let t = rewrite_aggregate(a)?;
                changed_below |= t.transformed;
                Ok(t)
            }
            other if changed_below => Ok(Transformed::yes(other.recompute_schema()?)),
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
    }
}

/// What a call becomes: its new form, and the type its output is rounded to above (avg).
fn rewrite_call(e: &Expr, input: &datafusion::common::DFSchema) -> DfResult<Option<(Expr, Option<DataType>)>> {
    let Expr::AggregateFunction(AggregateFunction { func, params }) = e else { return Ok(None) };
    // DISTINCT too: the casts below are injective, so they keep the distinct values apart.
    if params.args.len() != 1 {
        return Ok(None);
    }
    let name = func.name().to_ascii_lowercase();
    let arg = &params.args[0];
    let ty = arg.get_type(input)?;
    let (arg_type, round_to) = match (name.as_str(), &ty) {
        ("sum", DataType::Int64 | DataType::UInt64) => (DataType::Decimal128(38, 0), None),
        ("avg" | "mean", DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 | DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64) => {
            // avg(decimal(p, s)) is decimal(p + 4, s + 4) in DataFusion.
            (DataType::Decimal128(33, AVG_SCALE + 1 - 4), Some(DataType::Decimal128(38, AVG_SCALE)))
        }
        ("avg" | "mean", DataType::Decimal128(p, s)) if *s <= 33 => {
            let scale = (*s).max(AVG_SCALE);
            let inner_scale = scale + 1 - 4;
            let inner_precision = (*p as i8 - *s + inner_scale).clamp(inner_scale.max(1), 34) as u8;
            (DataType::Decimal128(inner_precision, inner_scale), Some(DataType::Decimal128(38, scale)))
        }
        _ => return Ok(None),
    };
    let mut params = params.clone();
    params.args = vec![cast(arg.clone(), arg_type)];
    Ok(Some((Expr::AggregateFunction(AggregateFunction { func: func.clone(), params }), round_to)))
}

fn rewrite_aggregate(a: Aggregate) -> DfResult<Transformed<LogicalPlan>> {
    let input_schema = a.input.schema().clone();
    let mut changed = false;
    let mut rounded: Vec<(usize, DataType)> = Vec::new();
    let mut exprs = Vec::with_capacity(a.aggr_expr.len());
    for (i, e) in a.aggr_expr.iter().enumerate() {
        let (inner, alias) = match e {
            Expr::Alias(al) => (al.expr.as_ref(), Some(al.name.clone())),
            other => (other, None),
        };
        match rewrite_call(inner, &input_schema)? {
            Some((new, round_to)) => {
                changed = true;
                // Keep the output column's name: the plan above refers to it.
                let name = alias.unwrap_or_else(|| a.schema.field(a.group_expr.len() + i).name().clone());
                exprs.push(new.alias(name));
                if let Some(t) = round_to {
                    rounded.push((a.group_expr.len() + i, t));
                }
            }
            None => exprs.push(e.clone()),
        }
    }
    if !changed {
        return Ok(Transformed::no(LogicalPlan::Aggregate(a)));
    }
    let old_schema = a.schema.clone();
    // DataFusion names some distinct calls alike (`sum(b)` and `sum(b::int)` are both
    // "sum(t.b)"); such an aggregation keeps DataFusion's types.
    let Ok(new) = Aggregate::try_new(a.input.clone(), a.group_expr.clone(), exprs) else {
        return Ok(Transformed::no(LogicalPlan::Aggregate(a)));
    };
    let agg = LogicalPlan::Aggregate(new);
    if rounded.is_empty() {
        return Ok(Transformed::yes(agg));
    }
    // Round the averages to their result type, keeping every column's qualifier and name.
    let new_schema = agg.schema().clone();
    let projection = new_schema
        .iter()
        .enumerate()
        .zip(old_schema.iter())
        .map(|((i, (q, f)), (old_q, old_f))| {
            let c = col(datafusion::common::Column::new(q.cloned(), f.name()));
            let e = match rounded.iter().find(|(at, _)| *at == i) {
                Some((_, t)) => cast(c, t.clone()),
                None => c,
            };
            e.alias_qualified(old_q.cloned(), old_f.name())
        })
        .collect::<Vec<_>>();
    Ok(Transformed::yes(LogicalPlan::Projection(Projection::try_new(projection, Arc::new(agg))?)))
}

/// `array_agg` and `string_agg` without DataFusion's reversal: given `f(x ORDER BY k)` and
/// `f(y ORDER BY k DESC)` in one aggregation, DataFusion feeds both the input sorted by `k` and
/// runs the second "reversed", but its two-phase merge then loses the reversal (the second list
/// came out ascending). Refusing the reversal makes the second call sort its own values.
#[derive(Debug, PartialEq, Eq, Hash)]
struct NoReverse(datafusion::logical_expr::AggregateUDF);

/// Registers [`NoReverse`] forms of `array_agg` and `string_agg` on `ctx`, in place of
/// DataFusion's.
pub fn register(ctx: &datafusion::prelude::SessionContext) {
    for f in [datafusion::functions_aggregate::array_agg::array_agg_udaf(), datafusion::functions_aggregate::string_agg::string_agg_udaf()] {
        ctx.register_udaf(datafusion::logical_expr::AggregateUDF::new_from_impl(NoReverse(f.as_ref().clone())));
    }
}

mod no_reverse {
    use super::NoReverse;
    use arrow::datatypes::{DataType, FieldRef};
    use datafusion::common::Result as DfResult;
    use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
    use datafusion::logical_expr::utils::AggregateOrderSensitivity;
    use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Documentation, GroupsAccumulator, ReversedUDAF, Signature};
    use datafusion::scalar::ScalarValue;
    use std::sync::Arc;

    impl AggregateUDFImpl for NoReverse {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn aliases(&self) -> &[String] {
            self.0.aliases()
        }
        fn signature(&self) -> &Signature {
            self.0.signature()
        }
        fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
            self.0.return_type(args)
        }
        fn return_field(&self, args: &[FieldRef]) -> DfResult<FieldRef> {
            self.0.return_field(args)
        }
        fn is_nullable(&self) -> bool {
            self.0.is_nullable()
        }
        fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
            self.0.accumulator(args)
        }
        fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
            self.0.state_fields(args)
        }
        fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
            self.0.groups_accumulator_supported(args)
        }
        fn create_groups_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn GroupsAccumulator>> {
            self.0.create_groups_accumulator(args)
        }
        fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
            self.0.create_sliding_accumulator(args)
        }
        fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
            self.0.coerce_types(args)
        }
        fn with_beneficial_ordering(self: Arc<Self>, beneficial: bool) -> DfResult<Option<Arc<dyn AggregateUDFImpl>>> {
            Ok(self.0.clone().with_beneficial_ordering(beneficial)?.map(|f| Arc::new(NoReverse(f)) as _))
        }
        fn order_sensitivity(&self) -> AggregateOrderSensitivity {
            self.0.order_sensitivity()
        }
        fn reverse_expr(&self) -> ReversedUDAF {
            ReversedUDAF::NotSupported
        }
        fn default_value(&self, t: &DataType) -> DfResult<ScalarValue> {
            self.0.default_value(t)
        }
        fn supports_null_handling_clause(&self) -> bool {
            self.0.supports_null_handling_clause()
        }
        fn documentation(&self) -> Option<&Documentation> {
            self.0.documentation()
        }
    }
}
