//! Plan passes (before type coercion) giving operations PostgreSQL's operand and result types
//! where DataFusion's differ:
//!
//! * `date - date` is an integer (DataFusion's is a bigint): [`date_differences`].
//! * `x::text` of a jsonb or uuid value is plain text: [`unmarked_text_casts`].
//! * Comparisons (also BETWEEN and IN lists) of a floating-point value with a numeric one are
//!   made in double precision, as PostgreSQL resolves them (`float8 = numeric` has no operator
//!   of its own; the float8 one is chosen): [`float_comparisons`]. DataFusion cast the float to
//!   a 30-digit decimal instead, so `f BETWEEN -1e6 AND 1e6` failed on any `f` past 1e15
//!   (22003 "numeric field overflow") and compared rounded values. So are CASE branches,
//!   COALESCE/NULLIF/GREATEST/LEAST arguments and UNION columns that mix the two.

use arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::DFSchema;
use datafusion::logical_expr::{Between, BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, Operator};

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64)
}

fn is_decimal(t: &DataType) -> bool {
    matches!(t, DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..))
}

/// Whether `exprs` mix floating-point and numeric operands (and nothing else untyped-looking).
fn mixes_float_and_numeric(exprs: &[&Expr], schema: &DFSchema) -> bool {
    let types: Vec<DataType> = exprs.iter().filter_map(|e| e.get_type(schema).ok()).collect();
    types.len() == exprs.len() && types.iter().any(is_float) && types.iter().any(is_decimal)
}

/// `e` in double precision, unless it is already.
fn double(e: Expr, schema: &DFSchema) -> Expr {
    match e.get_type(schema) {
        Ok(DataType::Float64) => e,
        _ => Expr::Cast(Cast::new(Box::new(e), DataType::Float64)),
    }
}

fn retype(e: Expr, schema: &DFSchema) -> datafusion::error::Result<Transformed<Expr>> {
    Ok(match e {
        Expr::BinaryExpr(b)
            if matches!(b.op, Operator::Eq | Operator::NotEq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq | Operator::IsDistinctFrom | Operator::IsNotDistinctFrom)
                && mixes_float_and_numeric(&[&b.left, &b.right], schema) =>
        {
            let BinaryExpr { left, op, right } = b;
            Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(Box::new(double(*left, schema)), op, Box::new(double(*right, schema)))))
        }
        Expr::Between(b) if mixes_float_and_numeric(&[&b.expr, &b.low, &b.high], schema) => {
            let Between { expr, negated, low, high } = b;
            let (expr, low, high) = (double(*expr, schema), double(*low, schema), double(*high, schema));
            Transformed::yes(Expr::Between(Between::new(Box::new(expr), negated, Box::new(low), Box::new(high))))
        }
        // CASE branches and COALESCE/NULLIF/GREATEST/LEAST arguments: double precision, as
        // PostgreSQL resolves float8 with numeric (DataFusion made them a 30-digit numeric:
        // `COALESCE(f, 0.0)` was numeric and failed past 1e15).
        Expr::Case(mut c)
            if mixes_float_and_numeric(&c.when_then_expr.iter().map(|(_, t)| t.as_ref()).chain(c.else_expr.as_deref()).collect::<Vec<_>>(), schema) =>
        {
            c.when_then_expr = std::mem::take(&mut c.when_then_expr).into_iter().map(|(w, t)| (w, Box::new(double(*t, schema)))).collect();
            c.else_expr = c.else_expr.map(|e| Box::new(double(*e, schema)));
            Transformed::yes(Expr::Case(c))
        }
        Expr::ScalarFunction(mut f)
            if matches!(f.func.name(), "coalesce" | "nullif" | "greatest" | "least") && mixes_float_and_numeric(&f.args.iter().collect::<Vec<_>>(), schema) =>
        {
            f.args = std::mem::take(&mut f.args).into_iter().map(|a| double(a, schema)).collect();
            Transformed::yes(Expr::ScalarFunction(f))
        }
        Expr::InList(mut l) if mixes_float_and_numeric(&std::iter::once(l.expr.as_ref()).chain(l.list.iter()).collect::<Vec<_>>(), schema) => {
            let list = std::mem::take(&mut l.list);
            l.list = list.into_iter().map(|v| double(v, schema)).collect();
            l.expr = Box::new(double(*l.expr, schema));
            Transformed::yes(Expr::InList(l))
        }
        other => Transformed::no(other),
    })
}

/// The pass of comparisons and of branches (see the module docs).
pub fn float_comparisons(plan: LogicalPlan) -> datafusion::error::Result<LogicalPlan> {
    float_unions(map_plan(plan, retype)?)
}

/// A column that is a float in one input of a UNION (or INTERSECT, EXCEPT: unions of marked
/// rows by then) and a numeric in another is double precision in all of them.
fn float_unions(plan: LogicalPlan) -> datafusion::error::Result<LogicalPlan> {
    use std::sync::Arc;
    let changed = std::cell::Cell::new(false);
    let out = plan.transform_up_with_subqueries(|node| {
        let node = if changed.get() { node.recompute_schema()? } else { node };
        let LogicalPlan::Union(u) = &node else { return Ok(Transformed::no(node)) };
        let width = u.schema.fields().len();
        let mixed: Vec<usize> = (0..width)
            .filter(|&c| {
                let types: Vec<&DataType> = u.inputs.iter().filter_map(|i| i.schema().fields().get(c).map(|f| f.data_type())).collect();
                types.iter().any(|t| is_float(t)) && types.iter().any(|t| is_decimal(t))
            })
            .collect();
        if mixed.is_empty() {
            return Ok(Transformed::no(node));
        }
        let inputs = u
            .inputs
            .iter()
            .map(|input| {
                let exprs = input.schema().iter().enumerate().map(|(c, (q, f))| {
                    let column = Expr::Column(datafusion::common::Column::new(q.cloned(), f.name()));
                    if mixed.contains(&c) && f.data_type() != &DataType::Float64 {
                        Expr::Cast(Cast::new(Box::new(column), DataType::Float64)).alias_qualified(q.cloned(), f.name())
                    } else {
                        column
                    }
                });
                Ok(Arc::new(LogicalPlan::Projection(datafusion::logical_expr::Projection::try_new(exprs.collect(), Arc::clone(input))?)))
            })
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        changed.set(true);
        Ok(Transformed::yes(LogicalPlan::Union(datafusion::logical_expr::Union::try_new_with_loose_types(inputs)?)))
    })?;
    Ok(out.data)
}

/// `plan` with `f` applied to the expressions of its filters, projections, aggregations and
/// joins (and their subqueries'), a changed expression keeping its name and every node from
/// the first change on recomputing its schema (a type may have changed).
fn map_plan(plan: LogicalPlan, f: impl Fn(Expr, &DFSchema) -> datafusion::error::Result<Transformed<Expr>>) -> datafusion::error::Result<LogicalPlan> {
    let changed = std::cell::Cell::new(false);
    let out = plan.transform_up_with_subqueries(|node| {
        let node = if changed.get() { node.recompute_schema()? } else { node };
        let Some(schema) = super::timestamps::expression_schema(&node) else { return Ok(Transformed::no(node)) };
        let t = crate::planner::names::map_expressions_keeping_names(node, |e| e.transform_up(|e| f(e, &schema)))?;
        if !t.transformed {
            return Ok(t);
        }
        changed.set(true);
        Ok(Transformed::yes(t.data.recompute_schema()?))
    })?;
    Ok(out.data)
}

/// `x::text` of a jsonb (or uuid) value is text: DataFusion's cast of text to text keeps the
/// field's type mark, so the result still said jsonb (`pg_typeof`, clients' column types, and
/// `row_to_json(...)::text` in a view). A plan pass: such casts become `eddy_plain_text(x)`.
pub fn unmarked_text_casts(plan: LogicalPlan) -> datafusion::error::Result<LogicalPlan> {
    let plain = std::sync::Arc::new(plain_text());
    map_plan(plan, |e, schema| match e {
        Expr::Cast(c)
            if matches!(c.field.data_type(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
                && c.expr.to_field(schema).is_ok_and(|(_, f)| f.metadata().contains_key(eddy_common::types::JSONB_METADATA_KEY)) =>
        {
            let call = Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(std::sync::Arc::clone(&plain), vec![*c.expr]));
            Ok(Transformed::yes(Expr::Cast(Cast { expr: Box::new(call), field: c.field })))
        }
        other => Ok(Transformed::no(other)),
    })
}

/// `eddy_plain_text(x)`: the text of `x`, unmarked.
pub(crate) fn plain_text() -> datafusion::logical_expr::ScalarUDF {
    use datafusion::logical_expr::{ColumnarValue, Signature, Volatility};
    let body = |args: &[ColumnarValue], rows: usize| -> datafusion::error::Result<ColumnarValue> {
        Ok(ColumnarValue::Array(arrow::compute::cast(&args[0].to_array(rows)?, &DataType::Utf8)?))
    };
    crate::planner::udf::closure_udf("eddy_plain_text", Signature::any(1, Volatility::Immutable), DataType::Utf8, std::sync::Arc::new(body))
}

/// `date - date` as an integer. After `intervals::pg_intervals`, which types `date ± interval`
/// as a timestamp (before it, DataFusion calls that a date).
pub fn date_differences(plan: LogicalPlan) -> datafusion::error::Result<LogicalPlan> {
    map_plan(plan, |e, schema| {
        let date = |e: &Expr| matches!(e.get_type(schema), Ok(DataType::Date32));
        match e {
            Expr::BinaryExpr(b) if b.op == Operator::Minus && date(&b.left) && date(&b.right) => {
                Ok(Transformed::yes(Expr::Cast(Cast::new(Box::new(Expr::BinaryExpr(b)), DataType::Int32))))
            }
            other => Ok(Transformed::no(other)),
        }
    })
}
