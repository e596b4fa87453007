//! CREATE/DROP TABLE and SCHEMA: validate against the catalog, then commit the change durably.

use std::collections::HashSet;

use datafusion::common::DFSchema;
use datafusion::sql::sqlparser::ast::{ColumnOption, CreateTable, ObjectName, ObjectType, TableConstraint};
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, ColumnType, Result};
use eddy_storage::EpochBatch;

use crate::catalog::{CatalogChange, ConflictPolicy, ColumnCatalog, RelationKind, SchemaCatalog, TableCatalog, BUILTIN_SCHEMAS, ROW_ID_COLUMN};
use crate::frontend::names::{normalize_ident, resolve_name};
use crate::frontend::session::Session;
use crate::catalog::types::parse_type_name;

impl Session {
    /// `CREATE TABLE`.
    pub(crate) async fn create_table(&mut self, ct: &CreateTable, sql: &str) -> Result<()> {
        let (schema, name) = resolve_name(self, &ct.name)?;
        if let Some(q) = &ct.query {
            return self.create_table_as(ct, q, sql).await.map(|_| ());
        }
        let (columns, pk) = self.column_definitions(ct, &name)?;
        let on_conflict = match crate::frontend::split::take_table_conflict_clause(sql) {
            None => ConflictPolicy::Error,
            Some(_) if pk.is_empty() => {
                return Err(user_err!(sqlstate::INVALID_TABLE_DEFINITION, "ON CONFLICT needs a primary key: a table without one has no conflicts"))
            }
            Some((_, words)) => match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                ["OVERWRITE"] | ["DO", "UPDATE", "FULL"] => ConflictPolicy::Overwrite,
                ["IGNORE"] | ["DO", "NOTHING"] => ConflictPolicy::Ignore,
                _ => ConflictPolicy::UpdateIfNotNull,
            },
        };
        let definition = sql.trim().trim_end_matches(';').to_string();
        let append_only = crate::frontend::split::take_append_only(sql).is_some();
        let checks = crate::frontend::checks::definitions(ct, &name);
        let mut table = new_relation(schema, name, RelationKind::Table, columns, pk, definition);
        table.checks = checks;
        self.plan_checks(&table)?;
        table.on_conflict = on_conflict;
        table.append_only = append_only;
        if append_only && matches!(on_conflict, ConflictPolicy::Overwrite | ConflictPolicy::UpdateIfNotNull) {
            return Err(not_supported!("an APPEND ONLY table cannot update rows ON CONFLICT (table \"{}\"); use ON CONFLICT IGNORE", table.name));
        }
        table.watermark = watermark_definition(sql, &table.columns)?;
        if table.watermark.is_some() && !append_only {
            return Err(not_supported!(
                "a watermark on table \"{}\" needs an APPEND ONLY table: rows behind the watermark are dropped, which only inserts allow",
                table.name
            ));
        }
        if let Some(clauses) = crate::frontend::with_options::take_connector_clauses(sql)? {
            if clauses.options.iter().any(|(k, _)| k == "connector") {
                if append_only && !table.pk.is_empty() {
                    return Err(not_supported!(
                        "an APPEND ONLY table with a connector cannot have a primary key (table \"{}\"): its rows would be upserted",
                        table.name
                    ));
                }
                table.with_options = crate::frontend::with_options::connector_options(&clauses)?;
                crate::frontend::with_options::add_included_columns(&mut table.columns, &table.with_options)?;
                eddy_connector::validate(&eddy_connector::Options(table.with_options.clone()), &table.user_schema()).await?;
            }
        }
        self.commit_new_table(table, ct.if_not_exists).await?;
        Ok(())
    }

    /// The columns and primary key a `CREATE TABLE` (or `CREATE SOURCE`) declares for `name`.
    pub(crate) fn column_definitions(&self, ct: &CreateTable, name: &str) -> Result<(Vec<ColumnCatalog>, Vec<usize>)> {
        let mut columns = Vec::with_capacity(ct.columns.len());
        let mut pk_names: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        let ctx = crate::planner::udf::default_expression_context();
        for col in &ct.columns {
            let cname = normalize_ident(&col.name.to_string());
            if !seen.insert(cname.clone()) {
                return Err(user_err!(sqlstate::DUPLICATE_COLUMN, "column \"{cname}\" specified more than once"));
            }
            if cname == ROW_ID_COLUMN {
                return Err(user_err!(sqlstate::DUPLICATE_COLUMN, "column name \"{ROW_ID_COLUMN}\" is reserved"));
            }
            let serial = crate::catalog::sequence::serial_type(&col.data_type.to_string());
            if let datafusion::sql::sqlparser::ast::DataType::Custom(type_name, _) = &col.data_type {
                if let Ok((s, n)) = resolve_name(self, type_name) {
                    if self.engine.catalog().enum_type(&s, &n).is_some() {
                        return Err(not_supported!("column \"{cname}\": columns of enum types are not supported yet; use text"));
                    }
                }
            }
            let ty = match serial.clone() {
                Some(t) => t,
                None => parse_type_name(&col.data_type.to_string())?,
            };
            let mut not_null = serial.is_some();
            let mut default = serial.map(|_| crate::catalog::sequence::serial_default(name, &cname));
            for opt in &col.options {
                match &opt.option {
                    ColumnOption::NotNull => not_null = true,
                    ColumnOption::Null => {}
                    ColumnOption::Default(e) => {
                        let text = e.to_string();
                        let expr = ctx.parse_sql_expr(&text, &DFSchema::empty()).map_err(|err| {
                            user_err!(sqlstate::INVALID_COLUMN_DEFINITION, "invalid DEFAULT for column \"{cname}\": {err}")
                        })?;
                        if expr.column_refs().iter().next().is_some() {
                            return Err(user_err!(
                                "0A000",
                                "cannot use column reference in DEFAULT expression of column \"{cname}\""
                            ));
                        }
                        default = Some(text);
                    }
                    ColumnOption::PrimaryKey(_) => {
                        not_null = true;
                        pk_names.push(cname.clone());
                    }
                    ColumnOption::Generated { generation_expr: None, .. } => {
                        if !matches!(ty, ColumnType::Int2 | ColumnType::Int4 | ColumnType::Int8) {
                            return Err(user_err!(
                                sqlstate::INVALID_COLUMN_DEFINITION,
                                "identity column type must be smallint, integer, or bigint"
                            ));
                        }
                        not_null = true;
                        default = Some(crate::catalog::sequence::serial_default(name, &cname));
                    }
                    // RisingWave's processing-time column: when the row was written (the
                    // statement's time, as `DEFAULT now()`).
                    ColumnOption::Generated { generation_expr: Some(e), .. } => {
                        use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, FunctionArguments};
                        let no_args = |a: &FunctionArguments| match a {
                            FunctionArguments::None => true,
                            FunctionArguments::List(l) => l.args.is_empty(),
                            FunctionArguments::Subquery(_) => false,
                        };
                        let proctime = matches!(e, SqlExpr::Function(f) if f.name.to_string().eq_ignore_ascii_case("proctime") && no_args(&f.args));
                        if !proctime {
                            return Err(not_supported!("generated column \"{cname}\" AS {e}: only AS PROCTIME() is supported"));
                        }
                        if ty != ColumnType::Timestamptz {
                            return Err(user_err!(
                                sqlstate::INVALID_COLUMN_DEFINITION,
                                "column \"{cname}\" AS PROCTIME() must be of type timestamp with time zone"
                            ));
                        }
                        default = Some("now()".to_string());
                    }
                    ColumnOption::Unique(_) => {
                        return Err(not_supported!("UNIQUE constraints are not supported (column \"{cname}\"); use PRIMARY KEY"));
                    }
                    // Collected by `frontend::checks::definitions`.
                    ColumnOption::Check(_) => {}
                    other => return Err(not_supported!("column option {other} is not supported")),
                }
            }
            columns.push(ColumnCatalog { name: cname, ty, not_null, default, hidden: false });
        }
        for c in &ct.constraints {
            match c {
                TableConstraint::PrimaryKey(pk) => {
                    if !pk_names.is_empty() {
                        return Err(user_err!(
                            sqlstate::INVALID_TABLE_DEFINITION,
                            "multiple primary keys for table \"{name}\" are not allowed"
                        ));
                    }
                    for c in &pk.columns {
                        pk_names.push(normalize_ident(&c.column.expr.to_string()));
                    }
                }
                TableConstraint::Check(_) => {}
                other => return Err(not_supported!("table constraint {other} is not supported")),
            }
        }
        if columns.is_empty() {
            return Err(not_supported!("tables need at least one column"));
        }
        let mut pk = Vec::new();
        for n in &pk_names {
            let idx = columns.iter().position(|c| &c.name == n).ok_or_else(|| {
                user_err!(sqlstate::UNDEFINED_COLUMN, "column \"{n}\" named in key does not exist")
            })?;
            columns[idx].not_null = true;
            pk.push(idx);
        }
        Ok((columns, pk))
    }

    /// Commits a new relation's catalog entry (with a fresh id) and, for a table, starts its
    /// source actor; `None` when it already existed and `if_not_exists` said to skip.
    pub(crate) async fn commit_new_table(&mut self, template: TableCatalog, if_not_exists: bool) -> Result<Option<std::sync::Arc<TableCatalog>>> {
        let (schema_name, table_name) = (template.schema.clone(), template.name.clone());
        let mut created = true;
        self.engine
            .ddl(|cat| {
                cat.require_schema(&template.schema)?;
                if cat.table(&template.schema, &template.name).is_some() {
                    if if_not_exists {
                        created = false;
                        return Ok((vec![], EpochBatch::default()));
                    }
                    return Err(user_err!(sqlstate::DUPLICATE_TABLE, "relation \"{}\" already exists", template.name));
                }
                let table = TableCatalog { id: cat.allocate_id(), ..template.clone() };
                Ok((vec![CatalogChange::CreateTable(table)], EpochBatch::default()))
            })
            .await?;
        if !created {
            self.notice("relation already exists, skipping");
            return Ok(None);
        }
        let table = self
            .engine
            .catalog()
            .table(&schema_name, &table_name)
            .cloned()
            .ok_or_else(|| eddy_common::internal_err!("created table vanished"))?;
        if table.kind == RelationKind::Table {
            self.engine.start_table_actor(&table, vec![]).await?;
        }
        Ok(Some(table))
    }

    /// `CREATE TABLE name AS query`: a table (without primary key) holding the query's rows.
    pub(crate) async fn create_table_as(
        &mut self,
        ct: &CreateTable,
        query: &datafusion::sql::sqlparser::ast::Query,
        sql: &str,
    ) -> Result<usize> {
        let (schema, name) = resolve_name(self, &ct.name)?;
        let stmt = datafusion::sql::sqlparser::ast::Statement::Query(Box::new(query.clone()));
        let (state, plan) = self.plan(&stmt, false).await?;
        let batches = datafusion::physical_plan::collect(state.create_physical_plan(&plan).await?, state.task_ctx()).await?;
        let mut columns = Vec::new();
        for f in plan.schema().fields() {
            let ty = eddy_common::ColumnType::from_arrow_field(f)
                .ok_or_else(|| not_supported!("column \"{}\" has type {} which a table cannot store yet", f.name(), f.data_type()))?;
            columns.push(ColumnCatalog {
                name: crate::planner::names::output_name(f.name()).to_string(),
                ty,
                not_null: false,
                default: None,
                hidden: false,
            });
        }
        let definition = sql.trim().trim_end_matches(';').to_string();
        crate::frontend::session::unique_column_names(columns.iter().map(|c| c.name.as_str()))?;
        let Some(table) = self.commit_new_table(new_relation(schema, name, RelationKind::Table, columns, vec![], definition), ct.if_not_exists).await? else {
            return Ok(0);
        };
        let target = table.planning_schema(false);
        let mut n = 0;
        for b in crate::frontend::rows::rebind(&target, batches.into_iter().filter(|b| b.num_rows() > 0).collect())? {
            let rows = self.prepare_insert(&table, b)?;
            n += rows.num_rows();
            let write = eddy_stream::TableWrite { chunk: eddy_common::StreamChunk::inserts(rows), on_conflict: Default::default(), returning: false };
            self.write(&table, write).await?;
        }
        Ok(n)
    }

    /// `DROP TABLE | MATERIALIZED VIEW | VIEW | SOURCE names`: the command tag.
    pub(crate) async fn drop_relations(&mut self, want: RelationKind, names: &[ObjectName], if_exists: bool, cascade: bool) -> Result<&'static str> {
        let kind = relation_kind_name(want);
        for n in names {
            let (schema, name) = resolve_name(self, n)?;
            let existing = self.engine.catalog().table(&schema, &name).cloned();
            let Some(rel) = existing else {
                if let Some(id) = self.engine.creating.named(&schema, &name).filter(|_| want == RelationKind::MaterializedView) {
                    // Being created in the background: the DROP cancels it.
                    self.engine.cancel_creating(id).await?;
                    continue;
                }
                if if_exists {
                    self.notice(&format!("{kind} \"{name}\" does not exist, skipping"));
                    continue;
                }
                return Err(user_err!(sqlstate::UNDEFINED_TABLE, "{kind} \"{name}\" does not exist"));
            };
            if rel.kind != want {
                let hint = drop_tag(rel.kind);
                return Err(user_err!(sqlstate::WRONG_OBJECT_TYPE, "\"{name}\" is not a {kind}; use {hint}"));
            }
            self.drop_relation(rel, cascade).await?;
        }
        Ok(drop_tag(want))
    }

    /// `DROP TABLE` / `DROP SCHEMA`.
    pub(crate) async fn drop_objects(&mut self, object_type: ObjectType, names: &[ObjectName], if_exists: bool, cascade: bool) -> Result<&'static str> {
        match object_type {
            ObjectType::Table => self.drop_relations(RelationKind::Table, names, if_exists, cascade).await,
            ObjectType::MaterializedView => self.drop_relations(RelationKind::MaterializedView, names, if_exists, cascade).await,
            ObjectType::View => self.drop_relations(RelationKind::View, names, if_exists, cascade).await,
            ObjectType::Type => {
                self.drop_enums(names, if_exists).await?;
                Ok("DROP TYPE")
            }
            ObjectType::Index => {
                self.drop_indexes(names, if_exists).await?;
                Ok("DROP INDEX")
            }
            ObjectType::Role | ObjectType::User => self.drop_roles(names, if_exists).await,
            ObjectType::Schema => {
                for n in names {
                    let name = normalize_ident(&n.to_string());
                    if BUILTIN_SCHEMAS.contains(&name.as_str()) && name != "public" {
                        return Err(user_err!(sqlstate::INSUFFICIENT_PRIVILEGE, "cannot drop schema {name} because it is required by the database system"));
                    }
                    let tables = self.engine.catalog().tables_in(&name);
                    if !tables.is_empty() && !cascade {
                        let names: Vec<String> = tables
                            .iter()
                            .map(|t| format!("{} {}.{}", t.kind_name(), t.schema, t.name))
                            .collect();
                        return Err(user_err!(
                            sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                            "cannot drop schema {name} because other objects depend on it: {}; use DROP ... CASCADE",
                            names.join(", ")
                        ));
                    }
                    // Views first (newest first), so nothing is dropped while something reads it.
                    let mut rels = tables.clone();
                    rels.sort_by_key(|t| std::cmp::Reverse(t.id));
                    for t in rels {
                        if self.engine.catalog().by_id(t.id).is_some() {
                            self.drop_relation(t, true).await?;
                        }
                    }
                    let batch = EpochBatch::default();
                    let mut missing = false;
                    self.engine
                        .ddl(|cat| {
                            let Some(s) = cat.schema(&name).cloned() else {
                                if if_exists {
                                    missing = true;
                                    return Ok((vec![], EpochBatch::default()));
                                }
                                return Err(user_err!(sqlstate::INVALID_SCHEMA_NAME, "schema \"{name}\" does not exist"));
                            };
                            let mut changes: Vec<CatalogChange> = cat.tables_in(&name).into_iter().map(CatalogChange::DropTable).collect();
                            changes.extend(cat.enum_types().filter(|t| t.schema == name).cloned().map(CatalogChange::DropType));
                            changes.push(CatalogChange::DropSchema(s));
                            Ok((changes, batch))
                        })
                        .await?;
                    if missing {
                        self.notice(&format!("schema \"{name}\" does not exist, skipping"));
                    }
                }
                Ok("DROP SCHEMA")
            }
            other => Err(not_supported!("DROP {other} is not supported")),
        }
    }

    /// `CREATE SCHEMA`.
    pub(crate) async fn create_schema(&mut self, name: &str, if_not_exists: bool) -> Result<()> {
        let name = normalize_ident(name);
        let mut exists = false;
        self.engine
            .ddl(|cat| {
                if cat.schema(&name).is_some() {
                    if if_not_exists {
                        exists = true;
                        return Ok((vec![], EpochBatch::default()));
                    }
                    return Err(user_err!(sqlstate::DUPLICATE_SCHEMA, "schema \"{name}\" already exists"));
                }
                let id = cat.allocate_id();
                Ok((vec![CatalogChange::CreateSchema(SchemaCatalog { id, name: name.clone() })], EpochBatch::default()))
            })
            .await?;
        if exists {
            self.notice(&format!("schema \"{name}\" already exists, skipping"));
        }
        Ok(())
    }
}

/// A catalog entry for a new relation (its id is assigned when it commits).
pub(crate) fn new_relation(schema: String, name: String, kind: RelationKind, columns: Vec<ColumnCatalog>, pk: Vec<usize>, definition: String) -> TableCatalog {
    TableCatalog {
        id: 0,
        schema,
        name,
        kind,
        columns,
        pk,
        definition,
        query: None,
        dependencies: vec![],
        internal_tables: vec![],
        comments: Default::default(),
        on_conflict: ConflictPolicy::Error,
        append_only: false,
            watermark: None,
            emit_on_window_close: false,
            parallelism: 0,
        with_options: Default::default(),
        checks: vec![],
        derived: Default::default(),
    }
}

/// How messages name a relation kind.
fn relation_kind_name(kind: RelationKind) -> &'static str {
    match kind {
        RelationKind::MaterializedView => "materialized view",
        RelationKind::View => "view",
        RelationKind::Table => "table",
        RelationKind::Source => "source",
        RelationKind::Sink => "sink",
    }
}

/// The statement that drops a relation of `kind` (also its command tag).
fn drop_tag(kind: RelationKind) -> &'static str {
    match kind {
        RelationKind::MaterializedView => "DROP MATERIALIZED VIEW",
        RelationKind::View => "DROP VIEW",
        RelationKind::Table => "DROP TABLE",
        RelationKind::Source => "DROP SOURCE",
        RelationKind::Sink => "DROP SINK",
    }
}

/// The `WATERMARK FOR column AS expr` clause of a `CREATE TABLE` or `CREATE SOURCE` text, checked
/// against `columns`: `expr` is the column itself or the column minus a constant interval.
pub(crate) fn watermark_definition(sql: &str, columns: &[ColumnCatalog]) -> Result<Option<crate::catalog::WatermarkDef>> {
    use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr};
    let Some((_, column, expr)) = crate::frontend::split::take_watermark(sql) else { return Ok(None) };
    let col = columns
        .iter()
        .find(|c| c.name == column)
        .ok_or_else(|| user_err!(sqlstate::UNDEFINED_COLUMN, "column \"{column}\" named in WATERMARK FOR does not exist"))?;
    if !matches!(col.ty, ColumnType::Timestamp | ColumnType::Timestamptz) {
        return Err(user_err!(
            sqlstate::DATATYPE_MISMATCH,
            "the watermark column \"{column}\" has type {}; it must be a timestamp or timestamptz",
            col.ty.pg_name()
        ));
    }
    let parsed = datafusion::sql::sqlparser::parser::Parser::new(&datafusion::sql::sqlparser::dialect::PostgreSqlDialect {})
        .try_with_sql(&expr)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| user_err!(sqlstate::SYNTAX_ERROR, "WATERMARK FOR {column} AS {expr}: {e}"))?;
    let is_column = |e: &Expr| matches!(e, Expr::Identifier(i) if crate::frontend::statement::ident_name(i) == column);
    let shape = || not_supported!("WATERMARK FOR {column} AS {expr}: the watermark must be {column} or {column} - INTERVAL '...'");
    let delay_us = match &parsed {
        e if is_column(e) => 0,
        Expr::BinaryOp { left, op: BinaryOperator::Minus, right } if is_column(left) => {
            crate::pg::rewrite::interval_micros(right).map_err(|_| shape())?
        }
        _ => return Err(shape()),
    };
    if delay_us < 0 {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "WATERMARK FOR {column}: the delay must not be negative"));
    }
    Ok(Some(crate::catalog::WatermarkDef { column, delay_us }))
}
