//! The stream planner (docs/architecture.md, "Planning"): turns DataFusion's optimized `LogicalPlan` of a
//! view's query into a chain of incremental operators, tracking the stream key — the columns
//! that identify a row of the change stream — so the view can be materialized keyed by it.
//!
//! Key tracking: a table scan's key is the table's primary key (or hidden row id); columns the
//! query does not select are carried along as hidden columns at the end of the row. A
//! projection keeps the key columns it selects and carries the rest hidden. An aggregation's
//! key is its GROUP BY columns (none for a global aggregate: the view has one row).
//!
//! A join's key is both inputs' keys (NULL on a padded side of an outer join); its layout is the
//! left input's visible columns, the right input's, then both inputs' hidden columns (see
//! `eddy_stream::operator::hash_join`). Semi and anti joins keep their input's layout and key.
//!
//! The operators form a tree (see `eddy_stream::actor`): each input's chain feeds a stage where
//! inputs meet (a join, or a union), stages feed stages, and the root stage's chain is the
//! view's. While planning, the stage being built is "open" (its parent is not known yet).
//!
//! Constructs that cannot be maintained incrementally yet are refused with SQLSTATE 0A000 and a
//! message naming the construct.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column as PhysicalColumn, Literal};
use datafusion::scalar::ScalarValue;
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, ColumnType, Result};
use eddy_storage::ReadSnapshot;
use eddy_stream::operator::{
    AggKind, BinaryOperator, Filter, HashAgg, Operator, OverWindow, Project, Side, TemporalFilter,
    TopN,
};
use eddy_stream::Stage;

use crate::catalog::ColumnCatalog;
use agg_call::{agg_call, physical, strip_alias};
use crate::planner::provider::EddyTable;

/// The operators applied to one input of a view (and, for a source, its reader's id).
pub use crate::engine::ViewBranch as BranchPlan;

/// A view's stream plan, ready to run.
pub struct PlannedView {
    /// One chain per input (more than one for joins and UNION ALL).
    pub branches: Vec<BranchPlan>,
    /// Where inputs meet, children first; the last is the root, whose chain is the view's up
    /// to (excluding) `Materialize`.
    pub stages: Vec<Stage>,
    /// The view's columns: visible ones, then hidden key columns.
    pub columns: Vec<ColumnCatalog>,
    /// Stream key (indices into `columns`).
    pub pk: Vec<usize>,
    /// State tables used by operators, in plan order.
    pub internal_tables: Vec<u32>,
    /// A visible column whose watermark the view passes on to views on it.
    pub watermark_column: Option<String>,
    /// The view's changes are only inserts (views on it may use append-only operators).
    pub append_only: bool,
}

impl PlannedView {
    /// The root stage (where `Materialize` goes).
    pub fn root_mut(&mut self) -> Result<&mut Stage> {
        self.stages.last_mut().ok_or_else(|| eddy_common::internal_err!("a view plan without a root stage"))
    }
}

/// What planning a view collects besides its operators.
struct PlanCtx {
    /// State tables used by operators, in plan order.
    tables: Vec<u32>,
    /// The aggregation that emits on window close (its node's address), if the view does.
    eowc: Option<usize>,
    /// Planned for parallel actors: a join keys its output by its join key too, so that the
    /// actors it is split among (by join key) never emit rows of one key.
    parallel: bool,
}

impl PlanCtx {
    fn push(&mut self, table: u32) {
        self.tables.push(table);
    }
}

/// The aggregation `EMIT ON WINDOW CLOSE` applies to: the outermost one, with only
/// projections, filters and aliases above it (they keep its output append-only).
fn eowc_target(plan: &LogicalPlan) -> Option<&LogicalPlan> {
    match plan {
        LogicalPlan::Aggregate(_) => Some(plan),
        LogicalPlan::Projection(p) => eowc_target(&p.input),
        LogicalPlan::Filter(f) => eowc_target(&f.input),
        LogicalPlan::SubqueryAlias(a) => eowc_target(&a.input),
        LogicalPlan::Sort(s) if s.fetch.is_none() => eowc_target(&s.input),
        _ => None,
    }
}

fn eowc_refused() -> eddy_common::EddyError {
    not_supported!(
        "EMIT ON WINDOW CLOSE needs a GROUP BY on a column with a watermark, such as window_start of TUMBLE or HOP over a table or source declared with WATERMARK FOR, or an append-only query that selects such a column"
    )
}

/// The input column `e` is monotone (non-decreasing) in, if it depends on one column only
/// through order-preserving steps: the column, `+`/`-` a constant, `date_bin`/`date_trunc`
/// (the window starts of TUMBLE and HOP), casts between time types.
fn monotone_in(e: &Expr, schema: &datafusion::common::DFSchema) -> Option<usize> {
    use datafusion::logical_expr::Operator as BinOp;
    fn constant(e: &Expr) -> bool {
        match e {
            Expr::Literal(..) => true,
            Expr::Cast(c) => constant(&c.expr),
            Expr::Alias(a) => constant(&a.expr),
            _ => false,
        }
    }
    match e {
        Expr::Alias(a) => monotone_in(&a.expr, schema),
        Expr::Column(c) => schema.index_of_column(c).ok(),
        Expr::Cast(c) if matches!(c.field.data_type(), DataType::Timestamp(..) | DataType::Date32 | DataType::Date64) => monotone_in(&c.expr, schema),
        Expr::BinaryExpr(b) => match b.op {
            BinOp::Plus if constant(&b.right) => monotone_in(&b.left, schema),
            BinOp::Plus if constant(&b.left) => monotone_in(&b.right, schema),
            BinOp::Minus if constant(&b.right) => monotone_in(&b.left, schema),
            _ => None,
        },
        Expr::ScalarFunction(f) => match (f.name(), f.args.as_slice()) {
            ("date_bin", [step, ts]) if constant(step) => monotone_in(ts, schema),
            ("date_bin", [step, ts, origin]) if constant(step) && constant(origin) => monotone_in(ts, schema),
            ("date_trunc", [unit, ts]) if constant(unit) => monotone_in(ts, schema),
            _ => None,
        },
        _ => None,
    }
}

/// The input column a physical expression is, if it is one.
fn column_index(e: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    (e.as_ref() as &dyn std::any::Any).downcast_ref::<PhysicalColumn>().map(|c| c.index())
}

/// The parent index of inputs that feed the open stage of a [`Built`].
const OPEN: usize = usize::MAX;

/// A partially planned view: closed branches and stages (indices local to this plan; `OPEN`
/// names the open stage), and the open stage's join and chain.
struct Built {
    /// Per-input chains.
    branches: Vec<BranchPlan>,
    /// Closed stages, children first.
    stages: Vec<Stage>,
    /// The open stage's join, if its inputs are joined.
    join: Option<Box<dyn BinaryOperator>>,
    /// The open stage's operators.
    ops: Vec<Box<dyn Operator>>,
    /// Full row schema, hidden columns last.
    schema: SchemaRef,
    /// Stream key.
    key: Vec<usize>,
    /// Columns with a watermark (see `eddy_stream::watermark`): the runtime maps watermarks
    /// to exactly these.
    watermarks: Vec<usize>,
    /// The output only ever inserts (append-only tables and sources through stateless
    /// operators, inner joins, unions and window-closing aggregations).
    append_only: bool,
}

impl Built {
    /// Closes the open stage, which feeds `parent` (given in the caller's numbering), with
    /// this plan's stages placed from index `base`: the branches and stages to add. A lone
    /// input's chain just absorbs the open stage's operators.
    fn close(self, parent: Option<(usize, Side)>, base: usize) -> (Vec<BranchPlan>, Vec<Stage>) {
        let Built { mut branches, mut stages, join, ops, .. } = self;
        if let (Some(parent), None, true, 1) = (parent, &join, stages.is_empty(), branches.len()) {
            branches[0].operators.extend(ops);
            branches[0].parent = parent;
            return (branches, stages);
        }
        let top = base + stages.len();
        let at = |i: usize| if i == OPEN { top } else { base + i };
        for b in &mut branches {
            b.parent.0 = at(b.parent.0);
        }
        for s in &mut stages {
            if let Some(p) = &mut s.parent {
                p.0 = at(p.0);
            }
        }
        stages.push(Stage { join, operators: ops, parent });
        (branches, stages)
    }

    /// A plan whose open stage joins (or merges) `inputs`, given with the side each feeds.
    fn meet(inputs: Vec<(Built, Side)>, join: Option<Box<dyn BinaryOperator>>, schema: SchemaRef, key: Vec<usize>) -> Built {
        let (mut branches, mut stages) = (Vec::new(), Vec::new());
        for (input, side) in inputs {
            let (b, s) = input.close(Some((OPEN, side)), stages.len());
            branches.extend(b);
            stages.extend(s);
        }
        Built { branches, stages, join, ops: vec![], schema, key, watermarks: vec![], append_only: false }
    }
}

/// Where state-table ids of new operators come from.
pub enum TableIds<'a> {
    /// Fresh ids (a new view).
    Allocate(&'a mut (dyn FnMut() -> u32 + Send)),
    /// The ids recorded when the view was created (recovery).
    Reuse(std::slice::Iter<'a, u32>),
}

impl TableIds<'_> {
    fn next(&mut self) -> Result<u32> {
        match self {
            TableIds::Allocate(f) => Ok(f()),
            TableIds::Reuse(it) => it.next().copied().ok_or_else(|| eddy_common::internal_err!("view state tables changed since creation")),
        }
    }
}

/// Refuses functions whose value changes over time or per call (`now()`, `random()`): a view
/// built on them would silently freeze a value. Checked before optimization, which folds them.
pub fn check_deterministic(plan: &LogicalPlan) -> Result<()> {
    const TIME: [&str; 9] =
        ["now", "current_timestamp", "current_date", "current_time", "localtime", "localtimestamp", "statement_timestamp", "transaction_timestamp", "clock_timestamp"];
    let mut bad: Option<String> = None;
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                if let Expr::ScalarFunction(f) = e {
                    let name = f.name().to_ascii_lowercase();
                    // A temporal filter's `now()` (see `planner::temporal`).
                    if name == crate::planner::temporal::NOW_UDF {
                        return Ok(TreeNodeRecursion::Continue);
                    }
                    if TIME.contains(&name.as_str()) || f.func.signature().volatility == datafusion::logical_expr::Volatility::Volatile {
                        bad = Some(name);
                        return Ok(TreeNodeRecursion::Stop);
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    match bad {
        Some(f) => Err(not_supported!(
            "{f}() is not supported in a materialized view: its value changes over time, so the view could not be kept correct"
        )),
        None => Ok(()),
    }
}

fn node_name(plan: &LogicalPlan) -> String {
    match plan {
        LogicalPlan::Sort(_) => "ORDER BY with LIMIT (top-N)".into(),
        LogicalPlan::Limit(_) => "LIMIT / top-N".into(),
        LogicalPlan::Join(_) => "joins (coming with the joins-and-windows work)".into(),
        LogicalPlan::Window(_) => "window functions (OVER)".into(),
        LogicalPlan::Union(_) => "UNION".into(),
        LogicalPlan::Distinct(_) => "DISTINCT ON".into(),
        LogicalPlan::Values(_) => "VALUES".into(),
        LogicalPlan::EmptyRelation(_) => "a query without FROM".into(),
        LogicalPlan::RecursiveQuery(_) => "recursive queries".into(),
        LogicalPlan::Subquery(_) => "subqueries".into(),
        other => other.display().to_string().split_whitespace().next().unwrap_or("this construct").to_string(),
    }
}

/// Builds the chain for `plan`, allocating state tables from `ids` and restoring operator
/// state from `restore` (recovery) or initializing it (new view). `parallel`: for parallel
/// actors (see [`PlanCtx::parallel`]; a view must be planned the same way at recovery).
pub async fn plan_view(plan: &LogicalPlan, ids: &mut TableIds<'_>, restore: Option<&ReadSnapshot>, emit_on_window_close: bool, parallel: bool) -> Result<PlannedView> {
    let expanded = super::grouping_sets::expand_grouping_sets(plan.clone())?;
    let plan = &expanded;
    // Without an aggregation to close, the whole query's rows are held until closed.
    let target = eowc_target(plan).filter(|_| emit_on_window_close);
    let eowc = target.map(|t| t as *const LogicalPlan as usize);
    let mut internal = PlanCtx { tables: Vec::new(), eowc, parallel };
    let mut built = build(plan, ids, restore, &mut internal).await?;
    if emit_on_window_close && target.is_none() {
        eowc::hold_until_closed(&mut built, plan.schema().fields().len(), ids, restore, &mut internal).await?;
    }
    let internal = internal.tables;
    let (schema, key) = (built.schema.clone(), built.key.clone());
    let (watermarked, append_only) = (built.watermarks.clone(), built.append_only);
    let (mut branches, stages) = built.close(None, 0);
    // All scans of one source within the view share its first reader: they see the same rows
    // at the same epochs (a self-join of a source stays consistent), read once.
    let mut first_reader: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    for b in &mut branches {
        if let Some(r) = b.reader {
            b.reader = Some(*first_reader.entry(b.upstream.id).or_insert(r));
        }
    }
    let out = plan.schema();
    let visible = out.fields().len();
    let mut columns = Vec::with_capacity(schema.fields().len());
    let mut seen = std::collections::HashSet::new();
    for (i, f) in schema.fields().iter().enumerate() {
        let (name, hidden) = if i < visible { (pg_column_name(out.field(i).name()), false) } else { (format!("_key{}", i - visible), true) };
        if !seen.insert(name.clone()) {
            return Err(user_err!(sqlstate::DUPLICATE_COLUMN, "column \"{name}\" specified more than once; give the view's columns distinct names with AS"));
        }
        let ty = ColumnType::from_arrow_field(f)
            .ok_or_else(|| not_supported!("column \"{name}\" has type {} which a materialized view cannot store yet", f.data_type()))?;
        columns.push(ColumnCatalog { name, ty, not_null: false, default: None, hidden });
    }
    let watermark_column = watermarked.iter().find(|&&c| c < visible).map(|&c| columns[c].name.clone());
    Ok(PlannedView { branches, stages, columns, pk: key, internal_tables: internal, watermark_column, append_only })
}

/// PostgreSQL's name for an unaliased output column: the column, the function, or `?column?`.
fn pg_column_name(df_name: &str) -> String {
    let df_name = crate::planner::names::output_name(df_name);
    if df_name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '.') {
        return df_name.rsplit('.').next().unwrap_or(df_name).to_string();
    }
    if let Some(i) = df_name.find('(') {
        let f = &df_name[..i];
        if !f.is_empty() && f.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return f.to_ascii_lowercase();
        }
    }
    "?column?".to_string()
}

fn build<'a>(
    plan: &'a LogicalPlan,
    ids: &'a mut TableIds<'_>,
    restore: Option<&'a ReadSnapshot>,
    internal: &'a mut PlanCtx,
) -> futures::future::BoxFuture<'a, Result<Built>> {
    Box::pin(async move {
        match plan {
            LogicalPlan::TableScan(scan) => {
                // Pushed-down filters are only ever `Inexact` hints (the provider's point lookup);
                // the Filter node above the scan still applies them.
                if scan.fetch.is_some() {
                    return Err(not_supported!("pushed-down limits in a materialized view"));
                }
                let provider = source_as_provider(&scan.source)?;
                let table = provider
                    .downcast_ref::<EddyTable>()
                    .ok_or_else(|| not_supported!("materialized views can only read tables and materialized views, not {}", scan.table_name))?;
                let rel = table.catalog.clone();
                let storage = rel.storage_schema();
                let visible = rel.visible_indices();
                let projected: Vec<usize> = match &scan.projection {
                    Some(p) => p.iter().map(|&i| visible[i]).collect(),
                    None => visible.clone(),
                };
                let mut cols = projected.clone();
                for k in rel.storage_pk() {
                    if !cols.contains(&k) {
                        cols.push(k);
                    }
                }
                let key: Vec<usize> = rel.storage_pk().iter().map(|k| cols.iter().position(|c| c == k).unwrap_or(0)).collect();
                let exprs: Vec<Arc<dyn PhysicalExpr>> =
                    cols.iter().map(|&c| Arc::new(PhysicalColumn::new(storage.field(c).name(), c)) as Arc<dyn PhysicalExpr>).collect();
                let fields: Vec<Field> = cols
                    .iter()
                    .enumerate()
                    .map(|(i, &c)| {
                        let f = storage.field(c);
                        let name = if i < projected.len() { scan.projected_schema.field(i).name().clone() } else { format!("_key{i}") };
                        Field::new(name, f.data_type().clone(), true).with_metadata(f.metadata().clone())
                    })
                    .collect();
                let schema = Arc::new(Schema::new(fields));
                // The relation's watermark column, where the scan puts it.
                let watermark = rel
                    .watermark
                    .as_ref()
                    .and_then(|w| storage.index_of(&w.column).ok())
                    .and_then(|c| cols.iter().position(|&k| k == c).map(|pos| (pos, c)));
                let project = Project::try_new(exprs, schema.clone())?.with_watermarks(watermark.into_iter().collect(), storage.clone());
                let ops: Vec<Box<dyn Operator>> = vec![Box::new(project)];
                // A source is read by the view's own reader, whose position is state of the view.
                let reader = match rel.kind {
                    crate::catalog::RelationKind::Sink => {
                        return Err(eddy_common::user_err!(
                            eddy_common::error::sqlstate::WRONG_OBJECT_TYPE,
                            "\"{}\" is a sink: it keeps no rows to read",
                            rel.name
                        ))
                    }
                    crate::catalog::RelationKind::Source => {
                        let id = ids.next()?;
                        internal.push(id);
                        Some(id)
                    }
                    _ => None,
                };
                let append_only = rel.append_only || rel.kind == crate::catalog::RelationKind::Source;
                let branch = BranchPlan { operators: ops, upstream: rel, parent: (OPEN, Side::Left), reader, constant: None };
                let watermarks = watermark.map(|(pos, _)| pos).into_iter().collect();
                Ok(Built { branches: vec![branch], stages: vec![], join: None, ops: vec![], schema, key, watermarks, append_only })
            }
            LogicalPlan::SubqueryAlias(a) => build(&a.input, ids, restore, internal).await,
            // A view has no order (PostgreSQL and RisingWave accept ORDER BY in its definition
            // and order nothing); ORDER BY with LIMIT is a top-N, planned elsewhere.
            LogicalPlan::Sort(sort) => match sort.fetch {
                None => build(&sort.input, ids, restore, internal).await,
                Some(n) => plan_top_n(&sort.input, &sort.expr, 0, Some(n), ids, restore, internal).await,
            },
            LogicalPlan::Limit(limit) => {
                use datafusion::logical_expr::{FetchType, SkipType};
                let (SkipType::Literal(skip), FetchType::Literal(fetch)) = (limit.get_skip_type()?, limit.get_fetch_type()?) else {
                    return Err(not_supported!("LIMIT and OFFSET in a materialized view must be constants"));
                };
                match limit.input.as_ref() {
                    LogicalPlan::Sort(sort) => plan_top_n(&sort.input, &sort.expr, skip, fetch, ids, restore, internal).await,
                    _ if skip == 0 && fetch.is_none() => build(&limit.input, ids, restore, internal).await,
                    _ => Err(not_supported!(
                        "LIMIT without ORDER BY is not supported in a materialized view: which rows it keeps would be arbitrary; add an ORDER BY"
                    )),
                }
            }
            LogicalPlan::Window(w) => {
                let mut b = build(&w.input, ids, restore, internal).await?;
                let input_df = w.input.schema();
                let props = ExecutionProps::new();
                let exprs = w
                    .window_expr
                    .iter()
                    .map(|e| Ok(datafusion::physical_planner::create_window_expr(e, input_df, &props)?))
                    .collect::<Result<Vec<_>>>()?;
                let first = exprs.first().ok_or_else(|| eddy_common::internal_err!("a window node without functions"))?;
                let shape = |w: &Arc<dyn datafusion::physical_plan::WindowExpr>| {
                    (format!("{:?}", w.partition_by()), format!("{:?}", w.order_by()))
                };
                if exprs.iter().any(|e| shape(e) != shape(first)) {
                    return Err(not_supported!("window functions with different PARTITION BY or ORDER BY in one query level are not supported in a materialized view yet"));
                }
                let (partition_by, order_by) = (first.partition_by().to_vec(), first.order_by().to_vec());
                let visible = input_df.fields().len();
                let n = exprs.len();
                let nullable = |f: &Field| Field::new(f.name(), f.data_type().clone(), true).with_metadata(f.metadata().clone());
                let fields: Vec<Field> = w.schema.fields().iter().map(|f| nullable(f)).chain(b.schema.fields()[visible..].iter().map(|f| nullable(f))).collect();
                let schema = Arc::new(Schema::new(fields));
                let table_id = ids.next()?;
                internal.push(table_id);
                // For parallel actors (split by partition), rows are keyed by their partition
                // columns too: a row moving to another partition moves to another actor.
                let columns: Option<Vec<usize>> = partition_by.iter().map(column_index).collect();
                let parallel = columns.filter(|c| internal.parallel && !c.is_empty());
                let mut op =
                    OverWindow::try_new(table_id, exprs, partition_by, order_by, b.schema.clone(), visible, schema.clone())?;
                if parallel.is_some() {
                    op = op.parallel()?;
                }
                op.restore(restore).await?;
                b.ops.push(Box::new(op));
                b.key = b.key.iter().map(|&k| if k < visible { k } else { k + n }).collect();
                for c in parallel.unwrap_or_default().into_iter().map(|c| if c < visible { c } else { c + n }) {
                    if !b.key.contains(&c) {
                        b.key.push(c);
                    }
                }
                b.schema = schema;
                b.watermarks.clear();
                b.append_only = false;
                Ok(b)
            }
            LogicalPlan::Filter(f) => {
                let mut b = build(&f.input, ids, restore, internal).await?;
                let input_df = f.input.schema();
                let (temporal, rest): (Vec<&Expr>, Vec<&Expr>) =
                    datafusion::logical_expr::utils::split_conjunction(&f.predicate).into_iter().partition(|c| crate::planner::temporal::contains_now(c));
                if let Some(pred) = datafusion::logical_expr::utils::conjunction(rest.into_iter().cloned()) {
                    b.ops.push(Box::new(Filter::new(physical(&pred, input_df)?)));
                }
                if !temporal.is_empty() {
                    let bounds = temporal
                        .iter()
                        .map(|c| crate::planner::temporal::temporal_bound(c, input_df, |e| physical(e, input_df)))
                        .collect::<Result<Vec<_>>>()?;
                    let table_id = ids.next()?;
                    internal.push(table_id);
                    let mut op = TemporalFilter::try_new(table_id, bounds, b.schema.clone())?;
                    op.restore(restore).await?;
                    b.ops.push(Box::new(op));
                    // Rows that appear later may be behind a watermark; rows expire.
                    b.watermarks.clear();
                    b.append_only = false;
                }
                Ok(b)
            }
            LogicalPlan::Projection(p) => {
                let mut b = build(&p.input, ids, restore, internal).await?;
                let input_schema = p.input.schema();
                let mut exprs: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
                let mut fields: Vec<Field> = Vec::new();
                for (i, e) in p.expr.iter().enumerate() {
                    exprs.push(physical(e, input_schema)?);
                    let f = p.schema.field(i);
                    fields.push(Field::new(f.name(), f.data_type().clone(), true).with_metadata(f.metadata().clone()));
                }
                let mut key = Vec::new();
                for &k in &b.key {
                    let direct = p.expr.iter().position(|e| match strip_alias(e) {
                        Expr::Column(c) => input_schema.index_of_column(c).ok() == Some(k),
                        _ => false,
                    });
                    match direct {
                        Some(pos) => key.push(pos),
                        None => {
                            let f = b.schema.field(k);
                            exprs.push(Arc::new(PhysicalColumn::new(f.name(), k)));
                            key.push(fields.len());
                            fields.push(Field::new(format!("_key{}", fields.len()), f.data_type().clone(), true));
                        }
                    }
                }
                let schema = Arc::new(Schema::new(fields));
                let map: Vec<(usize, usize)> = p
                    .expr
                    .iter()
                    .enumerate()
                    .filter_map(|(i, e)| monotone_in(e, input_schema).filter(|c| b.watermarks.contains(c)).map(|c| (i, c)))
                    .collect();
                b.watermarks = map.iter().map(|&(o, _)| o).collect();
                b.ops.push(Box::new(Project::try_new(exprs, schema.clone())?.with_watermarks(map, b.schema.clone())));
                b.schema = schema;
                b.key = key;
                Ok(b)
            }
            LogicalPlan::Aggregate(a) => {
                let mut b = build(&a.input, ids, restore, internal).await?;
                let input_df = a.input.schema();
                let input_arrow = b.schema.clone();
                let groups = a.group_expr.iter().map(|e| physical(e, input_df)).collect::<Result<Vec<_>>>()?;
                let g = groups.len();
                let calls = a
                    .aggr_expr
                    .iter()
                    .enumerate()
                    .map(|(i, e)| agg_call(e, input_df, a.schema.field(g + i).data_type().clone()))
                    .collect::<Result<Vec<_>>>()?;
                // array_agg / string_agg without ORDER BY list values in the input's key order:
                // for a table that is the order a scan returns them in (PostgreSQL's is its
                // heap order; SQL leaves it unspecified).
                let calls = calls
                    .into_iter()
                    .map(|mut c| {
                        let unordered = matches!(c.kind, AggKind::ArrayAgg { distinct: false } | AggKind::StringAgg { distinct: false, .. }) && c.order_by.is_empty();
                        if unordered {
                            c.order_by = b
                                .key
                                .iter()
                                .map(|&k| {
                                    let column = Arc::new(PhysicalColumn::new(input_arrow.field(k).name(), k)) as Arc<dyn PhysicalExpr>;
                                    datafusion::physical_expr::PhysicalSortExpr::new(column, arrow::compute::SortOptions::default())
                                })
                                .collect();
                        }
                        c
                    })
                    .collect::<Vec<_>>();
                let fields: Vec<Field> =
                    a.schema.fields().iter().map(|f| Field::new(f.name(), f.data_type().clone(), true).with_metadata(f.metadata().clone())).collect();
                let schema = Arc::new(Schema::new(fields.clone()));
                // Group columns that carry a watermark; the first closes groups, so it leads
                // the group key (groups are stored in its order) and a projection puts the
                // columns back in the query's order.
                let watermarked: Vec<usize> = (0..g)
                    .filter(|&i| matches!(strip_alias(&a.group_expr[i]), Expr::Column(c) if input_df.index_of_column(c).is_ok_and(|k| b.watermarks.contains(&k))))
                    .collect();
                let eowc = internal.eowc == Some(plan as *const LogicalPlan as usize);
                if eowc && watermarked.is_empty() {
                    return Err(eowc_refused());
                }
                let mut order: Vec<usize> = (0..g).collect();
                if let Some(&w) = watermarked.first() {
                    order.retain(|&i| i != w);
                    order.insert(0, w);
                }
                let agg_fields: Vec<Field> = order.iter().map(|&i| fields[i].clone()).chain(fields[g..].iter().cloned()).collect();
                let agg_schema = Arc::new(Schema::new(agg_fields));
                let table_id = ids.next()?;
                internal.push(table_id);
                let mut agg = HashAgg::try_new(table_id, &input_arrow, order.iter().map(|&i| groups[i].clone()).collect(), calls, agg_schema.clone())?;
                if agg.needs_values_table() {
                    let values_table = ids.next()?;
                    internal.push(values_table);
                    agg = agg.with_values_table(values_table);
                }
                if !watermarked.is_empty() {
                    agg = agg.with_windows(eowc, &input_arrow)?;
                }
                if b.append_only {
                    agg = agg.with_append_only();
                }
                agg.restore(restore).await?;
                b.ops.push(Box::new(agg));
                let at = |j: usize| if j < g { order.iter().position(|&o| o == j).unwrap_or(j) } else { j };
                if order.iter().enumerate().any(|(k, &o)| k != o) {
                    let exprs: Vec<Arc<dyn PhysicalExpr>> =
                        (0..fields.len()).map(|j| Arc::new(PhysicalColumn::new(agg_schema.field(at(j)).name(), at(j))) as Arc<dyn PhysicalExpr>).collect();
                    let map = watermarked.iter().map(|&j| (j, at(j))).collect();
                    b.ops.push(Box::new(Project::try_new(exprs, schema.clone())?.with_watermarks(map, agg_schema.clone())));
                }
                b.schema = schema;
                b.key = (0..g).collect();
                // Emitting on window close, only the closing column's watermark holds.
                b.watermarks = if eowc { watermarked.into_iter().take(1).collect() } else { watermarked };
                b.append_only = eowc;
                Ok(b)
            }
            LogicalPlan::Union(u) => {
                let mut inputs = Vec::new();
                for input in &u.inputs {
                    inputs.push(build(input, ids, restore, internal).await?);
                }
                let visible = u.schema.fields().len();
                // Layout: visible columns, `_branch`, then every input's key columns (NULL in
                // the other inputs' rows). Key: `_branch` plus all of them.
                let mut fields: Vec<Field> =
                    u.schema.fields().iter().map(|f| Field::new(f.name(), f.data_type().clone(), true).with_metadata(f.metadata().clone())).collect();
                fields.push(Field::new("_branch", DataType::Int32, true));
                let mut key_types = Vec::new();
                for (i, input) in inputs.iter().enumerate() {
                    for (j, &k) in input.key.iter().enumerate() {
                        let dt = input.schema.field(k).data_type().clone();
                        fields.push(Field::new(format!("_key{i}_{j}"), dt.clone(), true));
                        key_types.push((i, k, dt));
                    }
                }
                let schema = Arc::new(Schema::new(fields));
                // A column has a watermark when every input has one on it (the minimum passes).
                let watermarks: Vec<usize> = (0..visible).filter(|c| inputs.iter().all(|i| i.watermarks.contains(c))).collect();
                let append_only = inputs.iter().all(|i| i.append_only);
                let mut branches = Vec::new();
                for (i, mut input) in inputs.into_iter().enumerate() {
                    let in_schema = input.schema.clone();
                    let mut exprs: Vec<Arc<dyn PhysicalExpr>> = (0..visible)
                        .map(|c| Arc::new(PhysicalColumn::new(in_schema.field(c).name(), c)) as Arc<dyn PhysicalExpr>)
                        .collect();
                    exprs.push(Arc::new(Literal::new(ScalarValue::Int32(Some(i as i32)))));
                    for (owner, k, dt) in &key_types {
                        exprs.push(if *owner == i {
                            Arc::new(PhysicalColumn::new(in_schema.field(*k).name(), *k))
                        } else {
                            Arc::new(Literal::new(ScalarValue::try_from(dt)?))
                        });
                    }
                    let map = watermarks.iter().map(|&c| (c, c)).collect();
                    input.ops.push(Box::new(Project::try_new(exprs, schema.clone())?.with_watermarks(map, in_schema)));
                    branches.push((input, Side::Left));
                }
                let key = (visible..schema.fields().len()).collect();
                let mut built = Built::meet(branches, None, schema, key);
                built.watermarks = watermarks;
                built.append_only = append_only;
                Ok(built)
            }
            LogicalPlan::Join(j) if j.join_type == datafusion::common::JoinType::LeftMark && !j.null_aware => {
                build(&join::mark_join_as_union(j)?, ids, restore, internal).await
            }
            LogicalPlan::Join(j) => {
                let left = build(&j.left, ids, restore, internal).await?;
                let right = build(&j.right, ids, restore, internal).await?;
                join::plan_join(j, left, right, ids, restore, internal).await
            }
            LogicalPlan::Unnest(u) => unnest::plan_unnest(u, build(&u.input, ids, restore, internal).await?),
            LogicalPlan::Values(_) | LogicalPlan::EmptyRelation(_) => constant::plan_constant(plan, ids, internal),
            other => Err(not_supported!("{} is not supported in a materialized view yet", node_name(other))),
        }
    })
}

/// Plans `ORDER BY sort LIMIT fetch OFFSET skip` over `input` (a top-N over one partition).
async fn plan_top_n(
    input: &LogicalPlan,
    sort: &[datafusion::logical_expr::SortExpr],
    skip: usize,
    fetch: Option<usize>,
    ids: &mut TableIds<'_>,
    restore: Option<&ReadSnapshot>,
    internal: &mut PlanCtx,
) -> Result<Built> {
    let mut b = build(input, ids, restore, internal).await?;
    let order_by = sort
        .iter()
        .map(|e| {
            let options = arrow::compute::SortOptions::new(!e.asc, e.nulls_first);
            Ok(datafusion::physical_expr::PhysicalSortExpr::new(physical(&e.expr, input.schema())?, options))
        })
        .collect::<Result<Vec<_>>>()?;
    let table_id = ids.next()?;
    internal.push(table_id);
    // Rows that carry a stream key are distinct: only the head of the order need be cached.
    let mut op = TopN::try_new(table_id, skip, fetch, order_by, b.schema.clone(), !b.key.is_empty())?;
    op.restore(restore).await?;
    b.ops.push(Box::new(op));
    b.watermarks.clear();
    b.append_only = false;
    Ok(b)
}

mod agg_call;
mod constant;
mod eowc;
mod join;
mod unnest;
