//! PostgreSQL's result types for `sum`, `avg`, variances and standard deviations, for queries
//! and views alike:
//!
//! * `sum(bigint)` is `numeric` (DataFusion's is a `bigint` that wraps around on overflow): the
//!   argument is summed as `numeric(38,0)`.
//! * `avg` of integers and numerics is their numeric sum divided by their count, as in
//!   PostgreSQL: `sum` and `count` aggregate, and a projection above divides them with
//!   PostgreSQL's digits ([`super::numeric_div`]: 16 significant digits, more below 1, rounded
//!   half away from zero; DataFusion's is a `double`, or a truncated decimal).
//!
//! * `var_samp`/`var_pop`/`stddev_samp`/`stddev_pop` of integers and numerics are numerics
//!   combined from the count, sum and sum of squares (exact, so retractable in views).
//!
//! * `sum(interval)` and `avg(interval)`, which DataFusion lacks: `sum` and `avg` are
//!   registered as [`SumAvg`], DataFusion's own for every other type; over intervals, field-wise
//!   sums (an error when a field overflows, as in PostgreSQL), the average dividing them as
//!   PostgreSQL divides an interval.
//!
//! * An aggregate's computed arguments under `FILTER (WHERE p)` are evaluated only for the rows
//!   `p` keeps ([`filtered_arguments`]).
//! * `row_number`, `rank`, `dense_rank` are `bigint` and `ntile` is `integer` (DataFusion's are
//!   unsigned, so arithmetic on them was numeric): cast in a projection above the window.
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
            LogicalPlan::Window(w) => {
                let w = if changed_below { datafusion::logical_expr::Window::try_new(w.window_expr, w.input)? } else { w };
                let t = rewrite_window(w)?;
                changed_below |= t.transformed;
                Ok(t)
            }
            other if changed_below => {
                // Rewritten first: the old expressions may not type over the new inputs.
                let t = divide_numerics(other)?;
                Ok(Transformed::yes(t.data.recompute_schema()?))
            }
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
    }
}

/// Divisions above a rewritten aggregation that now have a numeric operand (`sum(bigint) / 3`,
/// `avg(x) / 3`), and products of its numerics too wide for DataFusion, divide as PostgreSQL divides numerics ([`super::numeric_div`]): the plan pass
/// that rewrites numeric divisions ran before the aggregates became numeric, and DataFusion's
/// own decimal division kept 4 decimals (0.6666 for 0.66666666666666666667).
fn divide_numerics(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    use datafusion::common::tree_node::TreeNode;
    use datafusion::logical_expr::{BinaryExpr, Operator};
    let schema = match &node {
        LogicalPlan::Projection(p) => p.input.schema().clone(),
        LogicalPlan::Filter(f) => f.input.schema().clone(),
        _ => return Ok(Transformed::no(node)),
    };
    let decimal = |e: &Expr| matches!(e.get_type(&schema), Ok(DataType::Decimal128(..)));
    let integer = |e: &Expr| e.get_type(&schema).is_ok_and(|t| t.is_integer());
    let divide = super::numeric_div::numeric_div_udf();
    let multiply = super::numeric_div::numeric_mul_udf();
    let scale = |e: &Expr| match e.get_type(&schema) {
        Ok(DataType::Decimal128(_, s)) => Some(i32::from(s)),
        _ => None,
    };
    super::names::map_expressions_keeping_names(node, |e| {
        e.transform_up(|e| match e {
            Expr::BinaryExpr(BinaryExpr { left, op: Operator::Divide, right })
                if (decimal(&left) && (decimal(&right) || integer(&right))) || (integer(&left) && decimal(&right)) =>
            {
                Ok(Transformed::yes(divide.call(vec![*left, *right])))
            }
            // A product whose scales add past 38 (`avg(x) * avg(x)`), which DataFusion refuses:
            // exact, as the plan pass computes such products of numerics it saw before.
            Expr::BinaryExpr(BinaryExpr { left, op: Operator::Multiply, right }) if scale(&left).zip(scale(&right)).is_some_and(|(l, r)| l + r > 38) => {
                Ok(Transformed::yes(multiply.call(vec![*left, *right])))
            }
            e => Ok(Transformed::no(e)),
        })
    })
}

/// What a call becomes.
enum Rewritten {
    /// A new form of the call (its argument cast).
    Call(Expr),
    /// `avg`: the sum and the count of its argument, divided above the aggregation.
    Average { sum: Expr, count: Expr },
    /// `var_*`/`stddev_*`: the count, sum and sum of squares of its argument, combined above
    /// the aggregation by `combine` ([`super::numeric_div::numeric_variance_udf`]).
    Variance { count: Expr, sum: Expr, squares: Expr, combine: Arc<datafusion::logical_expr::ScalarUDF> },
}

/// How a column of the old aggregation is read from the new one.
enum Read {
    Column(usize),
    /// An average: sum and count.
    Average(usize, usize),
    /// A variance: count, sum and sum of squares, and the function combining them.
    Variance([usize; 3], Arc<datafusion::logical_expr::ScalarUDF>),
    /// A column cast to PostgreSQL's type.
    Cast(usize, DataType),
}

/// The type `avg`'s argument of type `t` is summed as when `avg` is a sum divided by a count
/// (integers and numerics), else `None`.
fn avg_sum_type(t: &DataType) -> Option<DataType> {
    match t {
        DataType::Decimal128(_, s) if *s >= 0 => Some(DataType::Decimal128(38, *s)),
        t if t.is_integer() => Some(DataType::Decimal128(38, 0)),
        _ => None,
    }
}

/// The type `e` has once type coercion (which runs after this rule) has unified a CASE's
/// branches: before it, a CASE has its first branch's type, and `avg(CASE ... THEN <integer>
/// ELSE 99.99 END)` summed its values as integers (100).
fn coerced_type(e: &Expr, input: &datafusion::common::DFSchema) -> DfResult<DataType> {
    if let Expr::Case(c) = e {
        let thens = c.when_then_expr.iter().map(|(_, t)| t.get_type(input)).collect::<DfResult<Vec<_>>>()?;
        let otherwise = c.else_expr.as_ref().map(|x| x.get_type(input)).transpose()?;
        if let Some(t) = datafusion::logical_expr::type_coercion::other::get_coerce_type_for_case_expression(&thens, otherwise.as_ref()) {
            return Ok(t);
        }
    }
    e.get_type(input)
}

/// An expression without its alias, and the alias.
fn unaliased(e: &Expr) -> (&Expr, Option<String>) {
    match e {
        Expr::Alias(al) => (al.expr.as_ref(), Some(al.name.clone())),
        other => (other, None),
    }
}

/// `f(x) FILTER (WHERE p)` with its computed arguments as `CASE WHEN p THEN x END`: they are
/// evaluated only for the rows the filter keeps, as in PostgreSQL (DataFusion evaluated them on
/// every row, then dropped the filtered ones: `sum(10 / t) FILTER (WHERE t <> 0)` divided by
/// zero). `None` when nothing is to be guarded.
fn filtered_arguments(e: &Expr) -> Option<Expr> {
    let Expr::AggregateFunction(f) = e else { return None };
    let filter = f.params.filter.as_deref()?;
    let computed = |a: &Expr| !matches!(a, Expr::Column(_) | Expr::Literal(..));
    if !f.params.args.iter().any(computed) {
        return None;
    }
    let mut f = f.clone();
    f.params.args = f
        .params
        .args
        .into_iter()
        .map(|a| if computed(&a) { datafusion::logical_expr::when(filter.clone(), a).end().ok() } else { Some(a) })
        .collect::<Option<Vec<_>>>()?;
    Some(Expr::AggregateFunction(f))
}

/// The rewritten form of an aggregate call, if it has one.
fn rewrite_call(e: &Expr, input: &datafusion::common::DFSchema) -> DfResult<Option<Rewritten>> {
    let Expr::AggregateFunction(AggregateFunction { func, params }) = e else { return Ok(None) };
    // DISTINCT too: the casts below are injective, so they keep the distinct values apart.
    if params.args.len() != 1 {
        return Ok(None);
    }
    let name = func.name().to_ascii_lowercase();
    let arg = &params.args[0];
    let ty = coerced_type(arg, input)?;
    let call = |f: Arc<datafusion::logical_expr::AggregateUDF>, arg: Expr| {
        let mut params = params.clone();
        params.args = vec![arg];
        Expr::AggregateFunction(AggregateFunction { func: f, params })
    };
    match (name.as_str(), &ty) {
        ("sum", DataType::Int64 | DataType::UInt64) => Ok(Some(Rewritten::Call(call(func.clone(), cast(arg.clone(), DataType::Decimal128(38, 0)))))),
        // PostgreSQL's avg of integers and numerics is their numeric sum divided by their
        // count (its digits: `numeric_div`).
        ("avg" | "mean", _) => Ok(avg_sum_type(&ty).map(|t| {
            let sum = call(datafusion::functions_aggregate::sum::sum_udaf(), cast(arg.clone(), t));
            Rewritten::Average { sum, count: call(datafusion::functions_aggregate::count::count_udaf(), arg.clone()) }
        })),
        // PostgreSQL's variance and standard deviation of integers and numerics are numerics
        // computed from exact sums (DataFusion's are doubles: 4.333333333333333 for
        // 4.3333333333333333). Not DISTINCT: the squares of distinct values need not be
        // distinct. Numerics wider than 18 digits keep DataFusion's (their squares would not
        // fit).
        ("var" | "var_samp" | "var_sample" | "var_pop" | "var_population" | "stddev" | "stddev_samp" | "stddev_pop", _) if !params.distinct => {
            let Some(t) = avg_sum_type(&ty).filter(|_| matches!(ty, DataType::Decimal128(p, _) if p <= 18) || ty.is_integer()) else {
                return Ok(None);
            };
            let x = cast(arg.clone(), t);
            let sum = datafusion::functions_aggregate::sum::sum_udaf();
            let sample = !name.ends_with("pop") && !name.ends_with("population");
            Ok(Some(Rewritten::Variance {
                count: call(datafusion::functions_aggregate::count::count_udaf(), arg.clone()),
                sum: call(sum.clone(), x.clone()),
                squares: call(sum, x.clone() * x),
                combine: super::numeric_div::numeric_variance_udf(sample, name.starts_with("stddev")),
            }))
        }
        _ => Ok(None),
    }
}

fn rewrite_aggregate(a: Aggregate) -> DfResult<Transformed<LogicalPlan>> {
    let input_schema = a.input.schema().clone();
    // Output columns before the aggregates: the group expressions (of grouping sets: each
    // distinct one, and the grouping id).
    let groups = a.schema.fields().len() - a.aggr_expr.len();
    let mut changed = false;
    // For each output column of the old aggregation: the new column(s) it is read from.
    let mut reads: Vec<Read> = (0..groups).map(Read::Column).collect();
    let mut exprs: Vec<Expr> = Vec::with_capacity(a.aggr_expr.len());
    // The column of a new call: an equal one already there is read again (`avg(x)` and
    // `stddev(x)` both count x), so the aggregation computes no call twice.
    let column_of = |exprs: &mut Vec<Expr>, call: Expr, name: String| -> usize {
        match exprs.iter().position(|e| unaliased(e).0 == &call) {
            Some(k) => groups + k,
            None => {
                exprs.push(call.alias(name));
                groups + exprs.len() - 1
            }
        }
    };
    for (i, e) in a.aggr_expr.iter().enumerate() {
        let (inner, alias) = unaliased(e);
        // Keep the output column's name: the plan above refers to it.
        let name = alias.unwrap_or_else(|| a.schema.field(groups + i).name().clone());
        let at = groups + exprs.len();
        let guarded = filtered_arguments(inner);
        let inner = guarded.as_ref().unwrap_or(inner);
        changed |= guarded.is_some();
        match rewrite_call(inner, &input_schema)? {
            None if guarded.is_some() => {
                exprs.push(inner.clone().alias(name));
                reads.push(Read::Column(at));
            }
            Some(Rewritten::Call(new)) => {
                changed = true;
                exprs.push(new.alias(name));
                reads.push(Read::Column(at));
            }
            Some(Rewritten::Average { sum, count }) => {
                changed = true;
                let sum = column_of(&mut exprs, sum, format!("{name} (sum)"));
                let count = column_of(&mut exprs, count, format!("{name} (count)"));
                reads.push(Read::Average(sum, count));
            }
            Some(Rewritten::Variance { count, sum, squares, combine }) => {
                changed = true;
                let count = column_of(&mut exprs, count, format!("{name} (count)"));
                let sum = column_of(&mut exprs, sum, format!("{name} (sum)"));
                let squares = column_of(&mut exprs, squares, format!("{name} (squares)"));
                reads.push(Read::Variance([count, sum, squares], combine));
            }
            None => {
                exprs.push(e.clone());
                reads.push(Read::Column(at));
            }
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
    if reads.iter().all(|r| matches!(r, Read::Column(_))) && agg.schema().fields().len() == old_schema.fields().len() {
        return Ok(Transformed::yes(agg));
    }
    // Divide the averages, keeping every column's qualifier and name.
    Ok(Transformed::yes(divide_averages(agg, &old_schema, &reads)?))
}

/// `avg(x) OVER (...)` of integers or numerics as `sum(x) OVER (...)` divided by
/// `count(x) OVER (...)` with PostgreSQL's digits, as an aggregation's `avg` (DataFusion's is a
/// `double` for integers).
fn rewrite_window(mut w: datafusion::logical_expr::Window) -> DfResult<Transformed<LogicalPlan>> {
    use datafusion::logical_expr::expr::{WindowFunction, WindowFunctionDefinition};
    let input_schema = w.input.schema().clone();
    let inputs = input_schema.fields().len();
    let mut changed = false;
    // `agg(x) FILTER (WHERE p) OVER (...)` evaluates `x` only where `p` holds, as an
    // aggregation's FILTER does (`filtered_arguments`).
    for (i, e) in w.window_expr.iter_mut().enumerate() {
        let (inner, alias) = unaliased(e);
        let Expr::WindowFunction(f) = inner else { continue };
        let Some(filter) = f.params.filter.as_deref() else { continue };
        let computed = |a: &Expr| !matches!(a, Expr::Column(_) | Expr::Literal(..));
        if !f.params.args.iter().any(computed) {
            continue;
        }
        let mut f = f.as_ref().clone();
        let args = f.params.args.iter().map(|a| if computed(a) { datafusion::logical_expr::when(filter.clone(), a.clone()).end() } else { Ok(a.clone()) });
        f.params.args = args.collect::<DfResult<Vec<_>>>()?;
        let name = alias.unwrap_or_else(|| w.schema.field(inputs + i).name().clone());
        *e = Expr::WindowFunction(Box::new(f)).alias(name);
        changed = true;
    }
    let mut reads: Vec<Read> = (0..inputs).map(Read::Column).collect();
    let mut exprs = Vec::with_capacity(w.window_expr.len());
    for (i, e) in w.window_expr.iter().enumerate() {
        let (inner, alias) = unaliased(e);
        let at = inputs + exprs.len();
        let average = match inner {
            Expr::WindowFunction(f) => match &f.fun {
                WindowFunctionDefinition::AggregateUDF(u) if matches!(u.name().to_ascii_lowercase().as_str(), "avg" | "mean") && f.params.args.len() == 1 => {
                    avg_sum_type(&f.params.args[0].get_type(&input_schema)?).map(|t| (f, t))
                }
                _ => None,
            },
            _ => None,
        };
        // `sum(bigint) OVER (...)` is numeric, as the aggregate is (it wrapped past 2^63).
        let wide_sum = match inner {
            Expr::WindowFunction(f) => match &f.fun {
                WindowFunctionDefinition::AggregateUDF(u)
                    if u.name().eq_ignore_ascii_case("sum") && f.params.args.len() == 1 && matches!(f.params.args[0].get_type(&input_schema)?, DataType::Int64 | DataType::UInt64) =>
                {
                    Some(f)
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(f) = wide_sum {
            changed = true;
            let name = alias.unwrap_or_else(|| w.schema.field(inputs + i).name().clone());
            let mut f = f.as_ref().clone();
            f.params.args = vec![cast(f.params.args[0].clone(), DataType::Decimal128(38, 0))];
            exprs.push(Expr::WindowFunction(Box::new(f)).alias(name));
            reads.push(Read::Column(at));
            continue;
        }
        match average {
            Some((f, sum_type)) => {
                changed = true;
                let name = alias.unwrap_or_else(|| w.schema.field(inputs + i).name().clone());
                let over = |fun: Arc<datafusion::logical_expr::AggregateUDF>, arg: Expr| {
                    let mut params = f.params.clone();
                    params.args = vec![arg];
                    Expr::WindowFunction(Box::new(WindowFunction { fun: WindowFunctionDefinition::AggregateUDF(fun), params }))
                };
                let arg = f.params.args[0].clone();
                exprs.push(over(datafusion::functions_aggregate::sum::sum_udaf(), cast(arg.clone(), sum_type)).alias(format!("{name} (sum)")));
                exprs.push(over(datafusion::functions_aggregate::count::count_udaf(), arg).alias(format!("{name} (count)")));
                reads.push(Read::Average(at, at + 1));
            }
            None => {
                exprs.push(e.clone());
                reads.push(match ranking_type(inner, w.schema.field(inputs + i).data_type()) {
                    Some(t) => {
                        changed = true;
                        Read::Cast(at, t)
                    }
                    None => Read::Column(at),
                });
            }
        }
    }
    if !changed {
        return Ok(Transformed::no(LogicalPlan::Window(w)));
    }
    let old_schema = w.schema.clone();
    let window = LogicalPlan::Window(datafusion::logical_expr::Window::try_new(exprs, w.input.clone())?);
    Ok(Transformed::yes(divide_averages(window, &old_schema, &reads)?))
}

/// PostgreSQL's type of a ranking function DataFusion types `UInt64` (`row_number`, `rank`,
/// `dense_rank`: `bigint`; `ntile`: `integer`), so arithmetic on them is integer arithmetic
/// (`row_number() OVER w / 2` was a numeric 0.5).
fn ranking_type(e: &Expr, t: &DataType) -> Option<DataType> {
    let Expr::WindowFunction(f) = e else { return None };
    (*t == DataType::UInt64).then(|| if f.fun.name() == "ntile" { DataType::Int32 } else { DataType::Int64 })
}

/// A projection over `plan` giving `old_schema`'s columns: each read from one of `plan`'s
/// columns, or combined from several (an average, a variance).
fn divide_averages(plan: LogicalPlan, old_schema: &datafusion::common::DFSchema, reads: &[Read]) -> DfResult<LogicalPlan> {
    let new_schema = plan.schema().clone();
    let column = |i: usize| {
        let (q, f) = new_schema.qualified_field(i);
        col(datafusion::common::Column::new(q.cloned(), f.name()))
    };
    let divide = super::numeric_div::numeric_div_udf();
    let projection = reads
        .iter()
        .zip(old_schema.iter())
        .map(|(r, (old_q, old_f))| {
            let e = match r {
                Read::Average(sum, count) => divide.call(vec![column(*sum), column(*count)]),
                Read::Variance(cols, combine) => combine.call(cols.iter().map(|c| column(*c)).collect()),
                Read::Column(c) => column(*c),
                Read::Cast(c, t) => cast(column(*c), t.clone()),
            };
            e.alias_qualified(old_q.cloned(), old_f.name())
        })
        .collect::<Vec<_>>();
    Ok(LogicalPlan::Projection(Projection::try_new(projection, Arc::new(plan))?))
}

/// DataFusion's aggregate `inner` with one of two changes:
///
/// * `array_agg` and `string_agg` without DataFusion's reversal (`keep_reverse` false): given
///   `f(x ORDER BY k)` and `f(y ORDER BY k DESC)` in one aggregation, DataFusion feeds both the
///   input sorted by `k` and runs the second "reversed", but its two-phase merge then loses the
///   reversal (the second list came out ascending). Refusing the reversal makes the second call
///   sort its own values.
/// * `min` and `max` of floats per group with the row accumulator (`float_groups` false):
///   DataFusion's grouped one replaces the running value whenever a comparison with NaN is
///   undefined, so a group's `max` was NaN or not depending on the rows after it (PostgreSQL
///   orders NaN above every number; the row accumulator does too).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Adjusted {
    inner: datafusion::logical_expr::AggregateUDF,
    keep_reverse: bool,
    float_groups: bool,
}

/// Registers the [`Adjusted`] forms of `array_agg`, `string_agg`, `min` and `max`, and
/// [`SumAvg`], on `ctx` in place of DataFusion's.
pub fn register(ctx: &datafusion::prelude::SessionContext) {
    use datafusion::functions_aggregate::{array_agg, min_max, string_agg};
    for f in [array_agg::array_agg_udaf(), string_agg::string_agg_udaf()] {
        ctx.register_udaf(datafusion::logical_expr::AggregateUDF::new_from_impl(Adjusted { inner: f.as_ref().clone(), keep_reverse: false, float_groups: true }));
    }
    for f in [min_max::min_udaf(), min_max::max_udaf()] {
        ctx.register_udaf(datafusion::logical_expr::AggregateUDF::new_from_impl(Adjusted { inner: f.as_ref().clone(), keep_reverse: true, float_groups: false }));
    }
    for (avg, f) in [(false, datafusion::functions_aggregate::sum::sum_udaf()), (true, datafusion::functions_aggregate::average::avg_udaf())] {
        ctx.register_udaf(datafusion::logical_expr::AggregateUDF::new_from_impl(SumAvg { avg, inner: f.as_ref().clone(), signature: datafusion::logical_expr::Signature::user_defined(datafusion::logical_expr::Volatility::Immutable) }));
    }
}

mod adjusted {
    use super::Adjusted;
    use arrow::datatypes::{DataType, FieldRef};
    use datafusion::common::Result as DfResult;
    use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
    use datafusion::logical_expr::utils::AggregateOrderSensitivity;
    use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Documentation, GroupsAccumulator, ReversedUDAF, Signature};
    use datafusion::scalar::ScalarValue;
    use std::sync::Arc;

    impl AggregateUDFImpl for Adjusted {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn aliases(&self) -> &[String] {
            self.inner.aliases()
        }
        fn signature(&self) -> &Signature {
            self.inner.signature()
        }
        fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
            self.inner.return_type(args)
        }
        fn return_field(&self, args: &[FieldRef]) -> DfResult<FieldRef> {
            self.inner.return_field(args)
        }
        fn is_nullable(&self) -> bool {
            self.inner.is_nullable()
        }
        fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
            self.inner.accumulator(args)
        }
        fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
            self.inner.state_fields(args)
        }
        fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
            if !self.float_groups && args.return_field.data_type().is_floating() {
                return false;
            }
            self.inner.groups_accumulator_supported(args)
        }
        fn create_groups_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn GroupsAccumulator>> {
            self.inner.create_groups_accumulator(args)
        }
        fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
            self.inner.create_sliding_accumulator(args)
        }
        fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
            self.inner.coerce_types(args)
        }
        fn with_beneficial_ordering(self: Arc<Self>, beneficial: bool) -> DfResult<Option<Arc<dyn AggregateUDFImpl>>> {
            let Some(inner) = self.inner.clone().with_beneficial_ordering(beneficial)? else { return Ok(None) };
            Ok(Some(Arc::new(Adjusted { inner, keep_reverse: self.keep_reverse, float_groups: self.float_groups })))
        }
        fn order_sensitivity(&self) -> AggregateOrderSensitivity {
            self.inner.order_sensitivity()
        }
        fn reverse_expr(&self) -> ReversedUDAF {
            if self.keep_reverse {
                return self.inner.reverse_udf();
            }
            ReversedUDAF::NotSupported
        }
        fn default_value(&self, t: &DataType) -> DfResult<ScalarValue> {
            self.inner.default_value(t)
        }
        fn supports_null_handling_clause(&self) -> bool {
            self.inner.supports_null_handling_clause()
        }
        fn documentation(&self) -> Option<&Documentation> {
            self.inner.documentation()
        }
    }
}

/// `sum` / `avg`: DataFusion's, and over intervals months, days and nanoseconds summed apart
/// (views keep the same sums, `hash_agg`'s `SumInterval`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct SumAvg {
    /// The average rather than the sum.
    avg: bool,
    /// DataFusion's function, for every other type.
    inner: datafusion::logical_expr::AggregateUDF,
    signature: datafusion::logical_expr::Signature,
}

mod interval_sum {
    use eddy_common::interval::IntervalSums;
    use super::SumAvg;
    use datafusion::logical_expr::utils::AggregateOrderSensitivity;
    use datafusion::logical_expr::{Documentation, GroupsAccumulator, ReversedUDAF};
    use arrow::array::{Array, ArrayRef, AsArray};
    use arrow::datatypes::{DataType, Field, FieldRef, IntervalMonthDayNanoType, IntervalUnit};
    use datafusion::common::Result as DfResult;
    use datafusion::error::DataFusionError;
    use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
    use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature};
    use datafusion::scalar::ScalarValue;
    use std::sync::Arc;

    fn is_interval(t: &DataType) -> bool {
        matches!(t, DataType::Interval(_))
    }

    impl AggregateUDFImpl for SumAvg {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn aliases(&self) -> &[String] {
            self.inner.aliases()
        }
        fn signature(&self) -> &Signature {
            &self.signature
        }
        fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
            if let [t] = args {
                if is_interval(t) {
                    return Ok(vec![DataType::Interval(IntervalUnit::MonthDayNano)]);
                }
            }
            let fields: Vec<FieldRef> = args.iter().map(|t| Arc::new(Field::new("x", t.clone(), true))).collect();
            let coerced = datafusion::logical_expr::type_coercion::functions::fields_with_udf(&fields, &self.inner)?;
            Ok(coerced.iter().map(|f| f.data_type().clone()).collect())
        }
        fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
            match args {
                [t] if is_interval(t) => Ok(DataType::Interval(IntervalUnit::MonthDayNano)),
                _ => self.inner.return_type(args),
            }
        }
        fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
            !is_interval(args.expr_fields[0].data_type()) && self.inner.groups_accumulator_supported(args)
        }
        fn create_groups_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn GroupsAccumulator>> {
            self.inner.create_groups_accumulator(args)
        }
        fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
            if is_interval(args.expr_fields[0].data_type()) {
                return self.accumulator(args);
            }
            self.inner.create_sliding_accumulator(args)
        }
        fn reverse_expr(&self) -> ReversedUDAF {
            ReversedUDAF::Identical
        }
        fn order_sensitivity(&self) -> AggregateOrderSensitivity {
            self.inner.order_sensitivity()
        }
        fn default_value(&self, t: &DataType) -> DfResult<ScalarValue> {
            self.inner.default_value(t)
        }
        fn documentation(&self) -> Option<&Documentation> {
            self.inner.documentation()
        }
        fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
            if !is_interval(args.input_fields[0].data_type()) {
                return self.inner.state_fields(args);
            }
            Ok(["months", "days", "nanos", "n"]
                .iter()
                .map(|f| {
                    let t = if *f == "nanos" { DataType::Decimal128(38, 0) } else { DataType::Int64 };
                    Arc::new(Field::new(format!("{}[{f}]", args.name), t, true))
                })
                .collect())
        }
        fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
            if !is_interval(args.expr_fields[0].data_type()) {
                return self.inner.accumulator(args);
            }
            if args.is_distinct {
                return Err(DataFusionError::NotImplemented(format!("{}(DISTINCT interval)", self.inner.name())));
            }
            Ok(Box::new(Sums { avg: self.avg, sums: IntervalSums::default() }))
        }
    }

    #[derive(Debug)]
    struct Sums {
        avg: bool,
        sums: IntervalSums,
    }

    impl Sums {
        fn add(&mut self, values: &ArrayRef, sign: i64) {
            for x in values.as_primitive::<IntervalMonthDayNanoType>().iter().flatten() {
                self.sums.add(x, sign);
            }
        }
    }

    impl Accumulator for Sums {
        fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
            self.add(&values[0], 1);
            Ok(())
        }
        fn retract_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
            self.add(&values[0], -1);
            Ok(())
        }
        fn supports_retract_batch(&self) -> bool {
            true
        }
        fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
            let ints = |i: usize| states[i].as_primitive::<arrow::datatypes::Int64Type>().clone();
            let (months, days, n) = (ints(0), ints(1), ints(3));
            let nanos = states[2].as_primitive::<arrow::datatypes::Decimal128Type>();
            for row in 0..n.len() {
                if n.is_valid(row) {
                    self.sums.months += months.value(row);
                    self.sums.days += days.value(row);
                    self.sums.nanos += nanos.value(row);
                    self.sums.n += n.value(row);
                }
            }
            Ok(())
        }
        fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
            let s = &self.sums;
            Ok(vec![
                ScalarValue::Int64(Some(s.months)),
                ScalarValue::Int64(Some(s.days)),
                ScalarValue::Decimal128(Some(s.nanos), 38, 0),
                ScalarValue::Int64(Some(s.n)),
            ])
        }
        fn evaluate(&mut self) -> DfResult<ScalarValue> {
            Ok(ScalarValue::IntervalMonthDayNano(self.sums.value(self.avg).map_err(|e| DataFusionError::External(Box::new(e)))?))
        }
        fn size(&self) -> usize {
            std::mem::size_of_val(self)
        }
    }
}
