//! Small AST builders, predicates and visitors shared by the rewrites of this module, by
//! `pg::subquery` and by view expansion (a leaf, so that neither of the two depends on the other through them).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    CaseWhen, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments, Ident, ObjectName,
    ObjectNamePart, Query, TableFunctionArgs, VisitorMut,
};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// A visitor calling `f` on the expressions of one SELECT, but not on those inside its
/// subqueries (their own SELECTs are visited on their own; visiting nested subqueries from every
/// enclosing level too made view expansion exponential in subquery nesting).
pub(crate) struct OwnExpressions<F> {
    f: F,
    /// How many subqueries deep the visitor is.
    queries: usize,
}

/// [`OwnExpressions`] calling `f`.
pub(crate) fn own_expressions<F: FnMut(&mut Expr) -> ControlFlow<()>>(f: F) -> OwnExpressions<F> {
    OwnExpressions { f, queries: 0 }
}

impl<F: FnMut(&mut Expr) -> ControlFlow<()>> VisitorMut for OwnExpressions<F> {
    type Break = ();

    fn pre_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.queries += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.queries -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if self.queries == 0 {
            (self.f)(e)
        } else {
            ControlFlow::Continue(())
        }
    }
}

/// Parses SQL a rewrite generated; `None` (no rewrite) if it does not parse.
pub(crate) fn parse_query(sql: &str) -> Option<datafusion::sql::sqlparser::ast::Query> {
    use datafusion::sql::sqlparser::{ast::Statement, dialect::PostgreSqlDialect, parser::Parser};
    match Parser::parse_sql(&PostgreSqlDialect {}, sql).ok()?.pop()? {
        Statement::Query(q) => Some(*q),
        _ => None,
    }
}

/// Last identifier of a possibly qualified name, lower-cased unless quoted.
pub(super) fn base_name(name: &ObjectName) -> String {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(i)) if i.quote_style.is_some() => i.value.clone(),
        Some(ObjectNamePart::Identifier(i)) => i.value.to_ascii_lowercase(),
        _ => name.to_string().to_ascii_lowercase(),
    }
}

/// A `'text'` literal.
pub fn string_lit(s: &str) -> Expr {
    Expr::value(datafusion::sql::sqlparser::ast::Value::SingleQuotedString(s.to_string()))
}

/// `name(args...)`.
pub fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args.into_iter().map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a))).collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// `f` called under `name`, with the same arguments, FILTER and OVER.
pub fn renamed(f: &Function, name: &str) -> Function {
    let mut g = f.clone();
    g.name = ObjectName::from(vec![Ident::new(name)]);
    g
}

/// `CASE WHEN condition THEN result ... END` (NULL when no condition holds).
pub fn case_when(conditions: Vec<(Expr, Expr)>) -> Expr {
    Expr::Case {
        case_token: TokenWithSpan::wrap(Token::make_keyword("CASE")).into(),
        end_token: TokenWithSpan::wrap(Token::make_keyword("END")).into(),
        operand: None,
        conditions: conditions.into_iter().map(|(condition, result)| CaseWhen { condition, result }).collect(),
        else_result: None,
    }
}

/// Aggregate functions: a scalar subquery projecting one of these already returns one row.
const AGGREGATES: &[&str] = &[
    "count", "sum", "min", "max", "avg", "array_agg", "string_agg", "bool_and", "bool_or", "every", "first_value", "eddy_single_value",
    "last_value", "json_agg", "jsonb_agg", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp",
    "percentile_cont", "percentile_disc", "mode", "approx_count_distinct", "json_object_agg", "jsonb_object_agg",
    "bit_and", "bit_or", "bit_xor", "corr", "covar", "covar_pop", "covar_samp", "regr_count", "regr_avgx",
    "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy", "regr_slope", "regr_intercept", "regr_r2", "median",
];

/// True when `e` calls an aggregate function anywhere (`max(v) - 1`, `coalesce(sum(v), 0)`):
/// without GROUP BY, a projection of such an expression returns exactly one row. A call inside a
/// nested subquery counts too, which only makes callers leave that subquery as it is.
pub fn contains_aggregate(e: &Expr) -> bool {
    use datafusion::sql::sqlparser::ast::visit_expressions;
    visit_expressions(e, |x| if is_aggregate_call(x) { std::ops::ControlFlow::Break(()) } else { std::ops::ControlFlow::Continue(()) })
        .is_break()
}

/// True when `e` is a call of an aggregate function (possibly cast or parenthesized).
pub fn is_aggregate_call(e: &Expr) -> bool {
    match e {
        Expr::Function(f) => f.over.is_none() && AGGREGATES.contains(&base_name(&f.name).as_str()),
        Expr::Nested(n) => is_aggregate_call(n),
        Expr::Cast { expr, .. } => is_aggregate_call(expr),
        _ => false,
    }
}

/// The plain positional arguments of a table function call.
pub(crate) fn unnamed_arg_exprs(args: &TableFunctionArgs) -> Vec<Expr> {
    args.args
        .iter()
        .filter_map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// `op`'s constraint, for the joins with one (inner, left, right, full).
pub(crate) fn constraint_mut(op: &mut datafusion::sql::sqlparser::ast::JoinOperator) -> Option<&mut datafusion::sql::sqlparser::ast::JoinConstraint> {
    use datafusion::sql::sqlparser::ast::JoinOperator as Op;
    match op {
        Op::Join(c) | Op::Inner(c) | Op::Left(c) | Op::LeftOuter(c) | Op::Right(c) | Op::RightOuter(c) | Op::FullOuter(c) => Some(c),
        _ => None,
    }
}

/// Two identifiers name the same thing: unquoted ones fold case, quoted ones match exactly.
pub(crate) fn same_ident(a: &datafusion::sql::sqlparser::ast::Ident, b: &datafusion::sql::sqlparser::ast::Ident) -> bool {
    match (a.quote_style, b.quote_style) {
        (None, None) => a.value.eq_ignore_ascii_case(&b.value),
        _ => a.value == b.value,
    }
}
