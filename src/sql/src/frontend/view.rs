//! Plain (non-materialized) views: `CREATE [OR REPLACE] VIEW`, `DROP VIEW`, and their
//! expansion.
//!
//! A view is a catalog entry holding its query; it has no state and no actor. Before a
//! statement is planned, every reference to a view in a FROM clause is replaced by the view's
//! query as a derived table named like the view, with the view's column names (views on views
//! expand recursively). A materialized view over a view stores its query with the views
//! expanded, so replacing a view later does not change what an existing materialized view
//! computes (or what its recovery re-plans).

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, ObjectName, Query, SetExpr, Statement, TableAlias, TableAliasColumnDef, TableFactor, TableWithJoins,
    VisitMut,
};
use eddy_common::error::sqlstate;
use eddy_common::types::ColumnType;
use eddy_common::{user_err, EddyError, Result};
use eddy_storage::EpochBatch;

use crate::catalog::{CatalogChange, ColumnCatalog, RelationKind, TableCatalog};
use crate::frontend::names::resolve_name;
use crate::frontend::session::Session;
use crate::pg::rewrite::ast::own_expressions;

/// Views nested deeper than this are taken to refer to themselves.
const MAX_DEPTH: usize = 32;

impl Session {
    /// Replaces the views `q` reads by their queries. Returns the ids of the relations `q`
    /// names itself (tables, views and materialized views), for dependency tracking.
    pub(crate) fn expand_views(&self, q: &mut Query) -> Result<Vec<u32>> {
        let mut direct = Vec::new();
        self.expand_query(q, &[], 0, Some(&mut direct))?;
        self.expand_whole_rows(q);
        direct.sort_unstable();
        direct.dedup();
        Ok(direct)
    }

    /// [`Session::expand_views`] over the queries of a statement (queries, INSERT sources,
    /// EXPLAIN and CREATE ... AS bodies); `true` if a view was expanded.
    pub(crate) fn expand_views_in(&self, stmt: &mut Statement) -> Result<()> {
        match stmt {
            Statement::Query(q) => self.expand_views(q).map(|_| ()),
            Statement::Insert(ins) => match ins.source.as_mut() {
                Some(q) => self.expand_views(q).map(|_| ()),
                None => Ok(()),
            },
            Statement::Explain { statement, .. } => self.expand_views_in(statement),
            _ => Ok(()),
        }
    }

    fn expand_query(&self, q: &mut Query, ctes: &[String], depth: usize, mut direct: Option<&mut Vec<u32>>) -> Result<()> {
        let mut scope = ctes.to_vec();
        if let Some(with) = q.with.as_mut() {
            for cte in with.cte_tables.iter_mut() {
                // A recursive CTE sees its own name.
                scope.push(cte.alias.name.value.to_lowercase());
                self.expand_query(&mut cte.query, &scope, depth, direct.as_deref_mut())?;
            }
        }
        self.expand_set_expr(&mut q.body, &scope, depth, direct)
    }

    fn expand_set_expr(&self, body: &mut SetExpr, ctes: &[String], depth: usize, mut direct: Option<&mut Vec<u32>>) -> Result<()> {
        match body {
            SetExpr::Select(select) => {
                for t in select.from.iter_mut() {
                    self.expand_from(t, ctes, depth, direct.as_deref_mut())?;
                }
                let mut err: Option<EddyError> = None;
                let mut visit = |e: &mut Expr| {
                    if let Expr::Subquery(q) | Expr::Exists { subquery: q, .. } | Expr::InSubquery { subquery: q, .. } = e {
                        if let Err(x) = self.expand_query(q, ctes, depth, direct.as_deref_mut()) {
                            err = Some(x);
                            return ControlFlow::Break(());
                        }
                    }
                    ControlFlow::Continue(())
                };
                let mut own = own_expressions(&mut visit);
                let _ = select.projection.visit(&mut own);
                let _ = select.selection.visit(&mut own);
                let _ = select.having.visit(&mut own);
                err.map_or(Ok(()), Err)
            }
            SetExpr::Query(q) => self.expand_query(q, ctes, depth, direct),
            SetExpr::SetOperation { left, right, .. } => {
                self.expand_set_expr(left, ctes, depth, direct.as_deref_mut())?;
                self.expand_set_expr(right, ctes, depth, direct)
            }
            _ => Ok(()),
        }
    }

    fn expand_from(&self, t: &mut TableWithJoins, ctes: &[String], depth: usize, mut direct: Option<&mut Vec<u32>>) -> Result<()> {
        self.expand_factor(&mut t.relation, ctes, depth, direct.as_deref_mut())?;
        for j in t.joins.iter_mut() {
            self.expand_factor(&mut j.relation, ctes, depth, direct.as_deref_mut())?;
        }
        Ok(())
    }

    fn expand_factor(&self, f: &mut TableFactor, ctes: &[String], depth: usize, direct: Option<&mut Vec<u32>>) -> Result<()> {
        match f {
            TableFactor::Derived { subquery, .. } => self.expand_query(subquery, ctes, depth, direct),
            TableFactor::NestedJoin { table_with_joins, .. } => self.expand_from(table_with_joins, ctes, depth, direct),
            TableFactor::Table { name, alias, args: None, .. } => {
                if name.0.len() == 1 && ctes.contains(&name.0[0].to_string().to_lowercase()) {
                    return Ok(());
                }
                let Ok((schema, rel_name)) = resolve_name(self, name) else { return Ok(()) };
                let Some(rel) = self.engine.catalog().table(&schema, &rel_name).cloned() else { return Ok(()) };
                if rel.kind != RelationKind::View {
                    // A materialized view stores its query with every relation schema-qualified,
                    // so its recovery binds the same relations whatever the search_path is then.
                    if direct.is_some() && name.0.len() == 1 {
                        let written = name.0[0].as_ident().cloned().unwrap_or_else(|| Ident::new(rel_name.clone()));
                        *name = ObjectName::from(vec![Ident::with_quote('"', schema.clone()), Ident::with_quote('"', rel_name.clone())]);
                        if alias.is_none() {
                            *alias = Some(TableAlias { explicit: true, name: written, columns: vec![], at: None });
                        }
                    }
                }
                if let Some(d) = direct {
                    d.push(rel.id);
                }
                if rel.kind != RelationKind::View {
                    return Ok(());
                }
                if depth >= MAX_DEPTH {
                    return Err(user_err!(sqlstate::INVALID_OBJECT_DEFINITION, "infinite recursion detected in view \"{}\"", rel.name));
                }
                let mut body = Self::parse_query(rel.query.as_deref().unwrap_or_default())?;
                self.expand_query(&mut body, &[], depth + 1, None)?;
                let columns = |a: &Option<TableAlias>| a.as_ref().map(|a| !a.columns.is_empty()).unwrap_or(false);
                let alias = if columns(alias) {
                    alias.clone()
                } else {
                    let name = alias.as_ref().map(|a| a.name.clone()).unwrap_or_else(|| Ident::new(rel.name.clone()));
                    Some(TableAlias {
                        explicit: true,
                        name,
                        columns: rel
                            .columns
                            .iter()
                            .map(|c| TableAliasColumnDef { name: Ident::with_quote('"', c.name.clone()), data_type: None })
                            .collect(),
                        at: None,
                    })
                };
                *f = TableFactor::Derived { lateral: false, subquery: Box::new(body), alias, sample: None };
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// `CREATE [OR REPLACE] VIEW name [(columns)] AS query`.
    pub(crate) async fn create_view(
        &mut self,
        name: &ObjectName,
        column_names: &[Ident],
        query: &Query,
        or_replace: bool,
        if_not_exists: bool,
        sql: &str,
    ) -> Result<()> {
        let (schema, name) = resolve_name(self, name)?;
        self.engine.catalog().require_schema(&schema)?;
        let mut expanded = query.clone();
        let dependencies = self.expand_views(&mut expanded)?;
        let (_, plan) = self.plan(&Statement::Query(Box::new(expanded)), false).await?;
        let fields = plan.schema().fields().clone();
        if column_names.len() > fields.len() {
            return Err(user_err!(sqlstate::SYNTAX_ERROR, "CREATE VIEW specifies more column names than columns"));
        }
        let mut columns: Vec<ColumnCatalog> = Vec::with_capacity(fields.len());
        for (i, f) in fields.iter().enumerate() {
            let col_name = column_names
                .get(i)
                .map(|c| crate::frontend::names::normalize_ident(&c.to_string()))
                .unwrap_or_else(|| crate::planner::names::output_name(f.name()).to_string());
            if columns.iter().any(|c| c.name == col_name) {
                return Err(user_err!(sqlstate::DUPLICATE_COLUMN, "column \"{col_name}\" specified more than once"));
            }
            let ty = ColumnType::from_arrow_field(f).ok_or_else(|| {
                user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "column \"{col_name}\" of a view cannot have type {}", f.data_type())
            })?;
            columns.push(ColumnCatalog { name: col_name, ty, not_null: false, default: None, hidden: false });
        }
        let existing = self.engine.catalog().table(&schema, &name).cloned();
        let id = match &existing {
            Some(old) if or_replace && old.kind == RelationKind::View => {
                // PostgreSQL keeps a replaced view's columns: new ones may only be added at the end.
                for (i, old_col) in old.columns.iter().enumerate() {
                    match columns.get(i) {
                        Some(c) if c.name != old_col.name => {
                            return Err(user_err!(
                                sqlstate::INVALID_TABLE_DEFINITION,
                                "cannot change name of view column \"{}\" to \"{}\"",
                                old_col.name,
                                c.name
                            ))
                        }
                        Some(c) if c.ty != old_col.ty => {
                            return Err(user_err!(
                                sqlstate::INVALID_TABLE_DEFINITION,
                                "cannot change data type of view column \"{}\" from {} to {}",
                                c.name,
                                old_col.ty.pg_name(),
                                c.ty.pg_name()
                            ))
                        }
                        Some(_) => {}
                        None => return Err(user_err!(sqlstate::INVALID_TABLE_DEFINITION, "cannot drop columns from view")),
                    }
                }
                old.id
            }
            Some(old) => {
                if if_not_exists {
                    self.notice(&format!("relation \"{name}\" already exists, skipping"));
                    return Ok(());
                }
                let what = if old.kind == RelationKind::View { "" } else { " (not a view)" };
                return Err(user_err!(sqlstate::DUPLICATE_TABLE, "relation \"{name}\" already exists{what}"));
            }
            None => self.engine.allocate_id(),
        };
        if dependencies.contains(&id) {
            return Err(user_err!(sqlstate::INVALID_OBJECT_DEFINITION, "infinite recursion detected in view \"{name}\""));
        }
        let view = TableCatalog {
            id,
            schema,
            name,
            kind: RelationKind::View,
            columns,
            pk: vec![],
            definition: sql.trim().trim_end_matches(';').to_string(),
            query: Some(Self::stored_query_text(query)?),
            dependencies,
            internal_tables: vec![],
            comments: Default::default(),
            on_conflict: Default::default(),
            append_only: false,
            watermark: None,
            emit_on_window_close: false,
            parallelism: 0,
            with_options: Default::default(),
            checks: vec![],
            derived: Default::default(),
        };
        let replacing = existing.is_some();
        let view = TableCatalog { comments: existing.map(|e| e.comments.clone()).unwrap_or_default(), ..view };
        self.engine
            .ddl(|cat| {
                match cat.table(&view.schema, &view.name) {
                    Some(t) if !(replacing && t.id == view.id) => {
                        return Err(user_err!(sqlstate::DUPLICATE_TABLE, "relation \"{}\" already exists", view.name))
                    }
                    None if replacing => return Err(user_err!(sqlstate::UNDEFINED_TABLE, "view \"{}\" was dropped concurrently", view.name)),
                    _ => {}
                }
                if view.dependencies.iter().any(|d| cat.by_id(*d).is_none()) {
                    return Err(user_err!(sqlstate::UNDEFINED_TABLE, "a relation the view reads was dropped"));
                }
                Ok((vec![CatalogChange::CreateTable(view.clone())], EpochBatch::default()))
            })
            .await
    }

    /// PostgreSQL's `INSERT INTO t VALUES (...)` (or `INSERT INTO t SELECT ...`) with fewer
    /// values than `t` has columns: the values go to the first columns and the rest get their
    /// defaults. The statement with that column list, when it applies.
    pub(crate) fn with_leading_insert_columns(&self, stmt: &Statement) -> Result<Option<Statement>> {
        use datafusion::sql::sqlparser::ast::{Ident, SetExpr, TableObject};
        let Statement::Insert(ins) = stmt else { return Ok(None) };
        let (TableObject::TableName(name), true) = (&ins.table, ins.columns.is_empty()) else { return Ok(None) };
        let Some(body) = ins.source.as_ref().map(|q| q.body.as_ref()) else { return Ok(None) };
        let Some(n) = output_width(body) else { return Ok(None) };
        // Each VALUES row's length (a query's rows are as wide as its select list).
        let rows: Vec<usize> = match body {
            SetExpr::Values(values) => values.rows.iter().map(|r| r.len()).collect(),
            _ => Vec::new(),
        };
        let (schema, rel_name) = resolve_name(self, name)?;
        let catalog = self.engine.catalog();
        let Some(rel) = catalog.table(&schema, &rel_name) else { return Ok(None) };
        let visible: Vec<&str> = rel.columns.iter().filter(|c| !c.hidden).map(|c| c.name.as_str()).collect();
        if n > visible.len() || rows.iter().any(|&len| len > visible.len()) {
            return Err(user_err!(sqlstate::SYNTAX_ERROR, "INSERT has more expressions than target columns"));
        }
        if n >= visible.len() || rows.iter().any(|&len| len != n) {
            return Ok(None);
        }
        let mut ins = ins.clone();
        ins.columns = visible[..n].iter().map(|c| ObjectName::from(vec![Ident::with_quote('"', *c)])).collect();
        Ok(Some(Statement::Insert(ins)))
    }

    /// Refuses UPDATE and DELETE on an `APPEND ONLY` table.
    pub(crate) fn refuse_changes_to_append_only(&self, stmt: &Statement) -> Result<()> {
        use datafusion::sql::sqlparser::ast::{FromTable, TableWithJoins};
        let target = |t: &TableWithJoins| match &t.relation {
            TableFactor::Table { name, .. } => Some(name.clone()),
            _ => None,
        };
        let name = match stmt {
            Statement::Update(u) => target(&u.table),
            Statement::Delete(d) => match &d.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t.first().and_then(target),
            },
            _ => None,
        };
        let Some(name) = name else { return Ok(()) };
        let Ok((schema, rel_name)) = resolve_name(self, &name) else { return Ok(()) };
        match self.engine.catalog().table(&schema, &rel_name) {
            Some(rel) if rel.append_only => Err(user_err!(
                sqlstate::FEATURE_NOT_SUPPORTED,
                "table \"{rel_name}\" is append-only: {} is not allowed",
                if matches!(stmt, Statement::Update(_)) { "UPDATE" } else { "DELETE" }
            )),
            _ => Ok(()),
        }
    }

    /// Refuses writes to anything but a table, naming what it is.
    pub(crate) fn require_table(&self, name: &ObjectName) -> Result<()> {
        let (schema, rel_name) = resolve_name(self, name)?;
        match self.engine.catalog().table(&schema, &rel_name) {
            Some(rel) if rel.kind == RelationKind::View => {
                Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "cannot change view \"{rel_name}\": views are not updatable"))
            }
            Some(rel) if rel.kind != RelationKind::Table => {
                Err(user_err!(sqlstate::WRONG_OBJECT_TYPE, "cannot change {} \"{rel_name}\"", rel.kind_name()))
            }
            _ => Ok(()),
        }
    }

    /// `COMMENT ON TABLE | VIEW | MATERIALIZED VIEW | COLUMN name IS 'text' | NULL`.
    pub(crate) async fn comment_on(
        &mut self,
        object_type: datafusion::sql::sqlparser::ast::CommentObject,
        name: &ObjectName,
        comment: Option<String>,
        if_exists: bool,
    ) -> Result<()> {
        use datafusion::sql::sqlparser::ast::CommentObject as C;
        let (rel_name, column) = match object_type {
            C::Column => {
                let mut parts = name.0.clone();
                let col = parts.pop().map(|p| crate::frontend::names::normalize_ident(&p.to_string()));
                if parts.is_empty() {
                    return Err(user_err!(sqlstate::SYNTAX_ERROR, "column name must be qualified"));
                }
                (ObjectName(parts), col)
            }
            C::Table | C::View | C::MaterializedView => (name.clone(), None),
            other => return Err(eddy_common::not_supported!("COMMENT ON {other} is not supported")),
        };
        let (schema, rel) = resolve_name(self, &rel_name)?;
        let Some(entry) = self.engine.catalog().table(&schema, &rel).cloned() else {
            if if_exists {
                return Ok(());
            }
            return Err(user_err!(sqlstate::UNDEFINED_TABLE, "relation \"{rel}\" does not exist"));
        };
        let expected = match object_type {
            C::Table => Some(RelationKind::Table),
            C::View => Some(RelationKind::View),
            C::MaterializedView => Some(RelationKind::MaterializedView),
            _ => None,
        };
        if expected.is_some_and(|k| k != entry.kind) {
            return Err(user_err!(sqlstate::WRONG_OBJECT_TYPE, "\"{rel}\" is not a {}", object_type.to_string().to_lowercase()));
        }
        let mut updated = entry.as_ref().clone();
        let comment = comment.filter(|c| !c.is_empty());
        match &column {
            Some(col) => {
                if !entry.columns.iter().any(|c| &c.name == col && !c.hidden) {
                    return Err(user_err!(sqlstate::UNDEFINED_COLUMN, "column \"{col}\" of relation \"{rel}\" does not exist"));
                }
                match comment {
                    Some(c) => updated.comments.columns.insert(col.clone(), c),
                    None => updated.comments.columns.remove(col),
                };
            }
            None => updated.comments.relation = comment,
        }
        let id = entry.id;
        self.engine
            .ddl(|cat| {
                if cat.by_id(id).is_none() {
                    return Err(user_err!(sqlstate::UNDEFINED_TABLE, "relation \"{rel}\" was dropped concurrently"));
                }
                Ok((vec![CatalogChange::CreateTable(updated)], EpochBatch::default()))
            })
            .await
    }

    /// `ALTER TABLE/VIEW name RENAME TO new` and `ALTER TABLE name RENAME [COLUMN] a TO b`, for
    /// relations nothing else reads (views store the names they read). Other ALTERs are not
    /// supported yet.
    pub(crate) async fn alter_relation(&mut self, at: &datafusion::sql::sqlparser::ast::AlterTable) -> Result<()> {
        use datafusion::sql::sqlparser::ast::{AlterTableOperation as Op, RenameTableNameKind};
        let (schema, rel) = resolve_name(self, &at.name)?;
        let Some(entry) = self.engine.catalog().table(&schema, &rel).cloned() else {
            if at.if_exists {
                self.notice(&format!("relation \"{rel}\" does not exist, skipping"));
                return Ok(());
            }
            return Err(user_err!(sqlstate::UNDEFINED_TABLE, "relation \"{rel}\" does not exist"));
        };
        let mut updated = entry.as_ref().clone();
        for op in &at.operations {
            match op {
                Op::RenameTable { table_name: RenameTableNameKind::To(n) | RenameTableNameKind::As(n) } => {
                    let new_name = crate::frontend::names::normalize_ident(&n.0.last().map(|p| p.to_string()).unwrap_or_default());
                    if self.engine.catalog().table(&schema, &new_name).is_some() {
                        return Err(user_err!(sqlstate::DUPLICATE_TABLE, "relation \"{new_name}\" already exists"));
                    }
                    updated.name = new_name;
                }
                Op::RenameColumn { old_column_name, new_column_name } => {
                    let old = crate::frontend::names::normalize_ident(&old_column_name.to_string());
                    let new = crate::frontend::names::normalize_ident(&new_column_name.to_string());
                    if updated.columns.iter().any(|c| c.name == new) {
                        return Err(user_err!(sqlstate::DUPLICATE_COLUMN, "column \"{new}\" of relation \"{rel}\" already exists"));
                    }
                    let c = updated.columns.iter_mut().find(|c| c.name == old && !c.hidden).ok_or_else(|| {
                        user_err!(sqlstate::UNDEFINED_COLUMN, "column \"{old}\" does not exist")
                    })?;
                    c.name = new.clone();
                    if let Some(w) = updated.watermark.as_mut().filter(|w| w.column == old) {
                        w.column = new.clone();
                    }
                    if let Some(comment) = updated.comments.columns.remove(&old) {
                        updated.comments.columns.insert(new, comment);
                    }
                }
                other => return Err(eddy_common::not_supported!("ALTER TABLE ... {other} is not supported yet")),
            }
        }
        let dependents = self.engine.catalog().dependents(entry.id);
        if !dependents.is_empty() {
            let names: Vec<String> = dependents.iter().map(|d| format!("{} {}", d.kind_name(), d.name)).collect();
            return Err(eddy_common::not_supported!(
                "cannot rename in {} \"{rel}\" while other objects read it: {}",
                entry.kind_name(),
                names.join(", ")
            ));
        }
        let id = entry.id;
        self.engine
            .ddl(|cat| {
                if cat.by_id(id).is_none() {
                    return Err(user_err!(sqlstate::UNDEFINED_TABLE, "relation \"{rel}\" was dropped concurrently"));
                }
                if updated.name != rel && cat.table(&schema, &updated.name).is_some() {
                    return Err(user_err!(sqlstate::DUPLICATE_TABLE, "relation \"{}\" already exists", updated.name));
                }
                Ok((vec![CatalogChange::CreateTable(updated)], EpochBatch::default()))
            })
            .await
    }

    /// Drops a plain view (no state, no actor).
    pub(crate) async fn drop_plain_view(&mut self, rel: Arc<TableCatalog>) -> Result<()> {
        let id = rel.id;
        self.engine
            .ddl(|cat| {
                let t = cat.by_id(id).cloned().ok_or_else(|| user_err!(sqlstate::UNDEFINED_TABLE, "view was dropped concurrently"))?;
                Ok((vec![CatalogChange::DropTable(t)], EpochBatch::default()))
            })
            .await
    }
}

/// How many columns a query body gives, when its text says so (no `*`).
fn output_width(body: &datafusion::sql::sqlparser::ast::SetExpr) -> Option<usize> {
    use datafusion::sql::sqlparser::ast::{SelectItem, SetExpr};
    match body {
        SetExpr::Select(s) => {
            let wildcard = s.projection.iter().any(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)));
            (!wildcard).then_some(s.projection.len())
        }
        SetExpr::SetOperation { left, .. } => output_width(left),
        SetExpr::Query(q) => output_width(&q.body),
        SetExpr::Values(v) => v.rows.first().map(|r| r.len()),
        _ => None,
    }
}
