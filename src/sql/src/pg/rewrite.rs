//! SQL-AST rewrites that turn PostgreSQL catalog syntax into what DataFusion plans, applied to
//! every statement before planning (called from `crate::pg::rewrite_statement`):
//!
//! * `pg_catalog.f(...)` / `information_schema.f(...)` → `f(...)` (functions and table functions).
//! * Casts: `::oid` → `int`; `::regclass`, `::regtype`, `::regnamespace`, `::regrole` → the
//!   OID-valued `eddy_regX(..)`, and `::regX::text` → the name `eddy_regX_name(..)`;
//!   `::regproc` → the function name; `pg_catalog.int2[]`, `"char"`, `name` → Arrow-backed types.
//! * `OPERATOR(pg_catalog.~)` → `~` (any operator); `COLLATE x` is dropped (one collation).
//! * `ARRAY(SELECT e FROM ... ORDER BY o)` → `(SELECT array_agg(e ORDER BY o) FROM ...)`;
//!   `ARRAY(SELECT e(x) FROM unnest(a) x WHERE w(x))` → `array_transform(array_filter(a, x -> w),
//!   x -> e)`, which needs no decorrelation when `a` is an outer column.
//! * `(expr).field` → `get_field(expr, 'field')`.
//! * `json_agg(x)` / `jsonb_agg(x)` → `eddy_json_agg(array_agg(to_json(x)), ..)` (`json.rs`).
//! * `json_object_agg(k, v)` / `jsonb_object_agg(k, v)` → the same over `array_agg` of pairs.
//! * `approx_count_distinct(x)` → `count(DISTINCT x)` (exact).
//! * `corr(y, x)` and `regr_r2(y, x)` from `regr_sxx/syy/sxy` with PostgreSQL's NULL rules ([`regression`]).
//! * `x::jsonb` / `x::json` → `eddy_jsonb_in(x)` / `eddy_json_in(x)` (validated, jsonb-typed).
//! * Set-returning calls in a select list: `_pg_expandarray(a)` → `unnest(_pg_expandarray(a))`,
//!   `generate_subscripts(a, 1)` → `unnest(range(1, cardinality(a) + 1))`.
//! * Array text literals where an array is expected: `= ANY('{r,p}')`, `<> ALL('{..}')`,
//!   `col = '{0}'` → `make_array(...)`.
//! * Scalar subqueries are put in a form DataFusion decorrelates (`subquery.rs`); `EXISTS` in a
//!   select list and `x op ANY/ALL (subquery)` become forms DataFusion plans (`quantified.rs`).
//! * A recursive CTE's column list becomes aliases in its anchor select.
//! * `FROM unnest(a)` written as a function call becomes an UNNEST table factor.
//! * Unaliased select items get PostgreSQL's column names (`colnames.rs`).
//! * RisingWave's `TUMBLE(...)` / `HOP(...)` in FROM become derived tables (`time_windows.rs`).
//! * A function in FROM with a bare alias names its single column after the alias
//!   (`FROM unnest(a) x`, `generate_series(1, 3) s`), as PostgreSQL does; without an alias,
//!   after the function.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, AccessExpr, BinaryOperator, DataType as SqlType, Expr,
    Function, FunctionArg, FunctionArgExpr, FunctionArgumentClause, FunctionArguments, GroupByExpr,
    Ident, LambdaFunction, LambdaFunctionParameter, LambdaSyntax, ObjectName, ObjectNamePart, OneOrManyWithParens,
    OrderByKind, Query, Select, SelectItem, SetExpr, Statement, TableAlias, TableAliasColumnDef, TableFactor, Value,
    VisitMut, VisitorMut,
};
use eddy_common::Result;

// Split by family: shared AST helpers, to_char templates, quantified subqueries; the rest
// (casts, functions, operators, arrays, table functions) stays here with the visitor.
pub(crate) mod ast;
mod aggregates;
mod clock;
mod datetime;
mod derived_aliases;
mod fetch;
mod json;
mod types;
use types::plain_type;
use scalars::is_interval_expr;
mod lateral;
mod named_windows;
pub(crate) use lateral::REGEXP_MATCHES;
pub(crate) use scalars::{similar_regex, SIMILAR_REGEX};
mod quantified;
mod scalars;
mod time_windows;
mod using_joins;
mod values;

pub(crate) use time_windows::interval_micros;
pub use clock::{ROUND_TIME, ROUND_TIMESTAMP, ROUND_TIMESTAMPTZ};

use ast::{base_name, case_when, renamed, string_lit, unnamed_arg_exprs};
pub use ast::{call, is_aggregate_call};
pub use datetime::pg_datetime_pattern;
use aggregates::{sorted_array_agg, string_agg};
use json::{json_agg, json_object_agg};
use quantified::{exists_as_count, quantified_subquery, row_in_subquery};

/// Applies every rewrite in the module docs to `stmt`.
pub fn rewrite(stmt: &mut Statement) -> Result<()> {
    let mut v = PgRewriter { depth: 0, error: None, insert: matches!(stmt, Statement::Insert(_)) };
    let _ = stmt.visit(&mut v);
    match v.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct PgRewriter {
    /// Nesting of the query being visited (1 = the statement's own query).
    depth: usize,
    /// A rewrite that found the statement invalid (the visit stops there).
    error: Option<eddy_common::EddyError>,
    /// True for an INSERT, whose VALUES rows take the target's column types.
    insert: bool,
}

/// The reg* pseudo-types a cast can name.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reg {
    Class,
    Type,
    Namespace,
    Role,
    Proc,
}

impl Reg {
    fn function(self) -> &'static str {
        match self {
            Reg::Class => "eddy_regclass",
            Reg::Type => "eddy_regtype",
            Reg::Namespace => "eddy_regnamespace",
            Reg::Role => "eddy_regrole",
            Reg::Proc => "eddy_regproc",
        }
    }
}

fn is_system_qualified(name: &ObjectName) -> bool {
    name.0.len() == 2
        && matches!(&name.0[0], ObjectNamePart::Identifier(i)
            if i.value.eq_ignore_ascii_case("pg_catalog") || i.value.eq_ignore_ascii_case("information_schema"))
}

fn strip_system_qualifier(name: &mut ObjectName) {
    if is_system_qualified(name) {
        name.0.remove(0);
    }
}

fn reg_of(t: &SqlType) -> Option<Reg> {
    let name = match t {
        SqlType::Regclass => return Some(Reg::Class),
        SqlType::Custom(n, _) => base_name(n),
        _ => return None,
    };
    match name.as_str() {
        "regclass" => Some(Reg::Class),
        "regtype" => Some(Reg::Type),
        "regnamespace" => Some(Reg::Namespace),
        "regrole" => Some(Reg::Role),
        "regproc" | "regprocedure" => Some(Reg::Proc),
        _ => None,
    }
}

fn is_text_type(t: &SqlType) -> bool {
    match t {
        SqlType::Text | SqlType::Varchar(_) | SqlType::String(_) | SqlType::CharacterVarying(_) => true,
        SqlType::Custom(n, _) => matches!(base_name(n).as_str(), "text" | "name" | "varchar"),
        _ => false,
    }
}

fn function_args(f: &Function) -> Vec<Expr> {
    match &f.args {
        FunctionArguments::List(l) => l
            .args
            .iter()
            .filter_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

fn string_literal(e: &Expr) -> Option<&str> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) => Some(s.as_str()),
            _ => None,
        },
        _ => None,
    }
}

/// `'{a,b}'` → `make_array('a', 'b')` (numbers stay numbers); `None` unless it is an array literal.
fn array_literal(e: &Expr) -> Option<Expr> {
    let s = string_literal(e)?.trim();
    let inner = s.strip_prefix('{')?.strip_suffix('}')?;
    if inner.contains(['{', '}', ':', '"']) {
        return None;
    }
    let items: Vec<Expr> = inner
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| {
            if x.parse::<i64>().is_ok() {
                Expr::value(Value::Number(x.to_string(), false))
            } else {
                string_lit(x)
            }
        })
        .collect();
    Some(call("make_array", items))
}

fn operator_of(names: &[String]) -> Option<BinaryOperator> {
    Some(match names.last()?.as_str() {
        "~" => BinaryOperator::PGRegexMatch,
        "~*" => BinaryOperator::PGRegexIMatch,
        "!~" => BinaryOperator::PGRegexNotMatch,
        "!~*" => BinaryOperator::PGRegexNotIMatch,
        "=" => BinaryOperator::Eq,
        "<>" | "!=" => BinaryOperator::NotEq,
        "<" => BinaryOperator::Lt,
        "<=" => BinaryOperator::LtEq,
        ">" => BinaryOperator::Gt,
        ">=" => BinaryOperator::GtEq,
        "~~" => return None,
        "||" => BinaryOperator::StringConcat,
        "+" => BinaryOperator::Plus,
        "-" => BinaryOperator::Minus,
        "*" => BinaryOperator::Multiply,
        "/" => BinaryOperator::Divide,
        _ => return None,
    })
}

/// `ARRAY(SELECT e(x) FROM unnest(a) x [WHERE w(x)])` → `array_transform(array_filter(a,
/// x -> w), x -> e)`: a map over one array, with no correlated subquery left for DataFusion to
/// decorrelate (psql's `\d+` builds `array(select 'toast.' || x from unnest(tc.reloptions) x)`).
/// A NULL array gives an empty one, as the subquery over no rows does in PostgreSQL.
fn array_map(q: &Query) -> Option<Expr> {
    if q.with.is_some() || q.limit_clause.is_some() || q.fetch.is_some() || q.order_by.is_some() {
        return None;
    }
    let SetExpr::Select(select) = q.body.as_ref() else { return None };
    let no_grouping = matches!(&select.group_by, GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty());
    if select.from.len() != 1
        || !select.from[0].joins.is_empty()
        || select.projection.len() != 1
        || select.distinct.is_some()
        || select.having.is_some()
        || !no_grouping
    {
        return None;
    }
    let TableFactor::UNNEST { alias: Some(alias), array_exprs, with_offset: false, with_ordinality: false, .. } =
        &select.from[0].relation
    else {
        return None;
    };
    // An array literal's element type changes after planning (integer literals narrow to
    // int4), which a lambda bound to the planned type refuses: the array_agg form plans those.
    if array_exprs.len() != 1 || alias.columns.len() != 1 || matches!(array_exprs[0], Expr::Array(_)) {
        return None;
    }
    let item = match &select.projection[0] {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
        _ => return None,
    };
    let table = alias.name.value.to_ascii_lowercase();
    let column = alias.columns[0].name.value.to_ascii_lowercase();
    let mut simple = true;
    let lambda = |mut body: Expr, simple: &mut bool| -> Expr {
        let _ = visit_expressions_mut(&mut body, |e| {
            match e {
                Expr::CompoundIdentifier(parts)
                    if parts.len() == 2
                        && parts[0].value.to_ascii_lowercase() == table
                        && parts[1].value.to_ascii_lowercase() == column =>
                {
                    *e = Expr::Identifier(Ident::new(column.clone()));
                }
                Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => *simple = false,
                Expr::Function(f) if is_aggregate_call(&Expr::Function(f.clone())) => *simple = false,
                _ => {}
            }
            ControlFlow::<()>::Continue(())
        });
        Expr::Lambda(LambdaFunction {
            params: OneOrManyWithParens::One(LambdaFunctionParameter { name: Ident::new(column.clone()), data_type: None }),
            body: Box::new(body),
            syntax: LambdaSyntax::Arrow,
        })
    };
    let mut array = array_exprs[0].clone();
    if let Some(w) = &select.selection {
        array = call("array_filter", vec![array, lambda(w.clone(), &mut simple)]);
    }
    let mapped = call("array_transform", vec![array, lambda(item, &mut simple)]);
    simple.then(|| call("coalesce", vec![mapped, call("make_array", vec![])]))
}

/// `ARRAY(SELECT e FROM ... ORDER BY o)` → `(SELECT array_agg(e ORDER BY o) FROM ...)`, or a
/// map over one array ([`array_map`]).
fn array_subquery(mut q: Query) -> Option<Expr> {
    if let Some(mapped) = array_map(&q) {
        return Some(mapped);
    }
    let order = match q.order_by.take() {
        Some(o) => match o.kind {
            OrderByKind::Expressions(exprs) => exprs,
            OrderByKind::All(_) => return None,
        },
        None => vec![],
    };
    let SetExpr::Select(select) = q.body.as_mut() else { return None };
    if select.projection.len() != 1 {
        return None;
    }
    let item = match &select.projection[0] {
        SelectItem::UnnamedExpr(e) => e.clone(),
        SelectItem::ExprWithAlias { expr, .. } => expr.clone(),
        _ => return None,
    };
    // `ORDER BY 1` names the select item; inside the aggregate it would be the constant 1.
    let mut order = order;
    for o in &mut order {
        if matches!(&o.expr, Expr::Value(v) if matches!(&v.value, Value::Number(n, _) if n == "1")) {
            o.expr = item.clone();
        }
    }
    let mut agg = call("array_agg", vec![item]);
    if let Expr::Function(f) = &mut agg {
        if let FunctionArguments::List(l) = &mut f.args {
            if !order.is_empty() {
                l.clauses.push(FunctionArgumentClause::OrderBy(order));
            }
        }
    }
    // Over no rows ARRAY(...) is an empty array, not NULL.
    select.projection = vec![SelectItem::UnnamedExpr(call("coalesce", vec![agg, call("make_array", vec![])]))];
    Some(Expr::Subquery(Box::new(q)))
}

/// `corr(y, x)` → `Sxy / sqrt(Sxx * Syy)` and `regr_r2(y, x)` → `Sxy² / (Sxx * Syy)` over
/// `regr_sxx/syy/sxy(y, x)`, NULL where `Sxx` or `Syy` is 0, except that `regr_r2` is 1 where
/// only `y` is constant: PostgreSQL's definitions. DataFusion's `corr` loses all precision on
/// large values (NULL for values near 1e9 that vary by units) and its `regr_r2` is NULL for a
/// constant `y`; its `regr_s*` sums are accurate. A view keeps the three sums incrementally.
fn regression(f: &Function, corr: bool) -> Expr {
    let sum = |n: &str| Box::new(Expr::Function(renamed(f, n)));
    let num = |v: &str| Box::new(Expr::value(Value::Number(v.into(), false)));
    let op = |left: Box<Expr>, op: BinaryOperator, right: Box<Expr>| Box::new(Expr::BinaryOp { left, op, right });
    let product = op(sum("regr_sxx"), BinaryOperator::Multiply, sum("regr_syy"));
    let (value, y_constant) = if corr {
        (op(sum("regr_sxy"), BinaryOperator::Divide, Box::new(call("sqrt", vec![*product]))), None)
    } else {
        let square = op(sum("regr_sxy"), BinaryOperator::Multiply, sum("regr_sxy"));
        (op(square, BinaryOperator::Divide, product), Some(num("1")))
    };
    let x_varies = op(sum("regr_sxx"), BinaryOperator::NotEq, num("0"));
    let y_varies = op(sum("regr_syy"), BinaryOperator::NotEq, num("0"));
    let mut conditions = vec![(*op(x_varies.clone(), BinaryOperator::And, y_varies), *value)];
    if let Some(one) = y_constant {
        conditions.push((*x_varies, *one));
    }
    case_when(conditions)
}

fn rewrite_function(f: &mut Function) -> Option<Expr> {
    strip_system_qualifier(&mut f.name);
    let name = base_name(&f.name);
    match name.as_str() {
        "array" => match &f.args {
            FunctionArguments::Subquery(q) => array_subquery(q.as_ref().clone()),
            _ => None,
        },
        // A set-returning call in an expression: one row per element, as in PostgreSQL.
        "generate_series" if !f.args.to_string().is_empty() => {
            f.name = ObjectName::from(vec![Ident::new("generate_series")]);
            Some(call("unnest", vec![Expr::Function(f.clone())]))
        }
        // `unnest(generate_series(..))` as written: the inner call is already a row source.
        "unnest" => match function_args(f).as_slice() {
            [Expr::Function(inner)] if base_name(&inner.name) == "unnest" => match function_args(inner).as_slice() {
                // `unnest(regexp_matches(..))` (its inner call rewritten first): each match's array unnested.
                [Expr::Function(m)] if base_name(&m.name) == lateral::REGEXP_MATCHES => Some(call("unnest", vec![call("flatten", vec![Expr::Function(m.clone())])])),
                _ => Some(Expr::Function(inner.clone())),
            },
            _ => None,
        },
        // `timezone(zone, ts)` is `ts AT TIME ZONE zone`.
        "timezone" => match function_args(f).as_slice() {
            [zone, ts] => Some(Expr::AtTimeZone { timestamp: Box::new(ts.clone()), time_zone: Box::new(zone.clone()) }),
            _ => None,
        },
        "date_trunc" => {
            clock::date_trunc_unit(f);
            None
        }
        "localtimestamp" | "current_timestamp" | "current_time" | "localtime" | "current_catalog" | "current_role" | "current_schema" => clock::clock_function(f),
        // Set-returning: one row per match (none if nothing matches).
        "regexp_matches" => {
            f.name = ObjectName::from(vec![Ident::new(lateral::REGEXP_MATCHES)]);
            Some(call("unnest", vec![Expr::Function(f.clone())]))
        }
        // PostgreSQL's template patterns → the strftime patterns DataFusion's parsers read
        // (`to_char` is Eddy's own, reading PostgreSQL's templates: pg::to_char).
        "to_timestamp" | "to_date" if function_args(f).len() == 2 => {
            if let FunctionArguments::List(list) = &mut f.args {
                if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) = list.args.get_mut(1) {
                    if let Value::SingleQuotedString(s) = &mut v.value {
                        *s = pg_datetime_pattern(s);
                    }
                }
            }
            None
        }
        "make_interval" => {
            scalars::positional_make_interval(f);
            None
        }
        "array_agg" => sorted_array_agg(f),
        "string_agg" => string_agg(f),
        "json_agg" | "jsonb_agg" if f.over.is_none() => json_agg(f, name == "jsonb_agg"),
        "json_object_agg" | "jsonb_object_agg" if f.over.is_none() => json_object_agg(f, name == "jsonb_object_agg"),
        // RisingWave's approx_count_distinct: counted exactly, which a view keeps under updates
        // and deletes (a sketch could not retract) and a query computes alike.
        "approx_count_distinct" => {
            f.name = ObjectName::from(vec![Ident::new("count")]);
            if let FunctionArguments::List(l) = &mut f.args {
                l.duplicate_treatment = Some(datafusion::sql::sqlparser::ast::DuplicateTreatment::Distinct);
            }
            None
        }
        "regr_r2" | "corr" if f.over.is_none() => Some(regression(f, name == "corr")),
        "every" => {
            f.name = ObjectName::from(vec![Ident::new("bool_and")]);
            None
        }
        "variance" => {
            f.name = ObjectName::from(vec![Ident::new("var_samp")]);
            None
        }
        "_pg_expandarray" => {
            f.name = ObjectName::from(vec![Ident::new("_pg_expandarray")]);
            Some(call("unnest", vec![Expr::Function(f.clone())]))
        }
        "generate_subscripts" => {
            let arr = function_args(f).into_iter().next()?;
            let upper = Expr::BinaryOp {
                left: Box::new(Expr::Cast {
                    kind: datafusion::sql::sqlparser::ast::CastKind::Cast,
                    expr: Box::new(call("cardinality", vec![arr])),
                    data_type: SqlType::BigInt(None),
                    array: false,
                    format: None,
                }),
                op: BinaryOperator::Plus,
                right: Box::new(Expr::value(Value::Number("1".into(), false))),
            };
            Some(call("unnest", vec![call("range", vec![Expr::value(Value::Number("1".into(), false)), upper])]))
        }
        n if json::json_set_function(n).is_some() => json::json_set_call(f, n),
        _ => scalars::function(f, &name, &function_args(f)),
    }
}

fn rewrite_cast(expr: &Expr, data_type: &SqlType) -> Option<Expr> {
    // An explicit cast to `varchar(n)` truncates to n characters (assignment to a varchar(n)
    // column instead fails when too long, as in PostgreSQL).
    if let SqlType::Varchar(Some(datafusion::sql::sqlparser::ast::CharacterLength::IntegerLength { length, .. }))
    | SqlType::CharacterVarying(Some(datafusion::sql::sqlparser::ast::CharacterLength::IntegerLength { length, .. })) = data_type
    {
        let text = Expr::Cast {
            kind: datafusion::sql::sqlparser::ast::CastKind::Cast,
            expr: Box::new(expr.clone()),
            data_type: SqlType::Text,
            array: false,
            format: None,
        };
        return Some(call("left", vec![text, Expr::value(Value::Number(length.to_string(), false))]));
    }
    if matches!(data_type, SqlType::Uuid) || matches!(data_type, SqlType::Custom(n, m) if m.is_empty() && base_name(n) == "uuid") {
        return Some(call("eddy_uuid_in", vec![expr.clone()]));
    }
    if let Some(rounded) = clock::cast_with_precision(expr, data_type) {
        return Some(rounded);
    }
    if let Some(reg) = reg_of(data_type) {
        return Some(call(reg.function(), vec![expr.clone()]));
    }
    // `::jsonb` validates and normalizes, `::json` validates (crate::planner::to_json).
    let json = match data_type {
        SqlType::JSONB => Some(true),
        SqlType::JSON => Some(false),
        SqlType::Custom(n, mods) if mods.is_empty() => match base_name(n).as_str() {
            "jsonb" => Some(true),
            "json" => Some(false),
            _ => None,
        },
        _ => None,
    };
    if let Some(jsonb) = json {
        return Some(call(if jsonb { "eddy_jsonb_in" } else { "eddy_json_in" }, vec![expr.clone()]));
    }
    if is_text_type(data_type) {
        if let Expr::Function(f) = expr {
            let inner = base_name(&f.name);
            let named = ["eddy_regclass", "eddy_regtype", "eddy_regnamespace", "eddy_regrole"];
            if named.contains(&inner.as_str()) {
                return Some(call(&format!("{inner}_name"), function_args(f)));
            }
        }
    }
    None
}

/// `WITH RECURSIVE t(a, b) AS (SELECT x, y ... UNION ALL SELECT ... FROM t ...)` → the column
/// names become aliases in the anchor's select list, so the recursive reference `t.a` resolves
/// (DataFusion does not apply a recursive CTE's column list to the self-reference; asyncpg's
/// type introspection query has this shape).
fn name_recursive_cte_columns(q: &mut Query) {
    let Some(with) = q.with.as_mut() else { return };
    if !with.recursive {
        return;
    }
    for cte in &mut with.cte_tables {
        if cte.alias.columns.is_empty() {
            continue;
        }
        let SetExpr::SetOperation { left, .. } = cte.query.body.as_mut() else { continue };
        let SetExpr::Select(anchor) = left.as_mut() else { continue };
        if anchor.projection.len() != cte.alias.columns.len() {
            continue;
        }
        let wildcard = anchor.projection.iter().any(|p| !matches!(p, SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. }));
        if wildcard {
            continue;
        }
        for (item, col) in anchor.projection.iter_mut().zip(&cte.alias.columns) {
            let expr = match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
                _ => continue,
            };
            *item = SelectItem::ExprWithAlias { expr, alias: col.name.clone() };
        }
        cte.alias.columns.clear();
    }
}

impl VisitorMut for PgRewriter {
    type Break = ();

    fn post_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        aggregates::distinct_cast_names(q);
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        name_recursive_cte_columns(q);
        named_windows::inline_named_windows(q);
        aggregates::distinct_on_references(q);
        aggregates::having_without_groups(q);
        fetch::fetch_clause(q);
        using_joins::merge_outer_using(q);
        lateral::lateral_set_functions(q);
        values::values_with_subqueries(q);
        values::literal_types(q, self.insert && self.depth == 1);
        values::table_commands(q);
        derived_aliases::derived_alias_lists(q);
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        // Before the children are visited: the subquery of `x op ANY/ALL (subquery)` is a set,
        // not a scalar subquery to decorrelate.
        if let Some(r) = quantified_subquery(e).or_else(|| row_in_subquery(e)).or_else(|| scalars::distinct_from_precedence(e)).or_else(|| scalars::negative_subscript(e)).or_else(|| scalars::substring_pattern(e)).or_else(|| scalars::unary_minus_power(e)).or_else(|| scalars::exponent_literal(e)).or_else(|| scalars::row_predicate(e)) {
            *e = r;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if let Err(err) = scalars::check_subquery_width(e) {
            self.error = Some(err);
            return ControlFlow::Break(());
        }
        let replacement = match e {
            Expr::Function(f) => {
                let r = rewrite_function(f);
                if let Err(err) = scalars::check_arguments(f) {
                    self.error = Some(err);
                    return ControlFlow::Break(());
                }
                r
            }
            Expr::Cast { expr, data_type, .. } => {
                let r = rewrite_cast(expr, data_type);
                if r.is_none() {
                    if let Some(t) = plain_type(data_type) {
                        *data_type = t;
                    }
                }
                r
            }
            Expr::Collate { expr, .. } => Some(expr.as_ref().clone()),
            // `@ x`, `|/ x` and `||/ x`: abs, sqrt and cbrt.
            Expr::UnaryOp { op: op @ (datafusion::sql::sqlparser::ast::UnaryOperator::PGAbs | datafusion::sql::sqlparser::ast::UnaryOperator::PGSquareRoot | datafusion::sql::sqlparser::ast::UnaryOperator::PGCubeRoot), expr } => {
                let f = match op {
                    datafusion::sql::sqlparser::ast::UnaryOperator::PGAbs => "abs",
                    datafusion::sql::sqlparser::ast::UnaryOperator::PGSquareRoot => "sqrt",
                    _ => "cbrt",
                };
                Some(ast::call(f, vec![expr.as_ref().clone()]))
            }
            // `~x` (bitwise not), which DataFusion lacks, is `x # -1`.
            Expr::UnaryOp { op: datafusion::sql::sqlparser::ast::UnaryOperator::BitwiseNot, expr } => Some(Expr::Nested(Box::new(Expr::BinaryOp {
                left: Box::new(Expr::Nested(expr.clone())),
                op: BinaryOperator::PGBitwiseXor,
                right: Box::new(Expr::Value(Value::Number("-1".into(), false).into())),
            }))),
            Expr::Extract { field, expr, .. } => scalars::extract(field, expr),
            Expr::SimilarTo { negated, expr, pattern, escape_char: None } => scalars::similar_to(*negated, expr, pattern),
            Expr::BinaryOp { left, op, right } if matches!(left.as_ref(), Expr::Tuple(_)) => scalars::row_comparison(left, op, right),
            // `localtimestamp`, `current_schema`, ... without parentheses.
            Expr::Identifier(i) => clock::value_function(i),
            Expr::Like { escape_char: Some(esc), pattern, .. } if esc.to_string().trim_matches('\'') != "\\" => {
                // Only `\\` escapes in DataFusion: turn the custom escape into backslashes.
                let c = esc.to_string().trim_matches('\'').to_string();
                let doubled = call("replace", vec![pattern.as_ref().clone(), string_lit("\\"), string_lit("\\\\")]);
                // ESCAPE '' is no escape character at all.
                **pattern = if c.is_empty() { doubled } else { call("replace", vec![doubled, string_lit(&c), string_lit("\\")]) };
                *esc = Value::SingleQuotedString("\\".to_string()).into();
                None
            }
            Expr::Subquery(q) => super::subquery::decorrelatable(q),
            Expr::BinaryOp { op: op @ (BinaryOperator::Multiply | BinaryOperator::Divide), left, right }
                if is_interval_expr(left) || (*op == BinaryOperator::Multiply && is_interval_expr(right)) =>
            {
                let (iv, n) = if is_interval_expr(left) { (left, right) } else { (right, left) };
                let f = if *op == BinaryOperator::Multiply { "eddy_interval_mul" } else { "eddy_interval_div" };
                Some(call(f, vec![iv.as_ref().clone(), n.as_ref().clone()]))
            }
            Expr::BinaryOp { op: op @ (BinaryOperator::Arrow | BinaryOperator::LongArrow | BinaryOperator::HashArrow | BinaryOperator::HashLongArrow | BinaryOperator::AtArrow | BinaryOperator::ArrowAt | BinaryOperator::Question | BinaryOperator::QuestionPipe | BinaryOperator::QuestionAnd), left, right } => {
                let (f, args) = match op {
                    BinaryOperator::Arrow => ("eddy_jsonb_get", vec![left, right]),
                    BinaryOperator::LongArrow => ("eddy_jsonb_get_text", vec![left, right]),
                    BinaryOperator::HashArrow => ("eddy_jsonb_path", vec![left, right]),
                    BinaryOperator::HashLongArrow => ("eddy_jsonb_path_text", vec![left, right]),
                    BinaryOperator::AtArrow => ("eddy_jsonb_contains", vec![left, right]),
                    BinaryOperator::ArrowAt => ("eddy_jsonb_contains", vec![right, left]),
                    BinaryOperator::QuestionPipe => (super::jsonb_ops::EXISTS_ANY, vec![left, right]),
                    BinaryOperator::QuestionAnd => (super::jsonb_ops::EXISTS_ALL, vec![left, right]),
                    _ => ("eddy_jsonb_exists", vec![left, right]),
                };
                Some(call(f, args.into_iter().map(|e| e.as_ref().clone()).collect()))
            }
            // Arrays overlap: they have an element in common.
            Expr::BinaryOp { op: BinaryOperator::PGOverlap, left, right } => Some(call("array_has_any", vec![left.as_ref().clone(), right.as_ref().clone()])),
            Expr::BinaryOp { op: BinaryOperator::PGStartsWith, left, right } => Some(call("starts_with", vec![left.as_ref().clone(), right.as_ref().clone()])),
            Expr::BinaryOp { op: BinaryOperator::PGExp, left, right } => {
                // Computed in double precision (PostgreSQL keeps numeric for numeric operands).
                let double = |e: &Expr| Expr::Cast {
                    kind: datafusion::sql::sqlparser::ast::CastKind::Cast,
                    expr: Box::new(e.clone()),
                    data_type: SqlType::DoublePrecision,
                    array: false,
                    format: None,
                };
                Some(call("power", vec![double(left), double(right)]))
            }
            Expr::BinaryOp { op: BinaryOperator::PGCustomBinaryOperator(names), left, right } => {
                operator_of(names).map(|op| Expr::BinaryOp { left: left.clone(), op, right: right.clone() })
            }
            Expr::BinaryOp { op: BinaryOperator::Eq | BinaryOperator::NotEq, right, .. } => {
                if let Some(arr) = array_literal(right) {
                    **right = arr;
                }
                None
            }
            Expr::AnyOp { right, .. } | Expr::AllOp { right, .. } => {
                let inner = match right.as_ref() {
                    Expr::Nested(n) => n.as_ref(),
                    other => other,
                };
                if let Some(arr) = array_literal(inner) {
                    **right = arr;
                }
                scalars::any_with_nulls(e)
            }
            Expr::CompoundFieldAccess { root, access_chain } if !matches!(root.as_ref(), Expr::Identifier(_)) => {
                let mut out = root.as_ref().clone();
                let mut rest = Vec::new();
                for a in access_chain.drain(..) {
                    match a {
                        AccessExpr::Dot(Expr::Identifier(id)) if rest.is_empty() => {
                            out = call("get_field", vec![out, Expr::value(Value::SingleQuotedString(id.value.to_ascii_lowercase()))]);
                        }
                        other => rest.push(other),
                    }
                }
                if rest.is_empty() {
                    Some(out)
                } else {
                    Some(Expr::CompoundFieldAccess { root: Box::new(out), access_chain: rest })
                }
            }
            _ => None,
        };
        if let Some(r) = replacement {
            *e = r;
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        super::colnames::assign(select, self.depth <= 1);
        super::subquery::bound_lateral_series(select);
        aggregates::grouping_set_positions(select);
        quantified::not_in_beside_other_conditions(select);
        ControlFlow::Continue(())
    }

    fn post_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        // After the items' own rewrites, which may introduce EXISTS (`x > ALL (subquery)`).
        exists_as_count(select);
        super::subquery::lift_outer_references(select);
        ControlFlow::Continue(())
    }

    fn post_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
        let single_column_alias = |alias: &mut Option<TableAlias>| {
            if let Some(a) = alias {
                if a.columns.is_empty() {
                    a.columns = vec![TableAliasColumnDef::from_name(a.name.value.clone())];
                }
            }
        };
        match t {
            TableFactor::Table { name, args: Some(args), alias, .. } => {
                strip_system_qualifier(name);
                let fname = base_name(name);
                if fname == "generate_series" {
                    clock::series_args(&mut args.args);
                }
                if matches!(fname.as_str(), "generate_series" | "unnest" | "generate_subscripts") {
                    // Without an alias the function names the relation and its column
                    // (`SELECT generate_series FROM generate_series(1, 3)`).
                    if alias.is_none() && (fname != "unnest" || args.args.len() == 1) {
                        *alias = Some(TableAlias { explicit: true, name: Ident::new(fname.clone()), columns: vec![], at: None });
                    }
                    single_column_alias(alias);
                }
                if fname == "tumble" || fname == "hop" {
                    match time_windows::time_window(&fname, &unnamed_arg_exprs(args), alias.take()) {
                        Ok(derived) => *t = derived,
                        Err(e) => {
                            self.error = Some(e);
                            return ControlFlow::Break(());
                        }
                    }
                    return ControlFlow::Continue(());
                }
                let list_function = json::json_set_function(&fname).or_else(|| (fname == "regexp_matches").then_some((lateral::REGEXP_MATCHES, "regexp_matches")));
                if let Some((list, column)) = list_function {
                    // FROM jsonb_array_elements(x) [AS e]: the unnested list, its column named
                    // as PostgreSQL names it, or after the alias (which PostgreSQL reads as
                    // the value too: `e ->> 'k'`).
                    let named = alias.is_some();
                    let mut a = alias.take().unwrap_or_else(|| TableAlias { explicit: true, name: Ident::new(fname.clone()), columns: vec![], at: None });
                    if a.columns.is_empty() {
                        let column = if named { a.name.value.clone() } else { column.to_string() };
                        a.columns = vec![TableAliasColumnDef::from_name(column)];
                    }
                    let array_exprs = vec![call(list, unnamed_arg_exprs(args))];
                    *t = TableFactor::UNNEST { alias: Some(a), array_exprs, with_offset: false, with_offset_alias: None, with_ordinality: false };
                    return ControlFlow::Continue(());
                }
                if let Some(derived) = lateral::scalar_function_in_from(&fname, &args.args, alias) {
                    *t = derived;
                    return ControlFlow::Continue(());
                }
                if fname == "unnest" {
                    let array_exprs: Vec<Expr> = unnamed_arg_exprs(args);
                    *t = TableFactor::UNNEST {
                        alias: alias.take(),
                        array_exprs,
                        with_offset: false,
                        with_offset_alias: None,
                        with_ordinality: false,
                    };
                }
            }
            TableFactor::Function { name, alias, .. } => {
                strip_system_qualifier(name);
                single_column_alias(alias);
            }
            TableFactor::UNNEST { alias, array_exprs, with_ordinality: false, .. } if array_exprs.len() == 1 => {
                if alias.is_none() {
                    *alias = Some(TableAlias { explicit: true, name: Ident::new("unnest"), columns: vec![], at: None });
                }
                single_column_alias(alias)
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests;
