//! `array_agg` and `string_agg` as PostgreSQL computes them where DataFusion differs: DISTINCT
//! values in sorted order, and a separator that changes from row to row.

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, CastKind, DataType as SqlType, DuplicateTreatment, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentClause, FunctionArguments, Value,
};

use super::ast::{call, case_when, renamed, string_lit};
use super::function_args;

/// PostgreSQL sorts to find distinct values, so `array_agg(DISTINCT x)` comes out in
/// ascending order (NULL last); DataFusion's hash set gives an arbitrary one, and it cannot
/// combine a DISTINCT call's ORDER BY with other ordered calls.
pub(super) fn sorted_array_agg(f: &Function) -> Option<Expr> {
    match &f.args {
        FunctionArguments::List(l)
            if matches!(l.duplicate_treatment, Some(DuplicateTreatment::Distinct))
                && !l.clauses.iter().any(|c| matches!(c, FunctionArgumentClause::OrderBy(_)))
                && f.over.is_none() =>
        {
            Some(call("array_sort", vec![Expr::Function(f.clone()), string_lit("ASC"), string_lit("NULLS LAST")]))
        }
        _ => None,
    }
}

/// `string_agg(DISTINCT x, sep)`: the sorted distinct non-NULL values joined, NULL when there
/// are none. `string_agg(x, sep)` with a separator that is not a constant (`string_agg(a,
/// b::text ORDER BY b)`, which DataFusion refuses): each value after the first is preceded by
/// its own row's separator, joined by `eddy_string_agg_rows` over the (value, separator) pairs.
pub(super) fn string_agg(f: &Function) -> Option<Expr> {
    let FunctionArguments::List(l) = &f.args else { return None };
    // Two plain arguments (not `*` or a named one, which `function_args` leaves out).
    if l.args.len() != 2 || function_args(f).len() != 2 || f.over.is_some() {
        return None;
    }
    match l.duplicate_treatment {
        Some(DuplicateTreatment::Distinct) if l.clauses.is_empty() => {
            let sep = function_args(f).pop()?;
            let mut values = renamed(f, "array_agg");
            if let FunctionArguments::List(l) = &mut values.args {
                l.args.truncate(1);
            }
            let mut count = renamed(f, "count");
            if let FunctionArguments::List(l) = &mut count.args {
                l.args.truncate(1);
                l.duplicate_treatment = None;
            }
            let sorted = call("array_sort", vec![Expr::Function(values), string_lit("ASC"), string_lit("NULLS LAST")]);
            let some = Expr::BinaryOp {
                left: Box::new(Expr::Function(count)),
                op: BinaryOperator::Gt,
                right: Box::new(Expr::value(Value::Number("0".into(), false))),
            };
            Some(case_when(vec![(some, call("array_to_string", vec![sorted, sep]))]))
        }
        None if !matches!(function_args(f).get(1), Some(Expr::Value(_))) => {
            let args = function_args(f);
            let text = Expr::Cast { kind: CastKind::Cast, expr: Box::new(args[1].clone()), data_type: SqlType::Text, array: false, format: None };
            let mut pairs = renamed(f, "array_agg");
            if let FunctionArguments::List(l) = &mut pairs.args {
                l.args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(call("struct", vec![args[0].clone(), text])))];
            }
            Some(call("eddy_string_agg_rows", vec![Expr::Function(pairs)]))
        }
        _ => None,
    }
}

/// `GROUP BY CUBE (1, 2)` (and `ROLLUP`, `GROUPING SETS`): the positions read the select
/// list's expressions, as PostgreSQL reads them (DataFusion resolves positions only at the top
/// of GROUP BY, and grouped by the constants).
pub(super) fn grouping_set_positions(select: &mut datafusion::sql::sqlparser::ast::Select) {
    use datafusion::sql::sqlparser::ast::{Expr, GroupByExpr, SelectItem, Value};
    let items: Vec<Option<Expr>> = select
        .projection
        .iter()
        .map(|p| match p {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e.clone()),
            _ => None,
        })
        .collect();
    let resolve = |e: &mut Expr| {
        if let Expr::Value(v) = e {
            if let Value::Number(n, _) = &v.value {
                if let Some(Some(item)) = n.parse::<usize>().ok().and_then(|k| k.checked_sub(1)).and_then(|k| items.get(k)) {
                    *e = item.clone();
                }
            }
        }
    };
    let GroupByExpr::Expressions(exprs, _) = &mut select.group_by else { return };
    for g in exprs {
        match g {
            Expr::Rollup(sets) | Expr::Cube(sets) | Expr::GroupingSets(sets) => sets.iter_mut().flatten().for_each(resolve),
            _ => {}
        }
    }
}
