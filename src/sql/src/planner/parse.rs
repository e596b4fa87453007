//! Parsing SQL text with bounded recursion: the limits every statement from a client, and
//! every stored definition parsed again, are held to (issue 10: no input may overflow a stack).

use std::any::TypeId;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::sql::sqlparser::ast::{ColumnOption, GeneratedAs, Statement};
use datafusion::sql::sqlparser::dialect::{Dialect, PostgreSqlDialect, Precedence};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use eddy_common::error::sqlstate;
use eddy_common::{user_err, EddyError, Result};

/// How deeply a statement's syntax tree may nest, as bounded by the frontend's token scan
/// (`split::Depth`). Every pass
/// over the tree (our rewrites, DataFusion's planner, optimizer and expression evaluation,
/// dropping it) recurses once per level; the server runs statements on threads whose stacks
/// hold this many levels with a wide margin (see `eddy_server::server::STATEMENT_STACK_BYTES`).
/// Deeper statements are refused with `54001`, as PostgreSQL refuses what exceeds its
/// `max_stack_depth`.
pub const MAX_STATEMENT_DEPTH: usize = 3_000;

/// How deeply subquery expressions (scalar, `EXISTS`, `IN`, `ANY`) may nest in a plan, views
/// expanded. DataFusion 54 checks a plan's invariants before optimizing it, and that check
/// visits a subquery nested `k` levels deep `2^k` times (`assert_valid_extension_nodes` walks
/// subqueries both through `apply_with_subqueries` and by recursing itself), so nesting is
/// exponential in planning time: 18 levels took 35 s in a debug build. Subqueries in `FROM`
/// (derived tables, views) do not count.
pub const MAX_SUBQUERY_NESTING: usize = 12;

/// Refuses (`54001`) a plan whose subquery expressions nest deeper than
/// [`MAX_SUBQUERY_NESTING`]. Linear in the plan's size: each subquery is visited once.
pub fn check_subquery_nesting(plan: &LogicalPlan) -> Result<()> {
    let depth = subquery_nesting(plan).map_err(EddyError::from)?;
    if depth > MAX_SUBQUERY_NESTING {
        return Err(user_err!(
            sqlstate::STATEMENT_TOO_COMPLEX,
            "statement is too complex: subqueries nest {depth} levels deep, the limit is {MAX_SUBQUERY_NESTING}"
        ));
    }
    Ok(())
}

/// The checks a query's plan passes before it runs: [`check_subquery_nesting`] and
/// [`check_recursive_terms`].
pub fn check_plan(plan: &LogicalPlan) -> Result<()> {
    check_subquery_nesting(plan)?;
    check_recursive_terms(plan)
}

/// Refuses (`42P19`, as PostgreSQL does) a recursive CTE whose recursive term aggregates its
/// own rows: `WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT count(*) FROM x)` ran forever
/// (each step counts the last one's single row).
pub fn check_recursive_terms(plan: &LogicalPlan) -> Result<()> {
    let mut aggregating = false;
    plan.apply_with_subqueries(|node| {
        let LogicalPlan::RecursiveQuery(r) = node else { return Ok(TreeNodeRecursion::Continue) };
        r.recursive_term.apply(|n| {
            // A GROUP BY or DISTINCT without aggregate functions is allowed, as in PostgreSQL.
            let LogicalPlan::Aggregate(a) = n else { return Ok(TreeNodeRecursion::Continue) };
            if a.aggr_expr.is_empty() {
                return Ok(TreeNodeRecursion::Continue);
            }
            a.input.apply(|below| {
                aggregating |= matches!(below, LogicalPlan::TableScan(t) if t.table_name.table() == r.name);
                Ok(if aggregating { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
            })
        })?;
        Ok(if aggregating { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    })
    .map_err(EddyError::from)?;
    if aggregating {
        return Err(user_err!("42P19", "aggregate functions are not allowed in a recursive query's recursive term"));
    }
    Ok(())
}

fn subquery_nesting(plan: &LogicalPlan) -> datafusion::error::Result<usize> {
    let mut deepest = 0;
    // `apply` walks plan nodes but not into subquery expressions: each is entered once, here.
    plan.apply(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                let sub = match e {
                    Expr::ScalarSubquery(s) => Some(&s.subquery),
                    Expr::Exists(x) => Some(&x.subquery.subquery),
                    Expr::InSubquery(x) => Some(&x.subquery.subquery),
                    Expr::SetComparison(x) => Some(&x.subquery.subquery),
                    _ => None,
                };
                if let Some(sub) = sub {
                    deepest = deepest.max(1 + subquery_nesting(sub)?);
                    if deepest > MAX_SUBQUERY_NESTING {
                        return Ok(TreeNodeRecursion::Stop);
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    Ok(deepest)
}

/// The parser's own recursion limit (nested parentheses, subqueries, function calls): a second
/// guard behind [`MAX_STATEMENT_DEPTH`]. The parser spends up to two units per level of
/// nesting, so this is twice the depth limit.
const PARSER_RECURSION_LIMIT: usize = 2 * MAX_STATEMENT_DEPTH;

/// The `54001` error for a statement nesting `depth` levels.
pub fn too_complex(depth: usize) -> EddyError {
    user_err!(
        sqlstate::STATEMENT_TOO_COMPLEX,
        "statement is too complex: it nests up to {depth} levels deep, the limit is {MAX_STATEMENT_DEPTH}"
    )
}

/// Parses one statement's text with the recursion limit; a statement nested too deeply is
/// `54001`, any other parse failure `42601`.
pub fn parse_bounded(sql: &str) -> Result<Vec<Statement>> {
    let dialect = EddyDialect::default();
    let parsed = Parser::new(&dialect).with_recursion_limit(PARSER_RECURSION_LIMIT).try_with_sql(sql).and_then(|mut p| p.parse_statements());
    let stmts = parsed.map_err(|e| match e {
        ParserError::RecursionLimitExceeded => user_err!(
            sqlstate::STATEMENT_TOO_COMPLEX,
            "statement is too complex: it nests too deeply to parse (the limit is {MAX_STATEMENT_DEPTH} levels)"
        ),
        e => user_err!(sqlstate::SYNTAX_ERROR, "{}", e.to_string().trim_start_matches("sql parser error: ")),
    })?;
    check_array_nesting(&stmts)?;
    Ok(stmts)
}

/// PostgreSQL's limit on the dimensions of an array (`MAXDIM`).
pub const MAX_ARRAY_DIMENSIONS: usize = 6;

/// Refuses (`54000`, as PostgreSQL) `ARRAY[...]` constructors nested more than
/// [`MAX_ARRAY_DIMENSIONS`] deep, before planning: DataFusion's type coercion of nested lists
/// grows steeply with their depth (1,000 levels took five minutes of CPU).
fn check_array_nesting(stmts: &[Statement]) -> Result<()> {
    use datafusion::sql::sqlparser::ast::{visit_expressions, Expr as SqlExpr};
    fn depth(e: &SqlExpr) -> usize {
        match e {
            SqlExpr::Array(a) => 1 + a.elem.iter().map(depth).max().unwrap_or(0),
            SqlExpr::Nested(inner) | SqlExpr::Cast { expr: inner, .. } => depth(inner),
            _ => 0,
        }
    }
    let mut deepest = 0;
    for stmt in stmts {
        let _ = visit_expressions(stmt, |e| {
            if matches!(e, SqlExpr::Array(_)) {
                deepest = deepest.max(depth(e));
            }
            if deepest > MAX_ARRAY_DIMENSIONS { std::ops::ControlFlow::Break(()) } else { std::ops::ControlFlow::Continue(()) }
        });
    }
    if deepest > MAX_ARRAY_DIMENSIONS {
        return Err(user_err!(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            "number of array dimensions ({deepest}) exceeds the maximum allowed ({MAX_ARRAY_DIMENSIONS})"
        ));
    }
    Ok(())
}


/// PostgreSQL's dialect, except that named function arguments are identifiers (`f(a => 1)`), as
/// in PostgreSQL. sqlparser's PostgreSQL dialect also allows an expression as the name, so it
/// parses every function argument twice (first as a possible name), which is exponential in
/// the nesting of calls: `abs(abs(...))` 22 deep took 18 s to parse, 40 deep would take days.
/// Everything else is PostgreSQL's dialect, including how the parser recognises it.
#[derive(Debug, Default)]
pub struct EddyDialect(PostgreSqlDialect);

impl Dialect for EddyDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<PostgreSqlDialect>()
    }

    fn supports_named_fn_args_with_expr_name(&self) -> bool {
        false
    }

    /// `TABLE name` as a statement, which sqlparser accepts only inside a query (after
    /// `UNION`, in parentheses); `pg::rewrite` makes it `SELECT * FROM name`.
    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        use datafusion::sql::sqlparser::tokenizer::Token;
        let is_table = matches!(&parser.peek_token_ref().token, Token::Word(w) if w.keyword == Keyword::TABLE);
        is_table.then(|| parser.parse_query().map(Statement::Query))
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        self.0.identifier_quote_style(identifier)
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.0.is_delimited_identifier_start(ch)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        self.0.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        self.0.is_identifier_part(ch)
    }

    fn supports_unicode_string_literal(&self) -> bool {
        self.0.supports_unicode_string_literal()
    }

    fn is_reserved_for_identifier(&self, kw: Keyword) -> bool {
        self.0.is_reserved_for_identifier(kw)
    }

    fn is_custom_operator_part(&self, ch: char) -> bool {
        self.0.is_custom_operator_part(ch)
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        self.0.get_next_precedence(parser)
    }

    /// `x [NOT] BETWEEN SYMMETRIC a AND b`, which sqlparser lacks: `(x BETWEEN a AND b) OR
    /// (x BETWEEN b AND a)` (negated: NOT of it), as PostgreSQL defines it; `ASYMMETRIC` is
    /// the plain form.
    /// `TRIM(LEADING | TRAILING | BOTH FROM x)`, which PostgreSQL accepts without the
    /// characters to trim (spaces); the parser wanted them before `FROM`.
    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<datafusion::sql::sqlparser::ast::Expr, ParserError>> {
        use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, TrimWhereField};
        use datafusion::sql::sqlparser::tokenizer::Token;
        let word = |n: usize, k: Keyword| matches!(&parser.peek_nth_token_ref(n).token, Token::Word(w) if w.keyword == k);
        if !word(0, Keyword::TRIM) || parser.peek_nth_token_ref(1).token != Token::LParen || !word(3, Keyword::FROM) {
            return None;
        }
        let side = [(Keyword::LEADING, TrimWhereField::Leading), (Keyword::TRAILING, TrimWhereField::Trailing), (Keyword::BOTH, TrimWhereField::Both)]
            .into_iter()
            .find(|(k, _)| word(2, *k))?
            .1;
        for _ in 0..4 {
            parser.next_token();
        }
        let parsed = parser.parse_expr().and_then(|expr| {
            parser.expect_token(&Token::RParen)?;
            Ok(SqlExpr::Trim { expr: Box::new(expr), trim_where: Some(side), trim_what: None, trim_characters: None })
        });
        Some(parsed)
    }

    fn parse_infix(&self, parser: &mut Parser, expr: &datafusion::sql::sqlparser::ast::Expr, _precedence: u8) -> Option<Result<datafusion::sql::sqlparser::ast::Expr, ParserError>> {
        use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr as SqlExpr, UnaryOperator};
        use datafusion::sql::sqlparser::tokenizer::Token;
        let word = |n: usize, k: Keyword| matches!(&parser.peek_nth_token_ref(n).token, Token::Word(w) if w.keyword == k);
        let negated = word(0, Keyword::NOT);
        let at = usize::from(negated);
        if !word(at, Keyword::BETWEEN) || !(word(at + 1, Keyword::SYMMETRIC) || word(at + 1, Keyword::ASYMMETRIC)) {
            return None;
        }
        let symmetric = word(at + 1, Keyword::SYMMETRIC);
        for _ in 0..at + 2 {
            parser.next_token();
        }
        let between = match parser.parse_between(expr.clone(), false) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let out = match (&between, symmetric) {
            (SqlExpr::Between { expr, low, high, .. }, true) => {
                let swapped = SqlExpr::Between { expr: expr.clone(), negated: false, low: high.clone(), high: low.clone() };
                SqlExpr::Nested(Box::new(SqlExpr::BinaryOp { left: Box::new(between.clone()), op: BinaryOperator::Or, right: Box::new(swapped) }))
            }
            _ => between,
        };
        Some(Ok(match negated {
            true => SqlExpr::UnaryOp { op: UnaryOperator::Not, expr: Box::new(SqlExpr::Nested(Box::new(out))) },
            false => out,
        }))
    }

    fn supports_filter_during_aggregation(&self) -> bool {
        self.0.supports_filter_during_aggregation()
    }

    fn supports_group_by_expr(&self) -> bool {
        self.0.supports_group_by_expr()
    }

    fn prec_value(&self, prec: Precedence) -> u8 {
        self.0.prec_value(prec)
    }

    fn allow_extract_custom(&self) -> bool {
        self.0.allow_extract_custom()
    }

    fn allow_extract_single_quotes(&self) -> bool {
        self.0.allow_extract_single_quotes()
    }

    fn supports_create_index_with_clause(&self) -> bool {
        self.0.supports_create_index_with_clause()
    }

    fn supports_explain_with_utility_options(&self) -> bool {
        self.0.supports_explain_with_utility_options()
    }

    fn supports_listen_notify(&self) -> bool {
        self.0.supports_listen_notify()
    }

    fn supports_factorial_operator(&self) -> bool {
        self.0.supports_factorial_operator()
    }

    fn supports_bitwise_shift_operators(&self) -> bool {
        self.0.supports_bitwise_shift_operators()
    }

    fn supports_comment_on(&self) -> bool {
        self.0.supports_comment_on()
    }

    fn supports_load_extension(&self) -> bool {
        self.0.supports_load_extension()
    }

    fn supports_named_fn_args_with_colon_operator(&self) -> bool {
        self.0.supports_named_fn_args_with_colon_operator()
    }

    fn supports_empty_projections(&self) -> bool {
        self.0.supports_empty_projections()
    }

    /// RisingWave's generated column `ts TIMESTAMPTZ AS PROCTIME()` (`AS expr` without
    /// `GENERATED ALWAYS`, which PostgreSQL's grammar lacks); the frontend decides which
    /// expressions it takes.
    fn parse_column_option(&self, parser: &mut Parser) -> Result<Option<Result<Option<ColumnOption>, ParserError>>, ParserError> {
        if !parser.parse_keyword(Keyword::AS) {
            return Ok(None);
        }
        let expr = match parser.parse_expr() {
            Ok(e) => e,
            Err(e) => return Ok(Some(Err(e))),
        };
        Ok(Some(Ok(Some(ColumnOption::Generated {
            generated_as: GeneratedAs::Always,
            sequence_options: None,
            generation_expr: Some(expr),
            generation_expr_mode: None,
            generated_keyword: false,
        }))))
    }

    fn supports_nested_comments(&self) -> bool {
        self.0.supports_nested_comments()
    }

    fn supports_string_escape_constant(&self) -> bool {
        self.0.supports_string_escape_constant()
    }

    fn supports_numeric_literal_underscores(&self) -> bool {
        self.0.supports_numeric_literal_underscores()
    }

    fn supports_array_typedef_with_brackets(&self) -> bool {
        self.0.supports_array_typedef_with_brackets()
    }

    fn supports_geometric_types(&self) -> bool {
        self.0.supports_geometric_types()
    }

    fn supports_set_names(&self) -> bool {
        self.0.supports_set_names()
    }

    fn supports_alter_column_type_using(&self) -> bool {
        self.0.supports_alter_column_type_using()
    }

    fn supports_notnull_operator(&self) -> bool {
        self.0.supports_notnull_operator()
    }

    fn supports_interval_options(&self) -> bool {
        self.0.supports_interval_options()
    }

    fn supports_insert_table_alias(&self) -> bool {
        self.0.supports_insert_table_alias()
    }

    fn supports_create_table_like_parenthesized(&self) -> bool {
        self.0.supports_create_table_like_parenthesized()
    }

    fn supports_select_wildcard_with_alias(&self) -> bool {
        self.0.supports_select_wildcard_with_alias()
    }

    fn supports_comma_separated_trim(&self) -> bool {
        self.0.supports_comma_separated_trim()
    }

    fn supports_xml_expressions(&self) -> bool {
        self.0.supports_xml_expressions()
    }

    fn supports_comment_optimizer_hint(&self) -> bool {
        self.0.supports_comment_optimizer_hint()
    }
}
