//! Statement dispatch: [`Session::describe`] (extended protocol Describe) and
//! [`Session::execute`], which hands each statement to its family's module.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ParamValues;
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::scalar::ScalarValue;
use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, Statement, Value,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, EddyError, Result};

use crate::catalog::DATABASE_NAME;
use crate::frontend::output::{command, text_rows, text_schema, Described, Output};
use crate::frontend::names::resolve_relation;
use crate::frontend::session::{client_schema, Session};
use crate::frontend::settings::show_column_name;
use crate::frontend::statement::EddyStatement;
use crate::planner::settings::{canonical_var, default_vars};


/// Most parameters a statement may have (the wire protocol counts them in 16 bits).
pub const MAX_PARAMETERS: usize = 65_535;

impl Session {
    /// Parameter and result types of a statement (extended protocol Describe).
    pub async fn describe(&mut self, stmt: &EddyStatement) -> Result<Described> {
        let stmt = match stmt {
            EddyStatement::Sql(stmt, _) => stmt,
            EddyStatement::Verify(_) => return Ok(Described { params: vec![], declared: vec![], schema: Some(text_schema(&["verify"])) }),
            EddyStatement::ShowViews => return Ok(Described { params: vec![], declared: vec![], schema: Some(text_schema(&["Name"])) }),
            EddyStatement::ExplainAnalyzeView(_) => return Ok(Described { params: vec![], declared: vec![], schema: Some(text_schema(&["QUERY PLAN"])) }),
            EddyStatement::ShowCreateView(_) => {
                return Ok(Described { params: vec![], declared: vec![], schema: Some(text_schema(&["Name", "Create Sql"])) })
            }
            EddyStatement::ShowSources => return Ok(Described { params: vec![], declared: vec![], schema: Some(text_schema(&["Name"])) }),
            // A cursor's parameters are its query's; DECLARE itself returns no rows.
            EddyStatement::Declare(d) => {
                let crate::frontend::cursor::CursorQuery::Sql(stmt, text) = &d.query else {
                    return Ok(Described { params: vec![], declared: vec![], schema: None });
                };
                let inner = Box::pin(self.describe(&EddyStatement::Sql(stmt.clone(), text.clone()))).await?;
                return Ok(Described { schema: None, ..inner });
            }
            EddyStatement::ShowSinks => return Ok(Described { params: vec![], declared: vec![], schema: Some(crate::frontend::sink::show_sinks_schema()) }),
            EddyStatement::Flush
            | EddyStatement::Wait
            | EddyStatement::CreateSource(..)
            | EddyStatement::DropSource(_)
            | EddyStatement::CreateSink(_)
            | EddyStatement::DropSink(_)
            | EddyStatement::Close(_) => {
                return Ok(Described { params: vec![], declared: vec![], schema: None })
            }
            EddyStatement::CopySubscribe(..) => return Ok(Described { params: vec![], declared: vec![], schema: None }),
            EddyStatement::Subscribe(s) => return Ok(Described { params: vec![], declared: vec![], schema: Some(self.subscribe_schema(s)?) }),
            EddyStatement::Fetch(f) => return Ok(Described { params: vec![], declared: vec![], schema: Some(self.cursor_schema(&f.name)?) }),
        };
        match stmt.as_ref() {
            Statement::Query(_) | Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Explain { .. } => {
                let dml = matches!(stmt.as_ref(), Statement::Update(_) | Statement::Delete(_));
                let conflict = crate::frontend::on_conflict::take_on_conflict(stmt)?;
                let stmt = conflict.as_ref().map(|(s, _)| s).unwrap_or(stmt);
                let returning = crate::frontend::returning::take_returning(stmt);
                let stmt = returning.as_ref().map(|(s, _)| s).unwrap_or(stmt);
                let (state, plan) = self.plan(stmt, dml).await?;
                let types = plan.get_parameter_types()?;
                let mut params = vec![None; types.len()];
                for (id, ty) in types {
                    if let Some(i) = id.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                        if i > MAX_PARAMETERS {
                            // The protocol counts parameters in 16 bits; never size by `$N`.
                            return Err(user_err!(
                                sqlstate::UNDEFINED_PARAMETER,
                                "there is no parameter ${i}: a statement has at most {MAX_PARAMETERS} parameters"
                            ));
                        }
                        if i >= 1 {
                            if i > params.len() {
                                params.resize(i, None);
                            }
                            params[i - 1] = ty;
                        }
                    }
                }
                let schema = match (plan, &returning) {
                    (LogicalPlan::Dml(_), Some((s, items))) => Some(self.returning_schema(s, items).await?),
                    (LogicalPlan::Dml(_), None) => None,
                    // The columns' types after type coercion, as execution produces them
                    // (`SELECT 1 UNION SELECT 1.5` is numeric, not the left side's integer).
                    (p, _) => {
                        // A plan the analyzer rejects fails at execution with its error; here
                        // its unanalyzed schema is the best description.
                        let analyzed = state.analyzer().execute_and_check(p.clone(), state.config_options(), |_, _| {}).ok();
                        Some(client_schema(analyzed.as_ref().unwrap_or(&p).schema().as_arrow()))
                    }
                };
                let declared = declared_param_types(stmt, params.len());
                Ok(Described { params, declared, schema })
            }
            Statement::ShowVariable { variable } => {
                let name = show_column_name(variable);
                Ok(Described { params: vec![], declared: vec![], schema: Some(Arc::new(Schema::new(vec![Field::new(name, DataType::Utf8, true)]))) })
            }
            _ => Ok(Described { params: vec![], declared: vec![], schema: None }),
        }
    }

    /// Runs a query statement (a cursor's, a COPY's): its columns and rows.
    pub(crate) async fn query_rows(&mut self, stmt: Statement, sql: String, params: Vec<ScalarValue>) -> Result<(SchemaRef, datafusion::execution::SendableRecordBatchStream)> {
        match Box::pin(self.execute(&EddyStatement::Sql(Box::new(stmt), sql), params)).await? {
            Output::Rows { schema, stream } => Ok((schema, stream)),
            _ => Err(user_err!(sqlstate::SYNTAX_ERROR, "expected a query that returns rows")),
        }
    }

    /// Executes one statement with positional parameter values.
    pub async fn execute(&mut self, stmt: &EddyStatement, params: Vec<ScalarValue>) -> Result<Output> {
        let (stmt, sql) = match stmt {
            EddyStatement::Flush => {
                self.engine.barrier.flush().await?;
                return Ok(command("FLUSH"));
            }
            EddyStatement::Wait => {
                self.engine.creating.wait_all().await;
                return Ok(command("WAIT"));
            }
            EddyStatement::Verify(name) => {
                let lines = self.verify_mview(name).await?;
                return text_rows(&["verify"], lines.into_iter().map(|l| vec![l]).collect());
            }
            EddyStatement::ExplainAnalyzeView(name) => {
                let lines = self.explain_analyze_view(name)?;
                return text_rows(&["QUERY PLAN"], lines.into_iter().map(|l| vec![l]).collect());
            }
            EddyStatement::ShowViews => {
                let schema = self.default_schema();
                let rows = self.engine.catalog().tables_in(&schema).into_iter().filter(|t| t.is_view()).map(|t| vec![t.name.clone()]).collect();
                return text_rows(&["Name"], rows);
            }
            EddyStatement::ShowCreateView(name) => {
                let v = self.lookup_view(name)?;
                return text_rows(&["Name", "Create Sql"], vec![vec![format!("{}.{}", v.schema, v.name), v.definition.clone()]]);
            }
            EddyStatement::ShowSources => {
                let schema = self.default_schema();
                let rows = self
                    .engine
                    .catalog()
                    .tables_in(&schema)
                    .into_iter()
                    .filter(|t| t.kind == crate::catalog::RelationKind::Source)
                    .map(|t| vec![t.name.clone()])
                    .collect();
                return text_rows(&["Name"], rows);
            }
            EddyStatement::CreateSource(stmt, clauses, sql) => {
                let Statement::CreateTable(ct) = stmt.as_ref() else {
                    return Err(eddy_common::internal_err!("CREATE SOURCE parsed into something else"));
                };
                self.create_source(ct, clauses, sql).await?;
                return Ok(command("CREATE SOURCE"));
            }
            EddyStatement::ShowSinks => return self.show_sinks(),
            EddyStatement::CreateSink(spec) => {
                self.create_sink(spec).await?;
                return Ok(command("CREATE SINK"));
            }
            EddyStatement::DropSink(stmt) => {
                let Statement::Drop { names, if_exists, cascade, .. } = stmt.as_ref() else {
                    return Err(eddy_common::internal_err!("DROP SINK parsed into something else"));
                };
                let tag = self.drop_relations(crate::catalog::RelationKind::Sink, names, *if_exists, *cascade).await?;
                return Ok(command(tag));
            }
            EddyStatement::DropSource(stmt) => {
                let Statement::Drop { names, if_exists, cascade, .. } = stmt.as_ref() else {
                    return Err(eddy_common::internal_err!("DROP SOURCE parsed into something else"));
                };
                let tag = self.drop_relations(crate::catalog::RelationKind::Source, names, *if_exists, *cascade).await?;
                return Ok(command(tag));
            }
            EddyStatement::Subscribe(spec) => {
                let (schema, stream) = self.subscribe(spec).await?;
                return Ok(Output::Rows { schema, stream });
            }
            EddyStatement::Declare(spec) => return self.declare(spec, params).await,
            EddyStatement::CopySubscribe(spec, copy) => {
                let Statement::Copy { source, to, target, options, legacy_options, .. } = copy.as_ref() else {
                    return Err(eddy_common::internal_err!("COPY (SUBSCRIBE) parsed into something else"));
                };
                // Checked before subscribing (which changes the graph).
                if !*to {
                    return Err(user_err!(sqlstate::SYNTAX_ERROR, "COPY (SUBSCRIBE ...) only goes TO STDOUT"));
                }
                crate::frontend::copy::check_copy_out(target, options, legacy_options)?;
                let rows = self.subscribe(spec).await?;
                return self.copy_to(source, target, options, legacy_options, Some(rows)).await;
            }
            EddyStatement::Fetch(spec) => return self.fetch(spec).await,
            EddyStatement::Close(name) => return self.close_cursor(name.as_deref()),
            EddyStatement::Sql(s, sql) => (s.as_ref(), sql.as_str()),
        };
        if let (Statement::Query(_), false) = (stmt, params.is_empty()) {
            if let Some(plan) = self.point_plans.get(sql) {
                if plan.holds(&self.engine.catalog(), &self.default_schema(), self.block.is_some()) && plan.accepts(&params) {
                    return plan.run(self.engine.as_ref(), &self.engine.store.snapshot(), &params).await;
                }
                self.point_plans.remove(sql);
            }
        }
        match stmt {
            Statement::Explain { statement, .. } if matches!(statement.as_ref(), Statement::CreateView(cv) if cv.materialized) => {
                let Statement::CreateView(cv) = statement.as_ref() else { unreachable!("matched above") };
                let pieces = crate::frontend::split::split_statements(sql);
                let eowc = pieces.first().is_some_and(|p| crate::frontend::split::take_emit_on_window_close(p.rest_after(1)).is_some());
                let lines = self.explain_mview(&cv.query, eowc).await?;
                text_rows(&["QUERY PLAN"], lines.into_iter().map(|l| vec![l]).collect())
            }
            Statement::CreateView(cv) => {
                if !cv.materialized {
                    self.create_view(&cv.name, &cv.columns.iter().map(|c| c.name.clone()).collect::<Vec<_>>(), &cv.query, cv.or_replace, cv.if_not_exists, sql).await?;
                    return Ok(command("CREATE VIEW"));
                }
                if cv.or_replace {
                    return Err(not_supported!("CREATE OR REPLACE is not supported for materialized views"));
                }
                let columns: Vec<_> = cv.columns.iter().map(|c| c.name.clone()).collect();
                self.create_mview(&cv.name, &columns, &cv.query, cv.if_not_exists, sql, None).await?;
                Ok(command("CREATE_MATERIALIZED_VIEW"))
            }
            Statement::Query(_) if !params.is_empty() && self.point_plans.get(sql).is_some() => {
                let plan = self.point_plans.get(sql).ok_or_else(|| eddy_common::internal_err!("point plan vanished"))?;
                if plan.holds(&self.engine.catalog(), &self.default_schema(), self.block.is_some()) && plan.accepts(&params) {
                    return plan.run(self.engine.as_ref(), &self.engine.store.snapshot(), &params).await;
                }
                self.point_plans.remove(sql);
                Box::pin(self.execute(&EddyStatement::Sql(Box::new(stmt.clone()), sql.to_string()), params)).await
            }
            Statement::Query(_) | Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Explain { .. } => {
                if let Statement::Insert(ins) = stmt {
                    if let datafusion::sql::sqlparser::ast::TableObject::TableName(name) = &ins.table {
                        self.require_table(name)?;
                    }
                }
                let dml = matches!(stmt, Statement::Update(_) | Statement::Delete(_));
                self.refuse_changes_to_append_only(stmt)?;
                let filled = self.with_leading_insert_columns(stmt)?;
                let stmt = filled.as_ref().unwrap_or(stmt);
                let conflict = crate::frontend::on_conflict::take_on_conflict(stmt)?;
                let stmt = conflict.as_ref().map(|(s, _)| s).unwrap_or(stmt);
                let conflict = conflict.as_ref().map(|(_, c)| c);
                let returning = crate::frontend::returning::take_returning(stmt);
                let stmt = returning.as_ref().map(|(s, _)| s).unwrap_or(stmt);
                let (state, plan) = self.plan(stmt, dml).await?;
                if !params.is_empty() && matches!(stmt, Statement::Query(_)) {
                    let out = client_schema(plan.schema().as_arrow());
                    if let Some(p) = crate::frontend::point_query::point_plan(&plan, out, &self.engine.catalog(), &self.default_schema()) {
                        self.point_plans.insert(sql, p);
                    }
                }
                let plan = if params.is_empty() {
                    plan
                } else {
                    let plan_types = plan.get_parameter_types()?;
                    let values = params
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| match plan_types.get(&format!("${}", i + 1)) {
                            Some(Some(t)) if &v.data_type() != t => v.cast_to(t).map_err(EddyError::from),
                            _ => Ok(v),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    plan.with_param_values(ParamValues::List(values.into_iter().map(Into::into).collect()))?
                };
                match plan {
                    LogicalPlan::Dml(dml_stmt) => {
                        let tag = match stmt {
                            Statement::Insert(_) => "INSERT",
                            Statement::Update(_) => "UPDATE",
                            _ => "DELETE",
                        };
                        let alias = crate::frontend::returning::target_alias(stmt);
                let (n, rows) = self.execute_dml(&state, dml_stmt, returning.is_some(), conflict).await?;
                        match (returning, rows) {
                            (Some((_, items)), Some((table, rows))) => {
                                let (schema, batches) = self.returning_rows(&table, rows, &items, alias.as_deref()).await?;
                                // The wire layer appends the row count (one returned row per affected row).
                                let tag = if tag == "INSERT" { "INSERT 0".to_string() } else { tag.to_string() };
                                let stream = Box::pin(RecordBatchStreamAdapter::new(
                                    schema.clone(),
                                    futures::stream::iter(batches.into_iter().map(Ok)),
                                ));
                                Ok(Output::Returned { tag, schema, stream })
                            }
                            _ => Ok(Output::Command { tag: tag.into(), rows: Some(n) }),
                        }
                    }
                    LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) | LogicalPlan::Copy(_) => {
                        Err(not_supported!("statement is not supported: {sql}"))
                    }
                    plan => {
                        let df = DataFrame::new(state, plan);
                        let logical = df.schema().as_arrow().clone();
                        let stream = crate::frontend::session::off_worker(df.execute_stream()).await?;
                        // Type coercion may widen a column after the plan's schema was made
                        // (`SELECT 1 UNION SELECT 1.5` is numeric): describe the rows as sent.
                        let physical = stream.schema();
                        let fields = logical.fields().iter().zip(physical.fields().iter());
                        let fields: Vec<_> = fields.map(|(l, p)| if l.data_type() == p.data_type() { l.clone() } else { Arc::new(l.as_ref().clone().with_data_type(p.data_type().clone())) }).collect();
                        let schema: SchemaRef = client_schema(&Schema::new_with_metadata(fields, logical.metadata().clone()));
                        Ok(Output::Rows { schema, stream })
                    }
                }
            }
            Statement::CreateTable(ct) => {
                self.create_table(ct, sql).await?;
                Ok(command("CREATE TABLE"))
            }
            Statement::CreateSchema { schema_name, if_not_exists, .. } => {
                self.create_schema(&schema_name.to_string(), *if_not_exists).await?;
                Ok(command("CREATE SCHEMA"))
            }
            Statement::Drop { object_type, if_exists, names, cascade, .. } => {
                let tag = self.drop_objects(*object_type, names, *if_exists, *cascade).await?;
                Ok(command(tag))
            }
            Statement::Set(set) => self.set(set),
            Statement::ShowVariable { variable } => self.show(variable),
            Statement::ShowTables { .. } => {
                let schema = self.default_schema();
                let rows = self.engine.catalog().tables_in(&schema).into_iter().filter(|t| t.kind == crate::catalog::RelationKind::Table).map(|t| vec![t.name.clone()]).collect();
                text_rows(&["Name"], rows)
            }
            Statement::Reset(r) => {
                let text = format!("{r}").to_ascii_lowercase();
                let name = text.trim_start_matches("reset").trim();
                let defaults = default_vars(&self.user);
                if name == "all" {
                    *self.vars.write() = defaults;
                } else {
                    let key = canonical_var(name);
                    if let Some(v) = defaults.get(&key) {
                        self.set_var(&key, v.clone());
                    } else {
                        self.vars.write().remove(&key);
                    }
                }
                Ok(command("RESET"))
            }
            Statement::StartTransaction { .. } => Ok(self.begin()),
            Statement::Commit { .. } => self.commit().await,
            Statement::Rollback { savepoint: Some(name), .. } => self.rollback_to_savepoint(name),
            Statement::Rollback { .. } => Ok(self.rollback()),
            Statement::CreateIndex(ci) => {
                self.create_index(ci).await?;
                Ok(command("CREATE INDEX"))
            }
            Statement::CreateType { name, representation } => match representation {
                Some(datafusion::sql::sqlparser::ast::UserDefinedTypeRepresentation::Enum { labels }) => {
                    self.create_enum(name, labels).await?;
                    Ok(command("CREATE TYPE"))
                }
                _ => Err(not_supported!("only enum types can be created (CREATE TYPE name AS ENUM (...))")),
            },
            Statement::AlterTable(at) => {
                self.alter_relation(at).await?;
                Ok(command(if at.table_type.is_some() { "ALTER" } else { "ALTER TABLE" }))
            }
            Statement::ShowDatabases { .. } => text_rows(&["Name"], vec![vec![DATABASE_NAME.to_string()]]),
            Statement::ShowSchemas { .. } => {
                let mut names: Vec<String> = self.engine.catalog().schemas().map(|s| s.name.clone()).collect();
                names.sort();
                text_rows(&["Name"], names.into_iter().map(|n| vec![n]).collect())
            }
            Statement::ExplainTable { table_name, .. } => self.describe_relation(table_name),
            Statement::ShowColumns { show_options, .. } => {
                let name = show_options
                    .show_in
                    .as_ref()
                    .and_then(|i| i.parent_name.clone())
                    .ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "SHOW COLUMNS needs FROM <relation>"))?;
                self.describe_relation(&name)
            }
            Statement::Comment { object_type, object_name, comment, if_exists } => {
                self.comment_on(*object_type, object_name, comment.clone(), *if_exists).await?;
                Ok(command("COMMENT"))
            }
            Statement::Truncate(t) => {
                // Every row goes through the table's source actor as a delete, so views see it.
                for target in &t.table_names {
                    self.require_table(&target.name)?;
                    let sql = format!("DELETE FROM {}", target.name);
                    let stmt = Parser::parse_sql(&PostgreSqlDialect {}, &sql).map_err(|e| user_err!(sqlstate::SYNTAX_ERROR, "{e}"))?.remove(0);
                    Box::pin(self.execute(&EddyStatement::Sql(Box::new(stmt), sql), vec![])).await?;
                }
                Ok(command("TRUNCATE TABLE"))
            }
            Statement::Savepoint { name } => self.savepoint(name),
            Statement::ReleaseSavepoint { name } => self.release_savepoint(name),
            Statement::Discard { .. } => {
                *self.vars.write() = default_vars(&self.user);
                // DISCARD ALL includes CLOSE ALL (a pooler's reset must not hand a cursor on).
                self.cursors.clear();
                Ok(command("DISCARD ALL"))
            }
            Statement::Deallocate { name, .. } => {
                let all = name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all");
                Ok(command(if all { "DEALLOCATE ALL" } else { "DEALLOCATE" }))
            }
            Statement::CreateRole(cr) => {
                // `CREATE USER` is parsed as `CREATE ROLE` (see `Session::parse`); users log in.
                let user = sql.split_whitespace().nth(1).is_some_and(|w| w.eq_ignore_ascii_case("USER"));
                Ok(command(self.create_roles(cr, user).await?))
            }
            Statement::AlterRole { name, operation } => Ok(command(self.alter_role(name, operation).await?)),
            Statement::LISTEN { .. } => Ok(command("LISTEN")),
            Statement::UNLISTEN { .. } => Ok(command("UNLISTEN")),
            Statement::Copy { source, to: true, target, options, legacy_options, .. } => self.copy_to(source, target, options, legacy_options, None).await,
            Statement::Copy { source, to, target, options, legacy_options, .. } => {
                self.copy(source, *to, target, options, legacy_options)
            }
            other => Err(not_supported!("statement is not supported: {}", first_words(&other.to_string()))),
        }
    }

    /// `DESCRIBE name` / `SHOW COLUMNS FROM name`: each visible column's name, type and comment.
    fn describe_relation(&self, name: &datafusion::sql::sqlparser::ast::ObjectName) -> Result<Output> {
        let (_, _, entry) = resolve_relation(self, name)?;
        let rows = entry
            .columns
            .iter()
            .filter(|c| !c.hidden)
            .map(|c| vec![c.name.clone(), c.ty.pg_name(), entry.comments.columns.get(&c.name).cloned().unwrap_or_default()])
            .collect();
        text_rows(&["Name", "Type", "Description"], rows)
    }
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// The type OIDs of `$n` placeholders cast explicitly in `stmt` (`$1::oid[]`).
fn declared_param_types(stmt: &Statement, n: usize) -> Vec<Option<u32>> {
    use datafusion::sql::sqlparser::ast::visit_expressions;
    let mut out = vec![None; n];
    let _ = visit_expressions(stmt, |e| {
        if let SqlExpr::Cast { expr, data_type, .. } = e {
            if let SqlExpr::Value(v) = expr.as_ref() {
                if let Value::Placeholder(p) = &v.value {
                    let i = p.strip_prefix('$').and_then(|d| d.parse::<usize>().ok()).filter(|i| (1..=n).contains(i));
                    if let Some(i) = i {
                        if out[i - 1].is_none() {
                            out[i - 1] = crate::pg::types::type_oid_by_name(&data_type.to_string());
                        }
                    }
                }
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    out
}
