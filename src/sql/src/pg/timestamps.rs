//! PostgreSQL timestamps are microseconds; DataFusion's SQL `TIMESTAMP` is nanoseconds, which
//! cannot hold years past 2262 (`'9999-12-31'::timestamp`, a common "valid until" value, failed
//! to cast). So:
//!
//! * AST pass: `TIMESTAMP` / `TIMESTAMPTZ` without a precision in casts and typed literals
//!   mean `TIMESTAMP(6)`, DataFusion's microseconds (the type Eddy stores);
//! * plan pass: a string literal compared with a timestamp column (`ts < '3031-01-02'`) is cast
//!   to the column's type, where DataFusion's coercion would parse it as nanoseconds first.

use std::ops::ControlFlow;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::DFSchema;
use datafusion::logical_expr::{Between, BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::scalar::ScalarValue;
use datafusion::sql::sqlparser::ast::{visit_expressions_mut, DataType as SqlType, Expr as SqlExpr, Statement};

/// `TIMESTAMP` without a precision as `TIMESTAMP(6)`.
fn micro(t: &mut SqlType) {
    if let SqlType::Timestamp(p @ None, _) = t {
        *p = Some(6);
    }
}

/// A date or timestamp literal's text in ISO form when it is one of PostgreSQL's other date
/// forms (`TIMESTAMP 'Jan 5 2024 10:00'`; `planner::date_input`).
fn iso_literal(text: &mut String, t: &SqlType) {
    use datafusion::sql::sqlparser::ast::TimezoneInfo;
    let (date_only, naive) = match t {
        SqlType::Date => (true, false),
        SqlType::Timestamp(_, zone) => (false, !matches!(zone, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz)),
        _ => return,
    };
    if let Some(iso) = eddy_common::date_text::iso_date_text(text, date_only) {
        *text = iso;
    }
    // A timestamp without time zone ignores a zone in its text (Arrow's cast moved it to UTC).
    if naive {
        if let Some(unzoned) = eddy_common::date_text::without_zone(text) {
            *text = unzoned;
        }
    }
}

/// The AST pass (see the module docs).
pub fn microsecond_timestamps(stmt: &mut Statement) {
    use datafusion::sql::sqlparser::ast::Value;
    let _ = visit_expressions_mut(stmt, |e| {
        match e {
            SqlExpr::Cast { data_type, expr, .. } => {
                if let SqlExpr::Value(v) = expr.as_mut() {
                    if let Value::SingleQuotedString(text) = &mut v.value {
                        iso_literal(text, data_type);
                    }
                }
                micro(data_type)
            }
            SqlExpr::TypedString(ts) => {
                if let Value::SingleQuotedString(text) = &mut ts.value.value {
                    iso_literal(text, &ts.data_type);
                }
                micro(&mut ts.data_type)
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
}

/// A timestamp type of microseconds or coarser (nanosecond ones need no help).
fn coarse_timestamp(t: &DataType) -> bool {
    matches!(t, DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Millisecond | TimeUnit::Second, _))
}

/// The schema `node`'s own expressions are evaluated over, for the nodes whose comparisons the
/// PostgreSQL plan passes retype (filters, projections, aggregates, joins).
pub(super) fn expression_schema(node: &LogicalPlan) -> Option<datafusion::common::DFSchemaRef> {
    match node {
        LogicalPlan::Filter(f) => Some(f.input.schema().clone()),
        LogicalPlan::Projection(p) => Some(p.input.schema().clone()),
        LogicalPlan::Aggregate(a) => Some(a.input.schema().clone()),
        LogicalPlan::Join(j) => Some(j.schema.clone()),
        _ => None,
    }
}

pub(super) fn is_text_literal(e: &Expr) -> bool {
    matches!(e, Expr::Literal(ScalarValue::Utf8(Some(_)) | ScalarValue::Utf8View(Some(_)) | ScalarValue::LargeUtf8(Some(_)), _))
}

/// `literal` cast to `other`'s type when `other` is a coarse timestamp and `literal` text.
fn typed(literal: Expr, other: &Expr, schema: &DFSchema) -> Expr {
    if !is_text_literal(&literal) {
        return literal;
    }
    match other.get_type(schema) {
        Ok(t) if coarse_timestamp(&t) => Expr::Cast(Cast::new(Box::new(literal), t)),
        _ => literal,
    }
}

fn type_comparison(e: Expr, schema: &DFSchema) -> datafusion::error::Result<Transformed<Expr>> {
    Ok(match e {
        Expr::BinaryExpr(b) if matches!(b.op, Operator::Eq | Operator::NotEq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq | Operator::IsDistinctFrom | Operator::IsNotDistinctFrom)
            && (is_text_literal(&b.left) != is_text_literal(&b.right)) =>
        {
            let BinaryExpr { left, op, right } = b;
            let (l, r) = (typed(*left.clone(), &right, schema), typed(*right.clone(), &left, schema));
            Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(Box::new(l), op, Box::new(r))))
        }
        Expr::Between(b) if is_text_literal(&b.low) || is_text_literal(&b.high) => {
            let Between { expr, negated, low, high } = b;
            let (low, high) = (typed(*low, &expr, schema), typed(*high, &expr, schema));
            Transformed::yes(Expr::Between(Between::new(expr, negated, Box::new(low), Box::new(high))))
        }
        Expr::InList(mut l) if l.list.iter().any(is_text_literal) => {
            let list = std::mem::take(&mut l.list);
            l.list = list.into_iter().map(|v| typed(v, &l.expr, schema)).collect();
            Transformed::yes(Expr::InList(l))
        }
        other => Transformed::no(other),
    })
}

/// The plan pass (see the module docs): comparisons in filters, join conditions, projections
/// and aggregates.
pub fn type_timestamp_literals(plan: LogicalPlan) -> datafusion::error::Result<LogicalPlan> {
    let out = plan.transform_up_with_subqueries(|node| {
        let Some(schema) = expression_schema(&node) else { return Ok(Transformed::no(node)) };
        node.map_expressions(|e| e.transform_up(|e| type_comparison(e, &schema)))
    })?;
    Ok(out.data)
}

/// `now()` (and `current_timestamp`, `transaction_timestamp()`, `statement_timestamp()`,
/// `clock_timestamp()`) as a `timestamptz` of microseconds, PostgreSQL's: DataFusion's is of
/// nanoseconds, so `now() + INTERVAL '1 day' * 365 * 3000` overflowed ("Timestamp out of
/// range") and mixed nanosecond and microsecond bounds in the optimizer's range analysis.
/// Wraps DataFusion's `now` (its time zone and its folding into the statement's start time).
#[derive(Debug, PartialEq, Eq, Hash)]
struct MicrosNow {
    inner: datafusion::logical_expr::ScalarUDF,
    aliases: Vec<String>,
}

impl MicrosNow {
    fn new(inner: datafusion::logical_expr::ScalarUDF) -> Self {
        let aliases = ["current_timestamp", "transaction_timestamp", "statement_timestamp", "clock_timestamp"];
        Self { inner, aliases: aliases.iter().map(|a| a.to_string()).collect() }
    }

    fn time_zone(&self) -> Option<std::sync::Arc<str>> {
        let args = datafusion::logical_expr::ReturnFieldArgs { arg_fields: &[], scalar_arguments: &[] };
        match self.inner.return_field_from_args(args).map(|f| f.data_type().clone()) {
            Ok(DataType::Timestamp(_, tz)) => tz,
            _ => Some("+00:00".into()),
        }
    }
}

impl datafusion::logical_expr::ScalarUDFImpl for MicrosNow {
    fn name(&self) -> &str {
        "now"
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn signature(&self) -> &datafusion::logical_expr::Signature {
        self.inner.signature()
    }
    fn with_updated_config(&self, config: &datafusion::common::config::ConfigOptions) -> Option<datafusion::logical_expr::ScalarUDF> {
        let inner = self.inner.inner().with_updated_config(config)?;
        Some(datafusion::logical_expr::ScalarUDF::new_from_impl(MicrosNow::new(inner)))
    }
    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Microsecond, self.time_zone()))
    }
    fn return_field_from_args(&self, _args: datafusion::logical_expr::ReturnFieldArgs) -> datafusion::error::Result<arrow::datatypes::FieldRef> {
        Ok(std::sync::Arc::new(arrow::datatypes::Field::new("now", DataType::Timestamp(TimeUnit::Microsecond, self.time_zone()), false)))
    }
    fn invoke_with_args(&self, _args: datafusion::logical_expr::ScalarFunctionArgs) -> datafusion::error::Result<datafusion::logical_expr::ColumnarValue> {
        Err(datafusion::error::DataFusionError::Internal("now() is folded into the statement's start time before it runs".into()))
    }
    fn simplify(
        &self,
        args: Vec<Expr>,
        info: &datafusion::logical_expr::simplify::SimplifyContext,
    ) -> datafusion::error::Result<datafusion::logical_expr::simplify::ExprSimplifyResult> {
        use datafusion::logical_expr::simplify::ExprSimplifyResult;
        Ok(match self.inner.simplify(args, info)? {
            ExprSimplifyResult::Simplified(Expr::Literal(ScalarValue::TimestampNanosecond(ns, tz), meta)) => {
                ExprSimplifyResult::Simplified(Expr::Literal(ScalarValue::TimestampMicrosecond(ns.map(|n| n.div_euclid(1000)), tz), meta))
            }
            other => other,
        })
    }
}

/// Replaces DataFusion's `now()` on `ctx` by [`MicrosNow`].
pub fn install_now(ctx: &datafusion::prelude::SessionContext) {
    if let Some(inner) = ctx.state().scalar_functions().get("now") {
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(MicrosNow::new(inner.as_ref().clone())));
    }
}
