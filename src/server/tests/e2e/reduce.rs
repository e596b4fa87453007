//! The fuzzers' reducer (issue 10 item 4): shrinks a failing case — the statements run before a
//! query, and the query — to a small script that still fails the same check, so a fuzzer's
//! report is a few lines instead of a page.
//!
//! Statements are removed in halving chunks (delta debugging). The query is parsed with
//! sqlparser and simplified one step at a time, keeping a step whenever the case still fails:
//! a clause dropped (ORDER BY, LIMIT, WHERE, HAVING, DISTINCT, a select item, a join), a set
//! operation replaced by one side, an expression replaced by one of its operands, by `1` or by
//! `NULL`. Each step must make the text shorter, so reduction ends.

use std::future::Future;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Query, SetExpr, VisitMut, VisitorMut};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// A failing case: `script` runs first, then `query`.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub script: Vec<String>,
    pub query: String,
}

impl Case {
    /// The case as one SQL script.
    pub fn text(&self) -> String {
        let mut out: Vec<String> = self.script.iter().map(|s| format!("{s};")).collect();
        out.push(format!("{};", self.query));
        out.join("\n")
    }
}

/// Shrinks `case` while `fails` holds, checking at most `max_checks` candidates.
pub async fn reduce<F, Fut>(case: Case, max_checks: usize, mut fails: F) -> Case
where
    F: FnMut(Case) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut checks = 0usize;
    let mut cur = case;
    let mut check = |c: Case, checks: &mut usize| {
        *checks += 1;
        fails(c)
    };
    for _pass in 0..2 {
        // The statements: drop chunks, halving their size when no chunk can go.
        let mut chunk = cur.script.len().div_ceil(2).max(1);
        while !cur.script.is_empty() && checks < max_checks {
            let mut removed = false;
            let mut at = 0;
            while at < cur.script.len() && checks < max_checks {
                let mut candidate = cur.clone();
                candidate.script.drain(at..(at + chunk).min(candidate.script.len()));
                if check(candidate.clone(), &mut checks).await {
                    cur = candidate;
                    removed = true;
                } else {
                    at += chunk;
                }
            }
            if !removed {
                if chunk == 1 {
                    break;
                }
                chunk = chunk.div_ceil(2);
            }
        }
        // The query: the first shorter simplification that still fails, again and again.
        'query: while checks < max_checks {
            for q in query_candidates(&cur.query) {
                if checks >= max_checks {
                    break 'query;
                }
                let candidate = Case { script: cur.script.clone(), query: q };
                if check(candidate.clone(), &mut checks).await {
                    cur = candidate;
                    continue 'query;
                }
            }
            break;
        }
    }
    cur
}

/// The one-step simplifications of `query` that are shorter than it, shortest first.
pub fn query_candidates(query: &str) -> Vec<String> {
    let Ok(mut parsed) = Parser::parse_sql(&PostgreSqlDialect {}, query) else { return vec![] };
    let Some(stmt) = parsed.pop().filter(|_| parsed.is_empty()) else { return vec![] };
    let mut count = Edit { target: usize::MAX, seen: 0, kind: Site::Query, step: 0, applied: false };
    let _ = stmt.clone().visit(&mut count);
    let queries = count.seen;
    let mut count = Edit { target: usize::MAX, seen: 0, kind: Site::Expr, step: 0, applied: false };
    let _ = stmt.clone().visit(&mut count);
    let exprs = count.seen;
    let mut out = Vec::new();
    for (kind, sites, steps) in [(Site::Query, queries, QUERY_STEPS), (Site::Expr, exprs, EXPR_STEPS)] {
        for target in 0..sites {
            for step in 0..steps {
                let mut s = stmt.clone();
                let mut edit = Edit { target, seen: 0, kind, step, applied: false };
                let _ = s.visit(&mut edit);
                if edit.applied {
                    let text = s.to_string();
                    if text.len() < query.len() && !out.contains(&text) {
                        out.push(text);
                    }
                }
            }
        }
    }
    out.sort_by_key(String::len);
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Site {
    Query,
    Expr,
}

/// Simplifications of one query: drop ORDER BY, LIMIT/FETCH, WHERE, HAVING, DISTINCT; a set
/// operation's left or right side; then (steps 7 on) select item or join number `step - 7`.
const QUERY_STEPS: usize = 7 + 16;
/// Replacements of one expression: operand number `step` (0..4), then `1`, then `NULL`.
const EXPR_STEPS: usize = 6;

/// Applies simplification `step` at the `target`th site of `kind` (counting in visiting order).
struct Edit {
    target: usize,
    seen: usize,
    kind: Site,
    step: usize,
    applied: bool,
}

impl VisitorMut for Edit {
    type Break = ();

    fn post_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        if self.kind != Site::Query {
            return ControlFlow::Continue(());
        }
        self.seen += 1;
        if self.seen - 1 != self.target {
            return ControlFlow::Continue(());
        }
        self.applied = simplify_query(q, self.step);
        ControlFlow::Break(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if self.kind != Site::Expr {
            return ControlFlow::Continue(());
        }
        self.seen += 1;
        if self.seen - 1 != self.target {
            return ControlFlow::Continue(());
        }
        let replacement = match self.step {
            0..4 => operands(e).into_iter().nth(self.step),
            4 => parse_expr("1"),
            _ => parse_expr("NULL"),
        };
        if let Some(r) = replacement {
            *e = r;
            self.applied = true;
        }
        ControlFlow::Break(())
    }
}

fn parse_expr(sql: &str) -> Option<Expr> {
    Parser::new(&PostgreSqlDialect {}).try_with_sql(sql).ok()?.parse_expr().ok()
}

fn simplify_query(q: &mut Query, step: usize) -> bool {
    fn take<T>(x: &mut Option<T>) -> bool {
        x.take().is_some()
    }
    match step {
        0 => take(&mut q.order_by),
        1 => take(&mut q.limit_clause) | take(&mut q.fetch),
        5 | 6 => match q.body.as_mut() {
            SetExpr::SetOperation { left, right, .. } => {
                let side = if step == 5 { left.as_ref().clone() } else { right.as_ref().clone() };
                *q.body = side;
                true
            }
            _ => false,
        },
        _ => {
            let SetExpr::Select(s) = q.body.as_mut() else { return false };
            match step {
                2 => take(&mut s.selection),
                3 => take(&mut s.having),
                4 => take(&mut s.distinct),
                n => {
                    let k = n - 7;
                    if s.projection.len() > 1 && k < s.projection.len() {
                        s.projection.remove(k);
                        true
                    } else if let Some(j) = k.checked_sub(s.projection.len()).filter(|j| s.from.first().is_some_and(|f| *j < f.joins.len())) {
                        s.from[0].joins.remove(j);
                        true
                    } else {
                        false
                    }
                }
            }
        }
    }
}

/// The direct operands of `e` that are expressions.
fn operands(e: &Expr) -> Vec<Expr> {
    let boxed = |b: &[&Expr]| b.iter().map(|x| (*x).clone()).collect::<Vec<_>>();
    match e {
        Expr::BinaryOp { left, right, .. } => boxed(&[left, right]),
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::Cast { expr, .. }
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::IsTrue(expr)
        | Expr::IsFalse(expr)
        | Expr::IsNotTrue(expr)
        | Expr::IsNotFalse(expr)
        | Expr::InSubquery { expr, .. } => boxed(&[expr]),
        Expr::IsDistinctFrom(a, b) | Expr::IsNotDistinctFrom(a, b) => boxed(&[a, b]),
        Expr::Between { expr, low, high, .. } => boxed(&[expr, low, high]),
        Expr::InList { expr, list, .. } => std::iter::once(expr.as_ref().clone()).chain(list.iter().cloned()).collect(),
        Expr::Like { expr, pattern, .. } | Expr::ILike { expr, pattern, .. } => boxed(&[expr, pattern]),
        Expr::Case { operand, conditions, else_result, .. } => operand
            .iter()
            .map(|o| o.as_ref().clone())
            .chain(conditions.iter().flat_map(|c| [c.result.clone(), c.condition.clone()]))
            .chain(else_result.iter().map(|x| x.as_ref().clone()))
            .collect(),
        Expr::Function(f) => match &f.args {
            FunctionArguments::List(list) => list
                .args
                .iter()
                .filter_map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => Some(x.clone()),
                    _ => None,
                })
                .collect(),
            _ => vec![],
        },
        _ => vec![],
    }
}

#[tokio::test]
async fn the_reducer_shrinks_a_case_to_what_makes_it_fail() {
    // A made-up failure: the query still reads t3's column d and still compares something
    // with 7, and the script still inserts the row (7, 7).
    let case = Case {
        script: (0..12).map(|i| format!("INSERT INTO t3 VALUES ({i}, {i})")).collect(),
        query: "SELECT r1.id, r1.a + 2 AS x, count(*) FROM t1 r1 JOIN t3 r3 ON r1.id = r3.k LEFT JOIN t2 r2 ON r2.a = r1.a \
                WHERE r1.a > 1 AND r3.d = 7 OR r1.b IS NULL GROUP BY r1.id, r1.a HAVING count(*) > 1 ORDER BY 1 LIMIT 5"
            .into(),
    };
    let fails = |c: Case| async move {
        c.query.contains("r3.d") && c.query.contains('7') && c.script.iter().any(|s| s == "INSERT INTO t3 VALUES (7, 7)")
    };
    assert!(fails(case.clone()).await);
    let reduced = reduce(case.clone(), 2000, fails).await;
    assert!(fails(reduced.clone()).await, "the reduced case still fails: {reduced:?}");
    assert_eq!(reduced.script, vec!["INSERT INTO t3 VALUES (7, 7)".to_string()]);
    assert!(reduced.query.len() * 2 < case.query.len(), "the query shrank: {}", reduced.query);
    assert!(!reduced.query.contains("ORDER BY") && !reduced.query.contains("LIMIT") && !reduced.query.contains("LEFT JOIN"), "{}", reduced.query);
    eprintln!("reduced to:\n{}", reduced.text());
}
