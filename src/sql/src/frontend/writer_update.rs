//! UPDATEs the table's writer evaluates against its current rows. An UPDATE computed from the
//! statement's snapshot and written later would lose a concurrent update of the same row (two
//! `SET bal = bal - 5` both reading 100 store 95): PostgreSQL prevents that with row locks and
//! re-evaluation. Here, when the statement reads only its target table (no subqueries) and
//! keeps the key, the snapshot only picks the rows; the writer applies the `SET` expressions
//! to each row's current version and re-checks the `WHERE`, in its single thread.

use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNode;
use datafusion::execution::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_expr::PhysicalExpr;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, ColumnType, Result};
use eddy_stream::table_write::ConflictUpdate;

use crate::catalog::TableCatalog;

/// The `SET` and `WHERE` of an UPDATE over the table's stored rows.
struct WriterUpdate {
    /// One expression per stored column.
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// The statement's `WHERE`.
    filter: Option<Arc<dyn PhysicalExpr>>,
    /// The rows the expressions read (the scan's layout = the stored columns).
    input: SchemaRef,
    /// The stored columns.
    output: SchemaRef,
    /// NOT NULL columns (index, name) and the table's name, for 23502.
    not_null: Vec<(usize, String)>,
    table: String,
}

impl ConflictUpdate for WriterUpdate {
    fn update(&self, existing: &RecordBatch, _proposed: &RecordBatch) -> Result<(RecordBatch, Vec<bool>)> {
        let input = RecordBatch::try_new(self.input.clone(), existing.columns().to_vec())?;
        let (out, keep) = crate::frontend::on_conflict::evaluate_update(&self.exprs, self.filter.as_ref(), &input, &self.output)?;
        let n = out.num_rows();
        for (i, name) in &self.not_null {
            if (0..n).any(|r| keep[r] && out.column(*i).is_null(r)) {
                return Err(user_err!(
                    sqlstate::NOT_NULL_VIOLATION,
                    "null value in column \"{name}\" of relation \"{}\" violates not-null constraint",
                    self.table
                ));
            }
        }
        Ok((out, keep))
    }
}

fn has_subquery(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) | Expr::OuterReferenceColumn(..))))
        .unwrap_or(true)
}

/// The writer-side form of the UPDATE planned as `input` (a projection computing every stored
/// column) on `catalog`, when the statement qualifies (see the module docs).
pub(crate) fn writer_update(state: &SessionState, input: &LogicalPlan, catalog: &TableCatalog) -> Result<Option<Arc<dyn ConflictUpdate>>> {
    // Rows of a table without a primary key are found by their hidden row id, which the
    // writer does not look up for inserts: such tables keep the snapshot path.
    if catalog.pk.is_empty() {
        return Ok(None);
    }
    // With the session's analyzer rules (type coercion, PostgreSQL's rounding and text casts),
    // as the snapshot path's plan is run.
    let analyzed = state.analyzer().execute_and_check(input.clone(), state.config_options(), |_, _| {})?;
    let LogicalPlan::Projection(p) = &analyzed else { return Ok(None) };
    let (scan, filter) = match p.input.as_ref() {
        LogicalPlan::Filter(f) => match f.input.as_ref() {
            LogicalPlan::TableScan(s) => (s, Some(&f.predicate)),
            _ => return Ok(None),
        },
        LogicalPlan::TableScan(s) => (s, None),
        _ => return Ok(None),
    };
    let output = catalog.storage_schema();
    let width = output.fields().len();
    if p.expr.len() != width || scan.source.schema().fields().len() != width {
        return Ok(None);
    }
    if scan.projection.as_ref().is_some_and(|proj| *proj != (0..width).collect::<Vec<_>>()) {
        return Ok(None);
    }
    if p.expr.iter().chain(filter).any(has_subquery) {
        return Ok(None);
    }
    let unaliased = |e: &'_ Expr| -> Expr {
        match e {
            Expr::Alias(a) => a.expr.as_ref().clone(),
            other => other.clone(),
        }
    };
    let unchanged = |i: usize| matches!(unaliased(&p.expr[i]), Expr::Column(c) if c.name == *output.field(i).name());
    // A key change moves the row: left to the snapshot path (delete and insert).
    if catalog.storage_pk().iter().any(|&k| !unchanged(k)) {
        return Ok(None);
    }
    // Checks only the session does (varchar lengths, jsonb and uuid normal forms).
    let needs_session = |i: usize| matches!(catalog.columns.get(i).map(|c| &c.ty), Some(ColumnType::Varchar(Some(_)) | ColumnType::Jsonb | ColumnType::Uuid));
    if (0..width).any(|i| !unchanged(i) && needs_session(i)) {
        return Ok(None);
    }
    let df_schema = p.input.schema();
    let arrow_schema: SchemaRef = Arc::new(df_schema.as_arrow().clone());
    // `now()` and friends are constants of the statement, folded as the optimizer would.
    let context = datafusion::logical_expr::simplify::SimplifyContext::builder()
        .with_schema(df_schema.clone())
        .with_config_options(Arc::new(state.config_options().as_ref().clone()))
        .with_current_time()
        .build();
    let simplifier = datafusion::optimizer::simplify_expressions::ExprSimplifier::new(context);
    let physical = |e: &Expr| -> Result<Arc<dyn PhysicalExpr>> {
        let e = simplifier.simplify(e.clone())?;
        let e = state.create_physical_expr(e, df_schema)?;
        Ok(crate::planner::overflow::checked(e, &arrow_schema)?)
    };
    let exprs = p.expr.iter().map(|e| physical(match e {
        Expr::Alias(a) => a.expr.as_ref(),
        other => other,
    })).collect::<Result<Vec<_>>>()?;
    let filter = filter.map(physical).transpose()?;
    let not_null = catalog.columns.iter().enumerate().filter(|(_, c)| c.not_null).map(|(i, c)| (i, c.name.clone())).collect();
    Ok(Some(Arc::new(WriterUpdate { exprs, filter, input: arrow_schema, output, not_null, table: catalog.name.clone() })))
}
