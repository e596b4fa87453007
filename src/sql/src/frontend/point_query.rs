//! Prepared point queries (issue 12, serving speed): a prepared `SELECT columns FROM relation
//! WHERE key = $1 [AND ...]` whose conditions pin a table's or materialized view's whole
//! primary key, and nothing else, is planned through DataFusion on its first execution; the
//! session keeps what the plan reads, and later executions look the row up by key without
//! planning again. A changed catalog entry (ALTER, DROP and re-CREATE), another schema on the
//! search path or a transaction block that wrote the table sends the statement back through
//! the planner, so the answer is always the one planning would give.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::TableReference;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Expr, LogicalPlan, Operator};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::scalar::ScalarValue;
use eddy_common::Result;

use eddy_storage::ReadSnapshot;

use crate::catalog::{Catalog, RelationKind, Relations, TableCatalog, DATABASE_NAME};
use crate::frontend::output::Output;

/// Where a key column's value comes from.
#[derive(Debug, Clone)]
enum KeyValue {
    /// Parameter `$n+1`, of the type the plan gave it.
    Param(usize, Option<DataType>),
    /// Parameter `$n+1`, declared this integer type by the client (`param_types`): the plan
    /// holds for values of exactly that type (the same text prepared with other types is
    /// planned again).
    Declared(usize, DataType),
    Const(ScalarValue),
}

/// What a point query reads.
#[derive(Debug)]
pub(crate) struct PointPlan {
    /// The relation as planned: a different entry under its name means re-planning.
    table: Arc<TableCatalog>,
    /// The name as planned, and the session's default schema then (planning resolves an
    /// unqualified name there).
    name: TableReference,
    default: String,
    /// Each storage key column with its value.
    key: Vec<(usize, KeyValue)>,
    /// Storage columns of the output, in order.
    columns: Vec<usize>,
    /// The output schema the client is told.
    out: SchemaRef,
}

/// A session's point plans by statement text.
#[derive(Debug, Default)]
pub(crate) struct PointPlans(HashMap<String, Arc<PointPlan>>);

/// Point plans a session keeps (cleared when full).
const MAX_POINT_PLANS: usize = 256;

impl PointPlans {
    pub(crate) fn get(&self, sql: &str) -> Option<Arc<PointPlan>> {
        self.0.get(sql).cloned()
    }

    pub(crate) fn remove(&mut self, sql: &str) {
        self.0.remove(sql);
    }

    pub(crate) fn insert(&mut self, sql: &str, plan: PointPlan) {
        if self.0.len() >= MAX_POINT_PLANS {
            self.0.clear();
        }
        self.0.insert(sql.to_string(), Arc::new(plan));
    }
}

/// The relation `name` means in `catalog`, for a session whose default schema is `default`.
fn resolve<'a>(catalog: &'a Catalog, name: &TableReference, default: &str) -> Option<&'a Arc<TableCatalog>> {
    if name.catalog().is_some_and(|c| c != DATABASE_NAME) {
        return None;
    }
    catalog.table(name.schema().unwrap_or(default), name.table())
}

/// `plan`'s point plan, if it is a projection of columns over a filter pinning the whole key
/// of a table or materialized view; `out` is the output schema clients are told.
pub(crate) fn point_plan(plan: &LogicalPlan, out: SchemaRef, catalog: &Catalog, default: &str) -> Option<PointPlan> {
    fn strip(mut p: &LogicalPlan) -> &LogicalPlan {
        while let LogicalPlan::SubqueryAlias(a) = p {
            p = a.input.as_ref();
        }
        p
    }
    let (exprs, below) = match plan {
        LogicalPlan::Projection(p) => (Some(&p.expr), strip(&p.input)),
        other => (None, other),
    };
    let LogicalPlan::Filter(filter) = below else { return None };
    let LogicalPlan::TableScan(scan) = strip(&filter.input) else { return None };
    if !scan.filters.is_empty() || scan.fetch.is_some() || scan.projection.is_some() {
        return None;
    }
    let table = resolve(catalog, &scan.table_name, default)?.clone();
    if !matches!(table.kind, RelationKind::Table | RelationKind::MaterializedView) {
        return None;
    }
    // The scan's columns are the visible ones (a table without a key has a hidden row id,
    // which no filter pins: such tables are never point-queried).
    let visible = table.visible_indices();
    let storage = table.storage_schema();
    let column = |e: &Expr| -> Option<usize> {
        let Expr::Column(c) = e else { return None };
        let i = filter.input.schema().index_of_column(c).ok()?;
        visible.get(i).copied()
    };
    // A key column, or one widened to a larger integer type (equal exactly when the value
    // fits the column's type).
    let key_column = |e: &Expr| -> Option<usize> {
        match e {
            Expr::Cast(c) => {
                let i = column(&c.expr)?;
                widens(storage.field(i).data_type(), c.field.data_type()).then_some(i)
            }
            other => column(other),
        }
    };
    let value = |e: &Expr| -> Option<KeyValue> {
        match e {
            Expr::Placeholder(p) => {
                let n: usize = p.id.strip_prefix('$')?.parse().ok()?;
                Some(KeyValue::Param(n.checked_sub(1)?, p.field.as_ref().map(|f| f.data_type().clone())))
            }
            Expr::Literal(v, _) if !v.is_null() => Some(KeyValue::Const(v.clone())),
            // A parameter the client declared an integer type (`param_types`).
            Expr::Cast(c) if matches!(c.field.data_type(), DataType::Int16 | DataType::Int32 | DataType::Int64) => {
                let Expr::Placeholder(p) = c.expr.as_ref() else { return None };
                let n: usize = p.id.strip_prefix('$')?.parse().ok()?;
                Some(KeyValue::Declared(n.checked_sub(1)?, c.field.data_type().clone()))
            }
            _ => None,
        }
    };
    let pk = table.storage_pk();
    let mut key: Vec<(usize, KeyValue)> = Vec::new();
    for c in split_conjunction(&filter.predicate) {
        let Expr::BinaryExpr(b) = c else { return None };
        if b.op != Operator::Eq {
            return None;
        }
        let (col, v) = match (key_column(&b.left), value(&b.right)) {
            (Some(col), Some(v)) => (col, v),
            _ => (key_column(&b.right)?, value(&b.left)?),
        };
        if !pk.contains(&col) || key.iter().any(|(k, _)| *k == col) {
            return None;
        }
        key.push((col, v));
    }
    if key.len() != pk.len() {
        return None;
    }
    let columns = match exprs {
        None => visible.clone(),
        Some(exprs) => exprs
            .iter()
            .map(|e| match e {
                Expr::Alias(a) => column(&a.expr),
                other => column(other),
            })
            .collect::<Option<Vec<_>>>()?,
    };
    if out.fields().len() != columns.len() || out.fields().iter().zip(&columns).any(|(f, &c)| f.data_type() != storage.field(c).data_type()) {
        return None;
    }
    Some(PointPlan { table, name: scan.table_name.clone(), default: default.to_string(), key, columns, out })
}

/// True if every value of `from` is exactly one value of `to` and back (integer widening).
fn widens(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    matches!((from, to), (Int16, Int32 | Int64) | (Int32, Int64))
}

impl PointPlan {
    /// True while the plan still says what planning would: `catalog` has the same entry under
    /// the name for a session whose default schema is `default`, and a transaction block
    /// (`in_block`) can have no writes of its own to it.
    pub(crate) fn holds(&self, catalog: &Catalog, default: &str, in_block: bool) -> bool {
        let same = default == self.default && resolve(catalog, &self.name, default).is_some_and(|t| Arc::ptr_eq(t, &self.table));
        same && !(in_block && self.table.kind == RelationKind::Table)
    }

    /// True if `params` have the types the plan was made for.
    pub(crate) fn accepts(&self, params: &[ScalarValue]) -> bool {
        self.key.iter().all(|(_, v)| match v {
            KeyValue::Declared(n, t) => params.get(*n).is_some_and(|p| &p.data_type() == t),
            _ => true,
        })
    }

    /// The query's rows at `snapshot` for parameter values `params`.
    pub(crate) async fn run(&self, relations: &dyn Relations, snapshot: &ReadSnapshot, params: &[ScalarValue]) -> Result<Output> {
        let storage = self.table.storage_schema();
        let mut cols: Vec<ArrayRef> = storage.fields().iter().map(|f| new_null_array(f.data_type(), 1)).collect();
        let mut absent = false;
        for (col, v) in &self.key {
            let v = match v {
                KeyValue::Const(v) => v.clone(),
                KeyValue::Declared(n, _) => params.get(*n).cloned().unwrap_or(ScalarValue::Null),
                KeyValue::Param(n, t) => {
                    let v = params.get(*n).cloned().unwrap_or(ScalarValue::Null);
                    match t {
                        Some(t) if &v.data_type() != t => v.cast_to(t)?,
                        _ => v,
                    }
                }
            };
            // A value the key's type cannot hold (or NULL) matches no row.
            let a = arrow::compute::cast(&v.to_array_of_size(1)?, storage.field(*col).data_type())?;
            absent |= a.is_null(0);
            cols[*col] = a;
        }
        crate::planner::provider::readable(relations, &self.table, snapshot).await?;
        let batch = if absent {
            RecordBatch::new_empty(self.out.clone())
        } else {
            let nullable = Arc::new(Schema::new(storage.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>()));
            let keys = RecordBatch::try_new(nullable, cols)?;
            let rows = self.table.state_table()?.get_rows(snapshot, &keys).await?;
            RecordBatch::try_new(self.out.clone(), self.columns.iter().map(|&c| rows.column(c).clone()).collect())?
        };
        let batches: [datafusion::error::Result<RecordBatch>; 1] = [Ok(batch)];
        let stream = Box::pin(RecordBatchStreamAdapter::new(self.out.clone(), futures::stream::iter(batches)));
        Ok(Output::Rows { schema: self.out.clone(), stream })
    }
}
