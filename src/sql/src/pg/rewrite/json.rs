//! `json[b]_agg` and `json[b]_object_agg` as `array_agg` of converted values (so a view keeps
//! them incrementally) under a function that writes the JSON at the end.

use datafusion::sql::sqlparser::ast::{Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentClause, FunctionArguments, Value};

use super::ast::{call, renamed};

/// `json[b]_agg([DISTINCT] x [ORDER BY o])` → `eddy_json_agg(array_agg([DISTINCT] to_json[b](x)
/// [ORDER BY o]), sort)` (`crate::planner::to_json`; json_agg's elements are
/// `eddy_json_agg_item(x)`, `to_json` marking arrays for its line breaks). DISTINCT values come out sorted
/// by value, as PostgreSQL sorts them (`sort` 1 ascending, 2 descending by the call's ORDER
/// BY, which for DISTINCT can only be the value itself); a view keeps the `array_agg`
/// incrementally.
pub(super) fn json_agg(f: &Function, jsonb: bool) -> Option<Expr> {
    let FunctionArguments::List(l) = &f.args else { return None };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] = l.args.as_slice() else { return None };
    let distinct = matches!(l.duplicate_treatment, Some(datafusion::sql::sqlparser::ast::DuplicateTreatment::Distinct));
    let mut values = renamed(f, "array_agg");
    let mut sort = 0;
    if let FunctionArguments::List(l) = &mut values.args {
        l.args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(call(if jsonb { "to_jsonb" } else { "eddy_json_agg_item" }, vec![x.clone()])))];
        if distinct {
            sort = 1;
            l.clauses.retain(|c| match c {
                FunctionArgumentClause::OrderBy(o) => {
                    if o.first().is_some_and(|o| o.options.asc == Some(false)) {
                        sort = 2;
                    }
                    false
                }
                _ => true,
            });
        }
    }
    Some(call("eddy_json_agg", vec![Expr::Function(values), Expr::value(Value::Number(sort.to_string(), false))]))
}

/// `json[b]_object_agg(k, v [ORDER BY o])` → `eddy_json[b]_object_agg(array_agg(make_array(
/// to_json[b](k), to_json[b](v)) [ORDER BY o]))`: the pairs collected in order (in a view, as
/// `array_agg`'s ordered multiset), the object written at the end.
pub(super) fn json_object_agg(f: &Function, jsonb: bool) -> Option<Expr> {
    let FunctionArguments::List(l) = &f.args else { return None };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(k)), FunctionArg::Unnamed(FunctionArgExpr::Expr(v))] = l.args.as_slice() else { return None };
    let to_json = if jsonb { "to_jsonb" } else { "to_json" };
    let pair = call("make_array", vec![call(to_json, vec![k.clone()]), call(to_json, vec![v.clone()])]);
    let mut pairs = renamed(f, "array_agg");
    if let FunctionArguments::List(l) = &mut pairs.args {
        l.args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(pair))];
    }
    Some(call(if jsonb { "eddy_jsonb_object_agg" } else { "eddy_json_object_agg" }, vec![Expr::Function(pairs)]))
}

/// The list function and the column name of a jsonb set-returning function (the rewrite
/// unnests the list: in the select list, and in FROM).
pub(super) fn json_set_function(name: &str) -> Option<(&'static str, &'static str)> {
    Some(match name {
        "jsonb_array_elements" | "json_array_elements" => (crate::pg::jsonb_ops::ELEMENTS, "value"),
        "jsonb_array_elements_text" | "json_array_elements_text" => (crate::pg::jsonb_ops::ELEMENTS_TEXT, "value"),
        "jsonb_object_keys" | "json_object_keys" => (crate::pg::jsonb_ops::KEYS, name_of_keys(name)),
        _ => return None,
    })
}

fn name_of_keys(name: &str) -> &'static str {
    if name.starts_with("jsonb") {
        "jsonb_object_keys"
    } else {
        "json_object_keys"
    }
}

/// `jsonb_array_elements(x)` (and the others of [`json_set_function`]) in a select list:
/// `unnest` of the list, one row per element as in PostgreSQL.
pub(super) fn json_set_call(f: &Function, name: &str) -> Option<Expr> {
    let (list, _) = json_set_function(name)?;
    let FunctionArguments::List(l) = &f.args else { return None };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] = l.args.as_slice() else { return None };
    Some(call("unnest", vec![call(list, vec![x.clone()])]))
}
