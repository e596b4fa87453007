//! Parameter types a client declares when it prepares a statement (the OIDs of the protocol's
//! Parse message). In PostgreSQL a declared type is the parameter's type: `SELECT $1 * 2` with
//! `$1` declared `float8` and bound to 1.5 is 3. Eddy infers a parameter's type from its
//! context, so each declared parameter is written as `CAST($n AS type)` before planning, and the
//! context sees the declared type (a float8 compared with an integer column stays a float8,
//! where it was truncated to the column's type). Undeclared parameters (OID 0) and text-like
//! declarations (text, varchar, name, ...: what drivers send for strings, which PostgreSQL
//! reads as the context's type via I/O conversion in most places) keep inference. `LIMIT $1`
//! and `OFFSET $1` stay bare: they must be constants when planned.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{CastKind, Expr, LimitClause, Query, Statement, Value, VisitMut, VisitorMut};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::frontend::statement::EddyStatement;

/// The SQL type a declared parameter is cast to, for the types whose values a context must not
/// re-type: numbers, booleans, dates and times, intervals, bytea, json, uuid and arrays of them.
fn sql_type(oid: u32) -> Option<&'static str> {
    Some(match oid {
        16 => "boolean",
        17 => "bytea",
        20 => "bigint",
        21 => "smallint",
        23 => "integer",
        114 => "json",
        700 => "real",
        701 => "double precision",
        1082 => "date",
        1083 => "time",
        1114 => "timestamp",
        1184 => "timestamptz",
        1186 => "interval",
        1700 => "numeric",
        2950 => "uuid",
        3802 => "jsonb",
        1000 => "boolean[]",
        1005 => "smallint[]",
        1007 => "integer[]",
        1016 => "bigint[]",
        1021 => "real[]",
        1022 => "double precision[]",
        1231 => "numeric[]",
        1182 => "date[]",
        1115 => "timestamp[]",
        1185 => "timestamptz[]",
        _ => return None,
    })
}

/// Casts each placeholder of `stmt` whose type `oids` declares (see the module docs).
pub fn declare_parameter_types(stmt: &mut EddyStatement, oids: &[Option<u32>]) {
    let EddyStatement::Sql(stmt, _) = stmt else { return };
    let types: Vec<Option<datafusion::sql::sqlparser::ast::DataType>> = oids
        .iter()
        .map(|oid| {
            let name = sql_type((*oid)?)?;
            Parser::new(&PostgreSqlDialect {}).try_with_sql(name).ok()?.parse_data_type().ok()
        })
        .collect();
    if types.iter().all(Option::is_none) || !matches!(stmt.as_ref(), Statement::Query(_) | Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_)) {
        return;
    }
    let _ = stmt.visit(&mut Declare { types: &types });
}

struct Declare<'a> {
    types: &'a [Option<datafusion::sql::sqlparser::ast::DataType>],
}

fn placeholder(e: &Expr) -> Option<usize> {
    let Expr::Value(v) = e else { return None };
    let Value::Placeholder(p) = &v.value else { return None };
    p.strip_prefix('$')?.parse::<usize>().ok()?.checked_sub(1)
}

impl VisitorMut for Declare<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if let Some(Some(ty)) = placeholder(e).and_then(|i| self.types.get(i)) {
            *e = Expr::Cast { kind: CastKind::Cast, expr: Box::new(e.clone()), data_type: ty.clone(), format: None, array: false };
        }
        ControlFlow::Continue(())
    }

    /// Children are visited before this: `LIMIT` and `OFFSET` lose their casts again.
    fn post_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        let bare = |e: &mut Expr| {
            if let Expr::Cast { expr, .. } = e {
                if placeholder(expr).is_some() {
                    *e = expr.as_ref().clone();
                }
            }
        };
        match &mut q.limit_clause {
            Some(LimitClause::LimitOffset { limit, offset, .. }) => {
                limit.as_mut().map(bare);
                if let Some(o) = offset {
                    bare(&mut o.value);
                }
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
                bare(offset);
                bare(limit);
            }
            None => {}
        }
        if let Some(f) = &mut q.fetch {
            f.quantity.as_mut().map(bare);
        }
        ControlFlow::Continue(())
    }
}
