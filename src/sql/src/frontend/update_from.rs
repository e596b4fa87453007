//! `UPDATE t SET ... FROM f, ... WHERE ...`, which DataFusion's planner refuses: planned as the
//! query `SELECT <t's new row>, <t's old key> FROM t, f, ... WHERE ...` under an UPDATE node.
//! The new row is what DataFusion's own UPDATE plan computes (each column's new value or the
//! column itself); the old key columns are named as `dml::with_old_keys` names them, so the
//! executor finds them already there. A target row the join matches several times is updated
//! once, with the first match (PostgreSQL uses one unspecified match), see `dml`.
//!
//! `DELETE FROM t [AS a] USING f, ... WHERE c`, which DataFusion refuses too (and a DELETE's
//! alias, which it ignored: `DELETE FROM t a WHERE a.x > 1` was 42703), is the query `SELECT
//! <t's row> FROM t [AS a] WHERE EXISTS (SELECT 1 FROM f, ... WHERE c)` under a DELETE node: the
//! rows of `t` some row of the join matches, each deleted once.

use std::sync::Arc;

use datafusion::common::TableReference;
use datafusion::datasource::provider_as_source;
use datafusion::execution::SessionState;
use datafusion::logical_expr::{DmlStatement, ExprSchemable, LogicalPlan, WriteOp};
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, Delete, Expr, FromTable, Ident, ObjectName, ObjectNamePart, SelectItem, SetExpr, Statement, TableAlias, TableFactor,
    TableWithJoins, UpdateTableFromKind, Value,
};
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};

use crate::frontend::names::resolve_relation;
use crate::frontend::session::Session;

/// An UPDATE with FROM, as the query computing its rows and the table it writes.
pub(crate) struct UpdateFrom {
    pub query: Statement,
    table: TableReference,
    op: WriteOp,
}

impl Session {
    /// The query form of `stmt` if it is an UPDATE with a FROM clause (see the module docs).
    pub(crate) fn update_from_query(&self, stmt: &Statement) -> Result<Option<UpdateFrom>> {
        if let Statement::Delete(d) = stmt {
            return self.delete_query(d);
        }
        let Statement::Update(u) = stmt else { return Ok(None) };
        let Some(from) = &u.from else { return Ok(None) };
        let from = match from {
            UpdateTableFromKind::BeforeSet(f) | UpdateTableFromKind::AfterSet(f) => f,
        };
        let TableFactor::Table { name, alias, .. } = &u.table.relation else {
            return Err(user_err!(sqlstate::SYNTAX_ERROR, "UPDATE needs a table name"));
        };
        let target = Target::new(self, name, alias.as_ref())?;
        let table = &target.table;
        let mut assigned = std::collections::HashMap::new();
        for a in &u.assignments {
            let AssignmentTarget::ColumnName(c) = &a.target else {
                return Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "UPDATE ... FROM assigns one column at a time"));
            };
            let column = c.0.last().and_then(ObjectNamePart::as_ident).map(|i| crate::frontend::names::normalize_ident(&i.to_string())).unwrap_or_default();
            if !table.columns.iter().any(|col| !col.hidden && col.name == column) {
                return Err(user_err!(sqlstate::UNDEFINED_COLUMN, "column \"{column}\" of relation \"{}\" does not exist", table.name));
            }
            assigned.insert(column, a.value.clone());
        }
        let mut projection = target.row(|column| assigned.remove(column));
        let storage = table.planning_schema(true);
        for (i, &k) in table.storage_pk().iter().enumerate() {
            let key = storage.field(k).name();
            projection.push(SelectItem::ExprWithAlias { expr: target.column(key), alias: Ident::new(crate::frontend::dml::old_key_name(i)) });
        }
        let from = std::iter::once(u.table.clone()).chain(from.iter().cloned()).collect();
        let query = select(projection, from, u.selection.clone())?;
        Ok(Some(UpdateFrom { query, table: target.reference, op: WriteOp::Update }))
    }

    /// The query form of a DELETE with USING or an alias.
    fn delete_query(&self, d: &Delete) -> Result<Option<UpdateFrom>> {
        let (FromTable::WithFromKeyword(targets) | FromTable::WithoutKeyword(targets)) = &d.from;
        let using = d.using.as_ref().filter(|u| !u.is_empty());
        let [first] = targets.as_slice() else { return Ok(None) };
        let TableFactor::Table { name, alias, .. } = &first.relation else { return Ok(None) };
        if using.is_none() && alias.is_none() {
            return Ok(None);
        }
        let target = Target::new(self, name, alias.as_ref())?;
        let projection = target.row(|_| None);
        let selection = match using {
            None => d.selection.clone(),
            Some(using) => {
                let exists = select(vec![SelectItem::UnnamedExpr(Expr::value(Value::Number("1".into(), false)))], using.clone(), d.selection.clone())?;
                let Statement::Query(exists) = exists else { return Err(eddy_common::internal_err!("not a query")) };
                Some(Expr::Exists { subquery: exists, negated: false })
            }
        };
        let query = select(projection, vec![first.clone()], selection)?;
        Ok(Some(UpdateFrom { query, table: target.reference, op: WriteOp::Delete }))
    }
}

/// The table an UPDATE or DELETE writes, as the query form names it.
struct Target<'a> {
    table: Arc<crate::catalog::TableCatalog>,
    reference: TableReference,
    name: &'a ObjectName,
    alias: Option<&'a TableAlias>,
}

impl<'a> Target<'a> {
    fn new(session: &Session, name: &'a ObjectName, alias: Option<&'a TableAlias>) -> Result<Self> {
        let (schema, rel, table) = resolve_relation(session, name)?;
        Ok(Self { table, reference: TableReference::partial(schema, rel), name, alias })
    }

    /// One of the target's columns, qualified by its alias, or by its name as written.
    fn column(&self, column: &str) -> Expr {
        let mut parts: Vec<Ident> = match self.alias {
            Some(a) => vec![a.name.clone()],
            None => self.name.0.iter().filter_map(ObjectNamePart::as_ident).cloned().collect(),
        };
        parts.push(Ident::with_quote('"', column));
        Expr::CompoundIdentifier(parts)
    }

    /// The target's stored row as select items named after its columns: `value(column)` where
    /// it gives one, else the column itself.
    fn row(&self, mut value: impl FnMut(&str) -> Option<Expr>) -> Vec<SelectItem> {
        let storage = self.table.planning_schema(true);
        let items = storage.fields().iter().map(|f| SelectItem::ExprWithAlias {
            expr: value(f.name()).unwrap_or_else(|| self.column(f.name())),
            alias: Ident::with_quote('"', f.name()),
        });
        items.collect()
    }
}

/// `SELECT projection FROM from WHERE selection`.
fn select(projection: Vec<SelectItem>, from: Vec<TableWithJoins>, selection: Option<Expr>) -> Result<Statement> {
    let mut query = crate::pg::rewrite::ast::parse_query("SELECT 1").ok_or_else(|| eddy_common::internal_err!("SELECT 1 does not parse"))?;
    let SetExpr::Select(s) = query.body.as_mut() else { return Err(eddy_common::internal_err!("SELECT 1 is not a SELECT")) };
    s.projection = projection;
    s.from = from;
    s.selection = selection;
    Ok(Statement::Query(Box::new(query)))
}

impl UpdateFrom {
    /// The UPDATE node over the planned query.
    pub(crate) async fn plan(&self, state: &SessionState, rows: LogicalPlan) -> Result<LogicalPlan> {
        let provider = state
            .schema_for_ref(self.table.clone())?
            .table(self.table.table())
            .await?
            .ok_or_else(|| user_err!(sqlstate::UNDEFINED_TABLE, "relation \"{}\" does not exist", self.table.table()))?;
        // The new values cast to their columns' types in the plan, as DataFusion's own UPDATE
        // plan does: the cast then rounds as PostgreSQL's assignment does (a float into an
        // integer column was truncated by the executor's cast).
        let rows = if self.op == WriteOp::Update {
            let target = provider.schema();
            let schema = rows.schema().clone();
            let exprs = schema
                .iter()
                .enumerate()
                .map(|(i, (q, f))| {
                    let column = datafusion::logical_expr::Expr::Column(datafusion::common::Column::new(q.cloned(), f.name()));
                    match target.fields().get(i) {
                        Some(t) if t.data_type() != f.data_type() => Ok(column.cast_to(t.data_type(), &schema)?.alias(f.name())),
                        _ => Ok(column),
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            LogicalPlan::Projection(datafusion::logical_expr::Projection::try_new(exprs, Arc::new(rows))?)
        } else {
            rows
        };
        Ok(LogicalPlan::Dml(DmlStatement::new(self.table.clone(), provider_as_source(provider), self.op.clone(), Arc::new(rows))))
    }
}
