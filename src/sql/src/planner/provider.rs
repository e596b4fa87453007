//! DataFusion catalog adapters: Eddy's catalog seen as DataFusion `CatalogProviderList` →
//! `CatalogProvider` (the `dev` database) → `SchemaProvider` → [`EddyTable`].
//!
//! A scan reads the snapshot the statement pinned in its session config ([`QuerySnapshot`]),
//! so every table a statement reads shows the same committed epoch.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, CatalogProviderList, SchemaProvider, Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::scalar::ScalarValue;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::common::DFSchema;
use eddy_storage::{ReadSnapshot, StateTable};

use crate::catalog::sequence::is_serial_default;
use crate::catalog::{Relations, TableCatalog, DATABASE_NAME};

/// The snapshot a statement reads, stored as a DataFusion session-config extension.
#[derive(Debug, Clone)]
pub struct QuerySnapshot(pub ReadSnapshot);

/// The uncommitted writes of the statement's transaction block, by table id. Scans show them
/// over the snapshot (read-your-writes).
#[derive(Debug, Clone, Default)]
pub struct TxnOverlay(pub HashMap<u32, TableOverlay>);

/// One table's uncommitted writes: key → current encoded row (`None`: deleted).
pub type TableOverlay = Arc<std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>>>;

/// A table as DataFusion sees it.
#[derive(Debug)]
pub struct EddyTable {
    /// Catalog entry.
    pub catalog: Arc<TableCatalog>,
    /// Stored rows.
    pub state_table: Arc<StateTable>,
    /// Include the hidden `_row_id` column (DML planning of tables without a primary key).
    pub expose_row_id: bool,
    /// Default expressions by column name.
    defaults: HashMap<String, Expr>,
    /// Schema DataFusion plans against.
    schema: SchemaRef,
    /// The database, for the latest snapshot when a statement pinned none.
    relations: Arc<dyn Relations>,
    /// The primary key, so `GROUP BY pk` may select the other columns (PostgreSQL's
    /// functional dependency; Django groups by the key alone).
    constraints: Option<datafusion::common::Constraints>,
}

/// Default expressions of `table`'s columns, parsed once per catalog entry. A serial column's
/// default draws from the engine's counters.
pub fn column_defaults(relations: &dyn Relations, table: &TableCatalog) -> HashMap<String, Expr> {
    table
        .derived
        .defaults
        .get_or_init(|| {
            let ctx = crate::planner::udf::default_expression_context();
            let empty = DFSchema::empty();
            table
                .columns
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let sql = c.default.as_ref()?;
                    if is_serial_default(sql) {
                        return Some((c.name.clone(), crate::planner::udf::nextval_expr(relations.sequences(), table.id, i)));
                    }
                    // Validated at CREATE TABLE; an entry that no longer parses is dropped, not fatal.
                    match ctx.parse_sql_expr(sql, &empty) {
                        Ok(expr) => Some((c.name.clone(), expr)),
                        Err(e) => {
                            tracing::warn!("default of {}.{} does not parse and is ignored: {e}", table.name, c.name);
                            None
                        }
                    }
                })
                .collect()
        })
        .clone()
}

impl EddyTable {
    fn new(relations: Arc<dyn Relations>, catalog: Arc<TableCatalog>, expose_row_id: bool) -> DfResult<Self> {
        let state_table = catalog.state_table().map_err(|e| DataFusionError::External(Box::new(e)))?;
        let schema = catalog.planning_schema(expose_row_id);
        let defaults = column_defaults(relations.as_ref(), &catalog);
        let key: Option<Vec<usize>> = catalog.pk.iter().map(|&k| catalog.columns.get(k).and_then(|c| schema.index_of(&c.name).ok())).collect();
        let constraints = key
            .filter(|k| !k.is_empty() && catalog.kind == crate::catalog::RelationKind::Table)
            .map(|k| datafusion::common::Constraints::new_unverified(vec![datafusion::common::Constraint::PrimaryKey(k)]));
        Ok(Self { catalog, state_table, expose_row_id, defaults, schema, relations, constraints })
    }

    /// All rows visible to the statement (storage schema, including any `_row_id`): the
    /// snapshot's, with the statement's transaction block's own writes over them.
    pub async fn read_all(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let snapshot = self.snapshot(state);
        let ext = |e: eddy_common::EddyError| DataFusionError::External(Box::new(e));
        let batches = self.state_table.scan(&snapshot).await.map_err(ext)?;
        self.with_overlay(self.overlay(state).as_ref(), batches)
    }

    /// `batches` (stored rows) with the statement's transaction block's writes over them:
    /// rows it changed or deleted dropped, and every row it wrote added. (Rows it wrote that
    /// `batches` would not hold are the scan's filters to drop; DataFusion re-checks them.)
    fn with_overlay(&self, overlay: Option<&TableOverlay>, batches: Vec<RecordBatch>) -> DfResult<Vec<RecordBatch>> {
        let ext = |e: eddy_common::EddyError| DataFusionError::External(Box::new(e));
        let Some(overlay) = overlay else { return Ok(batches) };
        let codec = self.catalog.codec().map_err(ext)?;
        let mut out = Vec::with_capacity(batches.len() + 1);
        for b in batches {
            let keys = codec.encode_keys(self.catalog.id, &b).map_err(ext)?;
            let keep: arrow::array::BooleanArray = keys.iter().map(|k| Some(!overlay.contains_key(k))).collect();
            out.push(arrow::compute::filter_record_batch(&b, &keep)?);
        }
        let live = overlay.values().flatten().map(|v| v.as_slice());
        out.push(codec.decode_values(live).map_err(ext)?);
        Ok(out)
    }

    /// The block's writes to this table, if the statement runs in a block that wrote it.
    fn overlay(&self, state: &dyn Session) -> Option<TableOverlay> {
        let o = state.config().get_extension::<TxnOverlay>()?;
        o.0.get(&self.catalog.id).filter(|m| !m.is_empty()).cloned()
    }

    fn snapshot(&self, state: &dyn Session) -> eddy_storage::ReadSnapshot {
        match state.config().get_extension::<QuerySnapshot>() {
            Some(s) => s.0.clone(),
            None => self.relations.snapshot(),
        }
    }

    /// `column = literal` on a visible column: (storage column index, value).
    fn key_equality(&self, e: &Expr) -> Option<(usize, ScalarValue)> {
        let Expr::BinaryExpr(b) = e else { return None };
        if b.op != datafusion::logical_expr::Operator::Eq {
            return None;
        }
        let (col, lit) = match (b.left.as_ref(), b.right.as_ref()) {
            (Expr::Column(c), Expr::Literal(v, _)) | (Expr::Literal(v, _), Expr::Column(c)) => (c, v),
            _ => return None,
        };
        let visible = self.catalog.visible_indices();
        let storage = self.catalog.storage_schema();
        let idx = visible.iter().copied().find(|&i| storage.field(i).name() == &col.name)?;
        (!lit.is_null()).then(|| (idx, lit.clone()))
    }

    /// When `filters` pin every key column to a constant, the one batch holding that row (if
    /// any) read by key instead of a scan. Filters stay `Inexact`, so DataFusion re-checks them.
    async fn lookup_by_key(&self, state: &dyn Session, filters: &[Expr]) -> Option<Vec<RecordBatch>> {
        let pk = self.catalog.storage_pk();
        if pk.is_empty() {
            return None;
        }
        let mut values: HashMap<usize, ScalarValue> = HashMap::new();
        for f in filters {
            if let Some((i, v)) = self.key_equality(f) {
                values.insert(i, v);
            }
        }
        if !pk.iter().all(|k| values.contains_key(k)) {
            return None;
        }
        let storage = self.catalog.storage_schema();
        let mut cols = Vec::with_capacity(storage.fields().len());
        // A constant that does not convert to the key's type falls back to a scan (`None`),
        // where DataFusion evaluates the filter itself.
        for (i, f) in storage.fields().iter().enumerate() {
            cols.push(match values.get(&i) {
                Some(v) if pk.contains(&i) => arrow::compute::cast(&v.to_array_of_size(1).ok()?, f.data_type()).ok()?,
                _ => arrow::array::new_null_array(f.data_type(), 1),
            });
        }
        let nullable = Arc::new(arrow::datatypes::Schema::new(
            storage.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
        ));
        let keys = RecordBatch::try_new(nullable, cols).ok()?;
        let snapshot = self.snapshot(state);
        match self.state_table.get_rows(&snapshot, &keys).await {
            Ok(b) => Some(vec![b]),
            Err(e) => {
                tracing::warn!("key lookup in {} failed, scanning instead: {e}", self.catalog.name);
                None
            }
        }
    }
}

#[async_trait]
impl TableProvider for EddyTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn constraints(&self) -> Option<&datafusion::common::Constraints> {
        self.constraints.as_ref()
    }

    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.defaults.get(column)
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Inexact: key equalities may turn the scan into a point lookup; DataFusion still
        // evaluates every filter on what the scan returns.
        Ok(filters
            .iter()
            .map(|f| {
                if self.key_equality(f).is_some() {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        readable(self.relations.as_ref(), &self.catalog, &self.snapshot(state)).await.map_err(|e| DataFusionError::External(Box::new(e)))?;
        if self.catalog.kind == crate::catalog::RelationKind::View {
            // Views are expanded before planning; a reference that was not expanded (e.g. in
            // an UPDATE's subquery) is refused rather than read as empty.
            return Err(DataFusionError::External(Box::new(eddy_common::not_supported!(
                "view \"{}\" cannot be read in this position yet",
                self.catalog.name
            ))));
        }
        let overlay = self.overlay(state);
        // A point read inside a transaction block that wrote the table: the stored row, with
        // the block's own writes over it.
        let point = match self.lookup_by_key(state, filters).await {
            Some(b) if overlay.is_some() => Some(self.with_overlay(overlay.as_ref(), b)?),
            other => other,
        };
        let mut idx = self.catalog.visible_indices();
        if self.expose_row_id && self.catalog.has_row_id() {
            idx.push(self.catalog.columns.len());
        }
        if point.is_none() && overlay.is_none() {
            // Stream the table: batches are decoded as the store is read, so a scan holds a
            // few batches at a time and a LIMIT stops it early.
            // No column read (`count(*)`): the rows are counted, not decoded.
            let count_only = projection.is_some_and(|p| p.is_empty());
            let (schema, projection) = if count_only { (Arc::new(self.schema.project(&[])?), None) } else { (self.schema.clone(), projection) };
            let parallelism = state.config().target_partitions().clamp(1, MAX_SCAN_TASKS);
            let scan = TableStream { table: self.state_table.clone(), snapshot: self.snapshot(state), columns: idx, schema: schema.clone(), parallelism, count_only };
            return Ok(Arc::new(StreamingTableExec::try_new(schema, vec![Arc::new(scan)], projection, vec![], false, limit)?));
        }
        let mut batches = match point {
            Some(b) => b,
            None => self.read_all(state).await?,
        };
        if idx.len() != self.catalog.storage_schema().fields().len() {
            batches = batches.iter().map(|b| b.project(&idx)).collect::<Result<_, _>>()?;
        }
        // Rebind to the planned schema (same fields; nullability and metadata from the catalog).
        let batches = batches
            .into_iter()
            .map(|b| RecordBatch::try_new(self.schema.clone(), b.columns().to_vec()))
            .collect::<Result<Vec<_>, _>>()?;
        let exec = MemorySourceConfig::try_new_exec(&[batches], self.schema.clone(), projection.cloned())?;
        Ok(exec)
    }
}

/// Most scan tasks one table scan runs at once.
const MAX_SCAN_TASKS: usize = 8;

/// Batches a scan task reads ahead of the consumer.
const SCAN_READ_AHEAD_BATCHES: usize = 2;

/// One table's rows at one snapshot, as a stream of batches of its visible columns (and the
/// row id where exposed), rebound to the planned schema. The table is read by `parallelism`
/// tasks at once, each over a contiguous range of vnodes and a couple of batches ahead of the
/// consumer (memory stays bounded, and a LIMIT stops them early).
#[derive(Debug, Clone)]
struct TableStream {
    table: Arc<StateTable>,
    snapshot: ReadSnapshot,
    /// Storage columns to keep, in order.
    columns: Vec<usize>,
    schema: SchemaRef,
    /// Scan tasks.
    parallelism: usize,
    /// No column is read: batches carry only their row count (`schema` has no field).
    count_only: bool,
}

/// `batches` as one batch in the order of their ranges (zero-column batches keep their row
/// count).
fn concat(schema: &SchemaRef, mut batches: Vec<(usize, RecordBatch)>) -> DfResult<RecordBatch> {
    batches.sort_by_key(|(range, _)| *range);
    let batches: Vec<RecordBatch> = batches.into_iter().map(|(_, b)| b).collect();
    if batches.len() == 1 {
        return Ok(batches.into_iter().next().expect("one batch"));
    }
    if schema.fields().is_empty() {
        return Ok(counted(schema, batches.iter().map(RecordBatch::num_rows).sum())?);
    }
    Ok(arrow::compute::concat_batches(schema, &batches)?)
}

/// A batch of `rows` rows and no column (`schema` has no field).
fn counted(schema: &SchemaRef, rows: usize) -> Result<RecordBatch, arrow::error::ArrowError> {
    RecordBatch::try_new_with_options(schema.clone(), vec![], &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)))
}

/// One message of a scan task: a batch, or the end of its range (a task that stops without
/// saying so failed, and the scan fails rather than come up short).
type ScanItem = eddy_common::Result<Option<RecordBatch>>;

impl TableStream {
    /// Reads the vnodes `range` into `tx` until the consumer goes away.
    async fn read_range(self: Arc<Self>, range: std::ops::Range<u16>, tx: tokio::sync::mpsc::Sender<ScanItem>) {
        let run = async {
            let mut scan = self.table.scan_stream_vnodes(&self.snapshot, range).await?;
            loop {
                let batch = if self.count_only {
                    let Some(rows) = scan.next_len().await? else { return Ok(true) };
                    counted(&self.schema, rows)?
                } else {
                    let Some(b) = scan.next_batch().await? else { return Ok(true) };
                    let b = if self.columns.len() != self.table.schema().fields().len() { b.project(&self.columns)? } else { b };
                    RecordBatch::try_new(self.schema.clone(), b.columns().to_vec())?
                };
                if tx.send(Ok(Some(batch))).await.is_err() {
                    return Ok(false);
                }
            }
        };
        let end = match run.await {
            Ok(true) => Ok(None),
            Ok(false) => return,
            Err(e) => Err(e),
        };
        let _ = tx.send(end).await;
    }
}

impl PartitionStream for TableStream {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<datafusion::execution::TaskContext>) -> datafusion::execution::SendableRecordBatchStream {
        use futures::StreamExt;
        let this = Arc::new(self.clone());
        let vnodes = eddy_common::codec::VNODE_COUNT;
        let tasks = u16::try_from(self.parallelism).unwrap_or(1).clamp(1, vnodes);
        let receivers: Vec<_> = (0..tasks)
            .map(|i| {
                let range = i * vnodes / tasks..(i + 1) * vnodes / tasks;
                let (tx, rx) = tokio::sync::mpsc::channel(SCAN_READ_AHEAD_BATCHES);
                tokio::spawn(this.clone().read_range(range, tx));
                rx
            })
            .collect();
        // Batches as the tasks deliver them, each with its range's index.
        let batches = futures::stream::select_all(receivers.into_iter().enumerate().map(|(range, rx)| {
            futures::stream::unfold(Some(rx), move |rx| async move {
                let mut rx = rx?;
                match rx.recv().await {
                    Some(Ok(Some(batch))) => Some((Ok((range, batch)), Some(rx))),
                    Some(Ok(None)) => None,
                    Some(Err(e)) => Some((Err(DataFusionError::External(Box::new(e))), None)),
                    None => Some((Err(DataFusionError::Execution("a table scan task ended early".into())), None)),
                }
            })
            .boxed()
        }));
        // Small batches (each range's last) are joined into batches of `eddy_storage::state_table::SCAN_BATCH_ROWS`, the
        // rest in range order: a table smaller than a batch comes out as one batch in key order
        // whatever the number of tasks (DataFusion spreads batches over its partitions, and an
        // order-dependent aggregate such as string_agg without ORDER BY would otherwise answer
        // differently from run to run). Larger tables come in the order the tasks read them.
        let schema = self.schema.clone();
        let coalesced = futures::stream::unfold((batches, Vec::new(), false), move |(mut input, mut pending, done)| {
            let schema = schema.clone();
            async move {
                if done {
                    return None;
                }
                loop {
                    match input.next().await {
                        Some(Ok(b)) => {
                            pending.push(b);
                            if pending.iter().map(|(_, b): &(usize, RecordBatch)| b.num_rows()).sum::<usize>() >= eddy_storage::state_table::SCAN_BATCH_ROWS {
                                let out = concat(&schema, std::mem::take(&mut pending));
                                return Some((out, (input, pending, false)));
                            }
                        }
                        Some(Err(e)) => return Some((Err(e), (input, Vec::new(), true))),
                        None if pending.is_empty() => return None,
                        None => return Some((concat(&schema, std::mem::take(&mut pending)), (input, Vec::new(), true))),
                    }
                }
            }
        });
        Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(self.schema.clone(), coalesced))
    }
}

/// Schemas served by a plug-in rather than stored (the PostgreSQL layer's `pg_catalog` and
/// `information_schema`).
pub trait SystemCatalog: Send + Sync + std::fmt::Debug {
    /// The system schema `name`, if it is one.
    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>>;

    /// The relation an unqualified `name` means when no user schema on the path has it
    /// (PostgreSQL searches `pg_catalog` implicitly).
    fn implicit_relation(&self, name: &str) -> Option<Arc<dyn TableProvider>>;
}

/// Per (SQLSTATE, message), how many input rows of materialized view `view` fail to evaluate.
pub type RowErrorCounts = std::collections::BTreeMap<(String, String), i64>;

/// The failing-row counts of materialized view `view` at `snapshot`.
pub async fn view_error_counts(view: &TableCatalog, snapshot: &ReadSnapshot) -> eddy_common::Result<RowErrorCounts> {
    let prefix = eddy_common::codec::view_errors_prefix(view.id);
    let mut counts = RowErrorCounts::new();
    for (k, v) in snapshot.scan_prefix_cached(&prefix).await? {
        if let Some((state, message, n)) = eddy_common::codec::decode_view_error(&k, &v) {
            *counts.entry((state, message)).or_default() += n;
        }
    }
    Ok(counts)
}

/// Refuses a read of `table` at `snapshot` that must fail: a failed view, a view some of whose
/// input rows fail to evaluate, a sink or a source (which keep no rows).
pub async fn readable(relations: &dyn Relations, table: &TableCatalog, snapshot: &ReadSnapshot) -> eddy_common::Result<()> {
    if let Some(err) = relations.view_failure(table) {
        return Err(err);
    }
    if table.is_view() {
        if let Some(err) = view_row_errors(table, snapshot).await? {
            return Err(err);
        }
    }
    match table.kind {
        crate::catalog::RelationKind::Sink => Err(eddy_common::user_err!(
            eddy_common::error::sqlstate::WRONG_OBJECT_TYPE,
            "\"{}\" is a sink: it sends its changes to its connector and keeps no rows to read",
            table.name
        )),
        crate::catalog::RelationKind::Source => Err(eddy_common::not_supported!(
            "source \"{}\" cannot be queried directly: its rows are not stored; create a materialized view that reads it",
            table.name
        )),
        _ => Ok(()),
    }
}

/// The error reading materialized view `view` returns while some of its input rows fail to
/// evaluate (division by zero, overflow, ...): the first failure's SQLSTATE and message, with
/// how many rows fail. `None` when every row evaluates.
pub async fn view_row_errors(view: &TableCatalog, snapshot: &ReadSnapshot) -> eddy_common::Result<Option<eddy_common::EddyError>> {
    Ok(row_errors_error(&view.name, &view_error_counts(view, snapshot).await?))
}

/// The error of a view named `view` whose failing-row counts are `counts`, if any is positive.
pub fn row_errors_error(view: &str, counts: &RowErrorCounts) -> Option<eddy_common::EddyError> {
    let total: i64 = counts.values().filter(|n| **n > 0).sum();
    let ((state, message), _) = counts.iter().find(|(_, n)| **n > 0)?;
    let code = eddy_common::error::static_sqlstate(state);
    let rows = if total == 1 { "1 input row fails".to_string() } else { format!("{total} input rows fail") };
    Some(eddy_common::EddyError::user(code, format!("{message} (materialized view \"{view}\": {rows} to evaluate)")))
}

/// One schema of the catalog.
#[derive(Debug)]
pub struct EddySchema {
    relations: Arc<dyn Relations>,
    system: Option<Arc<dyn SystemCatalog>>,
    name: String,
    expose_row_id: bool,
}

#[async_trait]
impl SchemaProvider for EddySchema {
    fn table_names(&self) -> Vec<String> {
        self.relations.catalog().tables_in(&self.name).into_iter().map(|t| t.name.clone()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let entry = self.relations.catalog().table(&self.name, name).cloned();
        match entry {
            Some(t) => Ok(Some(Arc::new(EddyTable::new(self.relations.clone(), t, self.expose_row_id)?))),
            None => Ok(self.system.as_ref().and_then(|s| s.implicit_relation(name))),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        self.relations.catalog().table(&self.name, name).is_some()
            || self.system.as_ref().is_some_and(|s| s.implicit_relation(name).is_some())
    }
}

/// The `dev` database.
#[derive(Debug)]
pub struct EddyDatabase {
    relations: Arc<dyn Relations>,
    system: Option<Arc<dyn SystemCatalog>>,
    expose_row_id: bool,
}

impl CatalogProvider for EddyDatabase {
    fn schema_names(&self) -> Vec<String> {
        self.relations.catalog().schemas().map(|s| s.name.clone()).collect()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if let Some(system) = self.system.as_ref().and_then(|s| s.schema(name)) {
            return Some(system);
        }
        self.relations.catalog().schema(name)?;
        Some(Arc::new(EddySchema {
            relations: self.relations.clone(),
            system: self.system.clone(),
            name: name.to_string(),
            expose_row_id: self.expose_row_id,
        }))
    }
}

/// The list of databases: just `dev`.
#[derive(Debug)]
pub struct EddyCatalogList {
    db: Arc<EddyDatabase>,
}

impl EddyCatalogList {
    /// The catalog list over `relations`, with `system`'s schemas beside the stored ones. With
    /// `expose_row_id`, tables without a primary key show their hidden `_row_id` column (used to
    /// plan UPDATE and DELETE).
    pub fn new(relations: Arc<dyn Relations>, system: Option<Arc<dyn SystemCatalog>>, expose_row_id: bool) -> Self {
        Self { db: Arc::new(EddyDatabase { relations, system, expose_row_id }) }
    }
}

impl CatalogProviderList for EddyCatalogList {
    fn register_catalog(&self, _name: String, _catalog: Arc<dyn CatalogProvider>) -> Option<Arc<dyn CatalogProvider>> {
        None
    }

    fn catalog_names(&self) -> Vec<String> {
        vec![DATABASE_NAME.to_string()]
    }

    fn catalog(&self, name: &str) -> Option<Arc<dyn CatalogProvider>> {
        (name == DATABASE_NAME).then(|| self.db.clone() as Arc<dyn CatalogProvider>)
    }
}
