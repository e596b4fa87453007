//! `INSERT ... ON CONFLICT [(key columns)] DO NOTHING | DO UPDATE SET ... [WHERE ...]`.
//!
//! The proposed rows are computed as for a plain INSERT; the table's writer then resolves rows
//! whose primary key exists (or repeats an earlier proposed row) against its current rows:
//! dropped for DO NOTHING, or replaced by the updated version of the existing row for DO UPDATE
//! (`excluded` names the proposed row), which this module compiles into expressions the writer
//! evaluates.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::{DFSchema, TableReference};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, ConflictTarget, OnConflict, OnConflictAction, OnInsert, Statement,
};
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, Result};
use eddy_stream::{ConflictUpdate, OnConflict as Resolution};

use crate::catalog::TableCatalog;
use crate::frontend::session::Session;
use crate::frontend::statement::ident_name;

/// What an INSERT does on a key conflict, taken out of the statement (DataFusion plans the
/// INSERT without it).
#[derive(Debug, Clone)]
pub struct Conflict {
    /// `DO NOTHING` / `DO UPDATE`.
    pub clause: OnConflict,
    /// The target's alias (`INSERT INTO t AS x`), by which DO UPDATE may name the existing row.
    pub alias: Option<String>,
}

/// `stmt` without its ON CONFLICT clause, and the clause.
pub fn take_on_conflict(stmt: &Statement) -> Result<Option<(Statement, Conflict)>> {
    let Statement::Insert(ins) = stmt else { return Ok(None) };
    match &ins.on {
        None => Ok(None),
        Some(OnInsert::OnConflict(clause)) => {
            let mut s = ins.clone();
            s.on = None;
            let alias = s.table_alias.take().map(|a| ident_name(&a.alias));
            Ok(Some((Statement::Insert(s), Conflict { clause: clause.clone(), alias })))
        }
        Some(_) => Err(not_supported!("ON DUPLICATE KEY UPDATE is MySQL syntax; use ON CONFLICT ... DO UPDATE")),
    }
}

/// `ON CONFLICT DO UPDATE SET ... [WHERE ...]` evaluated by the table's writer on the
/// conflicting rows: each column's assignment (or the existing value) over the existing row
/// (named like the target) and the proposed row (`excluded`).
struct SqlConflictUpdate {
    /// One expression per stored column, over `input`.
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// The clause's `WHERE`, over `input`.
    filter: Option<Arc<dyn PhysicalExpr>>,
    /// Existing row's columns, then the proposed row's.
    input: SchemaRef,
    /// The table's stored columns.
    output: SchemaRef,
}

impl ConflictUpdate for SqlConflictUpdate {
    fn update(&self, existing: &RecordBatch, proposed: &RecordBatch) -> Result<(RecordBatch, Vec<bool>)> {
        let columns: Vec<ArrayRef> = existing.columns().iter().chain(proposed.columns()).cloned().collect();
        let input = RecordBatch::try_new(self.input.clone(), columns)?;
        evaluate_update(&self.exprs, self.filter.as_ref(), &input, &self.output)
    }
}

/// The new versions of `input`'s rows — one expression per stored column of `output`, cast to
/// its type — and which of them the `WHERE` (`filter`) keeps. Shared by `ON CONFLICT DO
/// UPDATE` and the writer-evaluated UPDATE (`writer_update.rs`).
pub(crate) fn evaluate_update(
    exprs: &[Arc<dyn PhysicalExpr>],
    filter: Option<&Arc<dyn PhysicalExpr>>,
    input: &RecordBatch,
    output: &SchemaRef,
) -> Result<(RecordBatch, Vec<bool>)> {
    let n = input.num_rows();
    let out = exprs
        .iter()
        .zip(output.fields())
        .map(|(e, f)| {
            let a = e.evaluate(input)?.into_array(n)?;
            Ok(if a.data_type() == f.data_type() { a } else { eddy_common::cast::cast_checked(&a, f.data_type())? })
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let keep = match filter {
        None => vec![true; n],
        Some(f) => {
            let v = f.evaluate(input)?.into_array(n)?;
            let b = v.as_boolean_opt().ok_or_else(|| user_err!(sqlstate::DATATYPE_MISMATCH, "argument of WHERE must be type boolean"))?;
            (0..n).map(|i| b.is_valid(i) && b.value(i)).collect()
        }
    };
    Ok((RecordBatch::try_new(output.clone(), out)?, keep))
}

impl Session {
    /// What `INSERT ... ON CONFLICT` does with a conflicting row of `table`, checked against
    /// the table's key.
    pub(crate) fn conflict_action(&self, table: &TableCatalog, conflict: &Conflict) -> Result<Resolution> {
        let do_update = match &conflict.clause.action {
            OnConflictAction::DoNothing => None,
            OnConflictAction::DoUpdate(u) => Some(u),
        };
        if table.append_only && do_update.is_some() {
            return Err(user_err!(
                sqlstate::FEATURE_NOT_SUPPORTED,
                "table \"{}\" is append-only: INSERT ... ON CONFLICT DO UPDATE is not allowed",
                table.name
            ));
        }
        let no_constraint = || {
            user_err!("42P10", "there is no unique or exclusion constraint matching the ON CONFLICT specification")
        };
        if table.pk.is_empty() {
            // Without a key nothing can conflict.
            return if do_update.is_some() { Err(no_constraint()) } else { Ok(Resolution::Ignore) };
        }
        match &conflict.clause.conflict_target {
            Some(ConflictTarget::Columns(cols)) => {
                let named: HashSet<String> = cols.iter().map(ident_name).collect();
                let pk: HashSet<String> = table.pk.iter().map(|&i| table.columns[i].name.clone()).collect();
                if named != pk {
                    return Err(no_constraint());
                }
            }
            Some(ConflictTarget::OnConstraint(name)) => {
                let pk_name = format!("{}_pkey", table.name);
                if name.to_string().trim_matches('"') != pk_name {
                    return Err(user_err!(sqlstate::UNDEFINED_OBJECT, "constraint \"{name}\" for table \"{}\" does not exist", table.name));
                }
            }
            None if do_update.is_some() => {
                return Err(user_err!(sqlstate::SYNTAX_ERROR, "ON CONFLICT DO UPDATE requires inference specification or constraint name"));
            }
            None => {}
        }
        let Some(update) = do_update else { return Ok(Resolution::Ignore) };
        // Existing row's columns qualified by the target's name, then `excluded`'s.
        let target = conflict.alias.clone().unwrap_or_else(|| table.name.clone());
        let visible = table.planning_schema(false);
        let mut qualified = Vec::new();
        let mut fields = Vec::new();
        for q in [target.as_str(), "excluded"] {
            for f in visible.fields() {
                qualified.push((Some(TableReference::bare(q)), f.clone()));
                fields.push(Field::new(format!("{q}.{}", f.name()), f.data_type().clone(), true));
            }
        }
        let df_schema = DFSchema::new_with_metadata(qualified, Default::default())?;
        let input: SchemaRef = Arc::new(Schema::new(fields));
        let state = self.ctx.state();
        // Some functions (coalesce, nvl, ...) only run once the simplifier rewrote them, as
        // DataFusion's optimizer does for a planned statement.
        let context = datafusion::logical_expr::simplify::SimplifyContext::builder()
            .with_schema(Arc::new(df_schema.clone()))
            .with_config_options(Arc::new(state.config_options().as_ref().clone()))
            .with_current_time()
            .build();
        let simplifier = datafusion::optimizer::simplify_expressions::ExprSimplifier::new(context);
        // Each value is cast to its column's type (None: a condition), with the session's
        // analyzer rules: PostgreSQL's rounding and text casts, as in a planned statement.
        let physical_as = |e: &datafusion::sql::sqlparser::ast::Expr, to: Option<&arrow::datatypes::DataType>| -> Result<Arc<dyn PhysicalExpr>> {
            let logical = self.ctx.parse_sql_expr(&e.to_string(), &df_schema)?;
            let logical = match to {
                Some(t) => datafusion::logical_expr::cast(logical, t.clone()),
                None => logical,
            };
            let logical = analyzed_expr(&state, logical, &df_schema)?;
            let logical = simplifier.simplify(simplifier.coerce(logical, &df_schema)?)?;
            let p = state.create_physical_expr(logical, &df_schema)?;
            Ok(crate::planner::overflow::checked(p, &input)?)
        };
        let width = visible.fields().len();
        let mut exprs: Vec<Arc<dyn PhysicalExpr>> =
            (0..width).map(|i| Arc::new(Column::new(visible.field(i).name(), i)) as Arc<dyn PhysicalExpr>).collect();
        for a in &update.assignments {
            let AssignmentTarget::ColumnName(name) = &a.target else {
                return Err(not_supported!("tuple assignments in ON CONFLICT DO UPDATE are not supported"));
            };
            let col = name.0.last().map(|p| crate::frontend::names::normalize_ident(&p.to_string())).unwrap_or_default();
            let i = table.columns.iter().position(|c| c.name == col && !c.hidden).ok_or_else(|| {
                user_err!(sqlstate::UNDEFINED_COLUMN, "column \"{col}\" of relation \"{}\" does not exist", table.name)
            })?;
            if table.pk.contains(&i) {
                return Err(not_supported!("ON CONFLICT DO UPDATE cannot change key column \"{col}\""));
            }
            exprs[i] = physical_as(&a.value, Some(visible.field(i).data_type()))?;
        }
        let filter = update.selection.as_ref().map(|e| physical_as(e, None)).transpose()?;
        Ok(Resolution::Update(Arc::new(SqlConflictUpdate { exprs, filter, input, output: table.storage_schema() })))
    }
}

/// `e` over `schema` after the session's analyzer rules (type coercion and Eddy's PostgreSQL
/// casts), for expressions evaluated outside a planned statement.
pub(crate) fn analyzed_expr(state: &datafusion::execution::SessionState, e: datafusion::logical_expr::Expr, schema: &DFSchema) -> Result<datafusion::logical_expr::Expr> {
    use datafusion::logical_expr::{EmptyRelation, Expr, LogicalPlan, Projection};
    let input = LogicalPlan::EmptyRelation(EmptyRelation { produce_one_row: false, schema: Arc::new(schema.clone()) });
    let plan = LogicalPlan::Projection(Projection::try_new(vec![e.alias("v")], Arc::new(input))?);
    let plan = state.analyzer().execute_and_check(plan, state.config_options(), |_, _| {})?;
    match plan {
        LogicalPlan::Projection(mut p) if p.expr.len() == 1 => Ok(match p.expr.remove(0) {
            Expr::Alias(a) => *a.expr,
            other => other,
        }),
        _ => Err(eddy_common::internal_err!("the analyzer changed an expression's plan")),
    }
}
