//! A view's aggregate calls: DataFusion's aggregate expressions mapped to the incremental
//! aggregates of `eddy_stream::operator::hash_agg` (or refused with 0A000).

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{create_physical_expr, PhysicalExpr};
use datafusion::scalar::ScalarValue;
use eddy_common::percentile::{Fractions, OrderedSet};
use eddy_common::{not_supported, Result};
use eddy_stream::operator::{AggCall, AggKind, RegrFn};

pub(super) fn physical(expr: &Expr, schema: &DFSchema) -> Result<Arc<dyn PhysicalExpr>> {
    let e = create_physical_expr(expr, schema, &ExecutionProps::new())?;
    Ok(crate::planner::overflow::checked(e, schema.as_arrow())?)
}

pub(super) fn strip_alias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => strip_alias(&a.expr),
        other => other,
    }
}

/// The value of `e` if it reads no column.
fn constant(e: &Expr, input: &DFSchema) -> Result<Option<ScalarValue>> {
    if !e.column_refs().is_empty() {
        return Ok(None);
    }
    Ok(crate::planner::ordered_set::constant_value(&physical(e, input)?)?)
}

pub(super) fn agg_call(expr: &Expr, input: &DFSchema, output: DataType) -> Result<AggCall> {
    let Expr::AggregateFunction(af) = strip_alias(expr) else {
        return Err(not_supported!("aggregate expression {expr} is not supported in a materialized view"));
    };
    let name = af.func.name().to_ascii_lowercase();
    let p = &af.params;
    let arg = p.args.first();
    let ordered_set = OrderedSet::from_name(&name).filter(|_| !p.distinct);
    let regr = RegrFn::from_name(&name).filter(|_| !p.distinct);
    let kind = match (ordered_set, regr) {
        (None, Some(f)) => AggKind::Regr(f),
        (Some(kind), _) => {
            let fractions = match p.args.get(1) {
                None => Fractions::None,
                Some(e) => Fractions::from_scalar(&constant(e, input)?.ok_or_else(|| not_supported!("the fraction of {name}() in a materialized view must be a constant"))?)?,
            };
            AggKind::Percentile { kind, fractions }
        }
        (None, None) => match (name.as_str(), p.distinct) {
            ("count", false) => match arg {
                None => AggKind::CountStar,
                Some(Expr::Literal(v, _)) if !v.is_null() => AggKind::CountStar,
                Some(_) => AggKind::Count,
            },
            ("count", true) => AggKind::CountDistinct,
            ("sum", false) => AggKind::Sum,
            ("avg" | "mean", false) => AggKind::Avg,
            ("min", _) => AggKind::Min,
            ("max", _) => AggKind::Max,
            ("bool_and", _) => AggKind::BoolAnd,
            ("stddev" | "stddev_samp", false) => AggKind::Variance { sample: true, sqrt: true },
            ("stddev_pop", false) => AggKind::Variance { sample: false, sqrt: true },
            ("var_samp" | "var_sample" | "var" | "variance", false) => AggKind::Variance { sample: true, sqrt: false },
            ("var_pop" | "var_population", false) => AggKind::Variance { sample: false, sqrt: false },
            ("bool_or", _) => AggKind::BoolOr,
            ("sum", true) => AggKind::SumDistinct { avg: false },
            ("avg" | "mean", true) => AggKind::SumDistinct { avg: true },
            ("bit_and", _) => AggKind::Bit(eddy_stream::operator::hash_agg::BitOp::And),
            ("bit_or", _) => AggKind::Bit(eddy_stream::operator::hash_agg::BitOp::Or),
            ("bit_xor", false) => AggKind::Bit(eddy_stream::operator::hash_agg::BitOp::Xor),
            // DISTINCT changes neither the first nor the last value.
            ("first_value", _) if !p.order_by.is_empty() => AggKind::FirstValue,
            ("last_value", _) if !p.order_by.is_empty() => AggKind::LastValue,
            ("first_value" | "last_value", _) => {
                return Err(not_supported!("{name}() in a materialized view needs an ORDER BY inside the call (which row is first is otherwise arbitrary)"))
            }
            ("string_agg", distinct) => {
                let sep = match p.args.get(1) {
                    Some(Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)), _)) => s.clone(),
                    Some(Expr::Literal(v, _)) if v.is_null() => String::new(),
                    _ => return Err(not_supported!("string_agg() in a materialized view needs a constant separator")),
                };
                AggKind::StringAgg { sep, distinct }
            }
            ("array_agg", distinct) => AggKind::ArrayAgg { distinct },
            (other, true) => return Err(not_supported!("{other}(DISTINCT ...) is not supported in a materialized view yet")),
            (other, false) => return Err(not_supported!("aggregate function {other}() is not supported in a materialized view yet")),
        },
    };
    let arg = match kind {
        AggKind::CountStar => None,
        // (y, x) evaluated together, as one struct.
        AggKind::Regr(_) => match p.args.as_slice() {
            [y, x] => Some(physical(&datafusion::functions::core::expr_fn::r#struct(vec![y.clone(), x.clone()]), input)?),
            _ => return Err(not_supported!("{name}() takes two arguments")),
        },
        _ => Some(physical(arg.ok_or_else(|| not_supported!("{name}() without an argument"))?, input)?),
    };
    // ORDER BY inside the call matters to first/last_value, string_agg and array_agg; to the
    // others it makes no difference.
    let ordered = matches!(kind, AggKind::FirstValue | AggKind::LastValue | AggKind::ArrayAgg { .. } | AggKind::StringAgg { .. } | AggKind::Percentile { .. });
    if !ordered && !p.order_by.is_empty() {
        let order_free = matches!(
            kind,
            AggKind::CountStar | AggKind::Count | AggKind::CountDistinct | AggKind::Sum | AggKind::Min | AggKind::Max | AggKind::BoolAnd | AggKind::BoolOr | AggKind::Variance { .. } | AggKind::Regr(_)
        );
        if !order_free {
            return Err(not_supported!("ORDER BY inside {name}() is not supported in a materialized view yet"));
        }
    }
    let order_by = if ordered {
        p.order_by
            .iter()
            .map(|e| {
                let options = arrow::compute::SortOptions::new(!e.asc, e.nulls_first);
                Ok(datafusion::physical_expr::PhysicalSortExpr::new(physical(&e.expr, input)?, options))
            })
            .collect::<Result<Vec<_>>>()?
    } else {
        vec![]
    };
    let filter = p.filter.as_ref().map(|f| physical(f, input)).transpose()?;
    Ok(AggCall { kind, arg, output, filter, order_by })
}
