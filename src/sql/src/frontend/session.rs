//! [`Session`]: one client connection's view of the database: settings, the DataFusion
//! contexts its statements are planned in, NOTICEs and transaction state. Statements are
//! dispatched by `execute.rs`; each family lives in its own module.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::Statement;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};
use parking_lot::RwLock;

use crate::catalog::{Relations, DATABASE_NAME};
use crate::engine::Engine;
use crate::pg::session_functions::{first_schema, register_session_functions, SessionInfo};
use crate::planner::provider::{EddyCatalogList, QuerySnapshot, TxnOverlay};
use crate::planner::settings::{canonical_var, default_vars};

/// A client session.
pub struct Session {
    /// The shared database.
    pub(crate) engine: Arc<Engine>,
    /// DataFusion context for queries and INSERT.
    pub(crate) ctx: SessionContext,
    /// DataFusion context whose tables show hidden row ids (UPDATE, DELETE).
    pub(crate) dml_ctx: SessionContext,
    /// Settings (lower-case names).
    pub(crate) vars: Arc<RwLock<BTreeMap<String, String>>>,
    /// Connected user.
    pub(crate) user: String,
    /// NOTICE messages for the client, drained by the wire layer.
    pub(crate) notices: Vec<String>,
    /// Where NOTICEs go while a statement runs, if the wire layer listens (progress reports).
    pub(crate) live_notices: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// Settings changed by the last statement, to report as ParameterStatus.
    pub(crate) changed: Vec<(String, String)>,
    /// The open transaction block (`BEGIN ... COMMIT`), with its recorded writes.
    pub(crate) block: Option<crate::frontend::state::Block>,
    /// The COPY FROM STDIN in progress.
    pub(crate) copy: Option<crate::frontend::state::CopyState>,
    /// Open cursors, by name.
    pub(crate) cursors: std::collections::HashMap<String, crate::frontend::state::Cursor>,
    /// Prepared point queries that skip planning (see [`crate::frontend::point_query`]).
    pub(crate) point_plans: crate::frontend::point_query::PointPlans,
}

impl Session {
    /// A new session for `user`.
    /// The server's shared state this session runs on.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn new(engine: Arc<Engine>, user: &str, pid: i32) -> Self {
        let vars = Arc::new(RwLock::new(default_vars(user)));
        let info = SessionInfo { user: user.to_string(), vars: vars.clone(), pid };
        let relations: Arc<dyn Relations> = engine.clone();
        let system = crate::pg::PgCatalog::new(relations.clone());
        let runtime = query_runtime(engine.config.query_memory_bytes);
        let make = |expose: bool| {
            let config = SessionConfig::new()
                .with_default_catalog_and_schema(DATABASE_NAME, "public")
                .with_information_schema(false)
                .with_create_default_catalog_and_schema(false);
            let mut config = config;
            config.options_mut().sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
            config.options_mut().execution.time_zone = Some("+00:00".to_string());
            // PostgreSQL semantics: `1.5` is numeric, and strings are text (not Utf8View).
            config.options_mut().sql_parser.parse_float_as_decimal = true;
            config.options_mut().sql_parser.map_string_types_to_utf8view = false;
            let state = datafusion::execution::SessionStateBuilder::new()
                .with_config(config)
                .with_runtime_env(runtime.clone())
                .with_default_features()
                .with_physical_optimizer_rules(crate::planner::physical_rules::rules())
                .with_optimizer_rules(crate::planner::optimizer_rules::rules())
                .with_catalog_list(Arc::new(EddyCatalogList::new(relations.clone(), Some(system.clone()), expose)))
                .with_physical_optimizer_rule(Arc::new(crate::planner::overflow::CheckedArithmetic))
                .with_analyzer_rules(crate::planner::pg_aggregates::analyzer_rules())
                .with_analyzer_rule(Arc::new(crate::planner::text_cast::PgTextCasts))
                .with_optimizer_rule(Arc::new(crate::planner::truth_tests::TruthTestsAsComparisons))
                .with_optimizer_rule(Arc::new(crate::planner::overflow::ConstantTimeOverflow))
                .build();
            let ctx = SessionContext::new_with_state(state);
            register_session_functions(&ctx, &info);
            ctx.register_udf(crate::planner::enums::enum_value_udf());
            crate::pg::install(&ctx, &relations, &info);
            if engine.config.test_functions {
                crate::pg::session_functions::register_test_functions(&ctx);
            }
            ctx
        };
        Self {
            ctx: make(false),
            dml_ctx: make(true),
            engine,
            vars,
            user: user.to_string(),
            notices: Vec::new(),
            live_notices: None,
            changed: Vec::new(),
            block: None,
            copy: None,
            cursors: Default::default(),
            point_plans: Default::default(),
        }
    }

    /// The connected user.
    pub fn user(&self) -> &str {
        &self.user
    }



    /// The schema unqualified names resolve to.
    pub fn default_schema(&self) -> String {
        let first = first_schema(&self.vars.read());
        if self.engine.catalog().schema(&first).is_some() {
            first
        } else {
            "public".into()
        }
    }

    /// Queues a NOTICE for the client.
    pub(crate) fn notice(&mut self, msg: &str) {
        self.notices.push(msg.to_string());
    }

    /// Sends a NOTICE to the client at once, while the statement still runs (dropped if the
    /// wire layer does not listen: a late progress report is of no use).
    pub(crate) fn live_notice(&self, msg: String) {
        if let Some(tx) = &self.live_notices {
            // No listener: the notice is dropped, as the doc says.
            let _ = tx.send(msg);
        }
    }

    /// Lets the wire layer receive NOTICEs while statements run (`None`: stop).
    pub fn set_live_notices(&mut self, tx: Option<tokio::sync::mpsc::UnboundedSender<String>>) {
        self.live_notices = tx;
    }

    /// Takes the queued NOTICEs.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Takes the settings to report as ParameterStatus.
    pub fn take_changed_settings(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.changed)
    }

    /// Sets a setting from the connection's startup packet or `options` (`-c name=value`).
    pub fn set_startup_var(&mut self, name: &str, value: &str) {
        let key = canonical_var(name);
        let value = value.trim_matches('\'').to_string();
        self.vars.write().insert(key, value);
    }

    /// Current value of setting `name`.
    pub fn var(&self, name: &str) -> Option<String> {
        self.vars.read().get(&canonical_var(name)).cloned()
    }

    pub(crate) fn state(&self, dml: bool) -> SessionState {
        let mut state = if dml { self.dml_ctx.state() } else { self.ctx.state() };
        state.config_mut().set_extension(Arc::new(QuerySnapshot(self.engine.store.snapshot())));
        if self.block.is_some() {
            state.config_mut().set_extension(Arc::new(TxnOverlay(self.overlay())));
        }
        let schema = self.default_schema();
        state.config_mut().options_mut().catalog.default_schema = schema;
        state
    }

    pub(crate) async fn plan(&self, stmt: &Statement, dml: bool) -> Result<(SessionState, LogicalPlan)> {
        let state = self.state(dml);
        let mut stmt = stmt.clone();
        self.expand_views_in(&mut stmt)?;
        self.update_assignments(&mut stmt)?;
        self.insert_date_literals(&mut stmt);
        let update_from = self.update_from_query(&stmt)?;
        if let Some(u) = &update_from {
            stmt = u.query.clone();
        }
        if let Statement::Query(q) = &mut stmt {
            if let Some(applied) = self.apply_correlated(q).await {
                **q = applied;
            }
        }
        crate::pg::rewrite_statement(&mut stmt)?;
        // After the PostgreSQL rewrites, which name the column after the cast's type.
        self.rewrite_enum_casts(&mut stmt);
        let mut plan = state.statement_to_plan(DFStatement::Statement(Box::new(stmt))).await?;
        if let Some(u) = &update_from {
            plan = u.plan(&state, plan).await?;
        }
        crate::planner::parse::check_plan(&plan)?;
        let plan = crate::pg::rewrite_plan(plan)?;
        Ok((recursive_safe(state, &plan), plan))
    }

    /// A context for queries over in-memory tables (RETURNING, ON CONFLICT): the session's
    /// settings and functions, with a default catalog to register tables in.
    pub(crate) fn scratch_context(&self) -> SessionContext {
        let mut config = SessionConfig::new();
        config.options_mut().sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
        config.options_mut().execution.time_zone = Some("+00:00".to_string());
        config.options_mut().sql_parser.parse_float_as_decimal = true;
        config.options_mut().sql_parser.map_string_types_to_utf8view = false;
        let ctx = SessionContext::new_with_config(config);
        for udf in self.ctx.state().scalar_functions().values() {
            ctx.register_udf(udf.as_ref().clone());
        }
        ctx
    }

    /// Plans and runs a query statement given as text, collecting its rows.
    pub(crate) async fn run_query(&self, sql: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let stmt = crate::planner::parse::parse_bounded(sql)?
            .pop()
            .ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "empty query"))?;
        let (state, plan) = Box::pin(self.plan(&stmt, false)).await?;
        let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
        Ok((schema, DataFrame::new(state, plan).collect().await?))
    }

    /// Evaluates column `col`'s DEFAULT for `n` rows.
    pub(crate) fn evaluate_default(&self, table: &crate::catalog::TableCatalog, col: usize, n: usize) -> Result<arrow::array::ArrayRef> {
        let defaults = crate::planner::provider::column_defaults(self.engine.as_ref(), table);
        let Some(expr) = defaults.get(&table.columns[col].name) else {
            return Ok(arrow::array::new_null_array(&table.columns[col].ty.to_arrow(), n));
        };
        let state = self.ctx.state();
        let df_schema = datafusion::common::DFSchema::empty();
        // Time functions (`now()`) are constants of the statement: fold them as DataFusion's
        // optimizer would before turning the expression into a physical one.
        let context = datafusion::logical_expr::simplify::SimplifyContext::builder()
            .with_schema(Arc::new(df_schema.clone()))
            .with_config_options(Arc::new(state.config_options().as_ref().clone()))
            .with_current_time()
            .build();
        let expr = datafusion::optimizer::simplify_expressions::ExprSimplifier::new(context).simplify(expr.clone())?;
        let physical = state.create_physical_expr(expr, &df_schema)?;
        let batch = RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            vec![],
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        let arr = physical.evaluate(&batch)?.into_array(n)?;
        Ok(arrow::compute::cast(&arr, &table.columns[col].ty.to_arrow())?)
    }
}

/// The execution environment of one session's queries: a memory pool of `bytes` (a session
/// runs one query at a time, so this is the per-query budget). Operators that can spill (sort,
/// aggregation, join) spill to the OS temp directory when their share is used up; others fail
/// with DataFusion's ResourcesExhausted, reported as `53200`. Falls back to an unbounded
/// environment only if the bounded one cannot be built.
fn query_runtime(bytes: usize) -> Arc<datafusion::execution::runtime_env::RuntimeEnv> {
    use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
    use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
    let pool = TrackConsumersPool::new(FairSpillPool::new(bytes), std::num::NonZeroUsize::MIN.saturating_add(2));
    RuntimeEnvBuilder::new().with_memory_pool(Arc::new(pool)).build_arc().unwrap_or_else(|e| {
        tracing::error!("cannot build a bounded query runtime ({e}); queries run without a memory limit");
        Arc::new(RuntimeEnv::default())
    })
}

/// `schema` with the output names clients see (repeated names unmarked, see
/// [`crate::planner::names::DUPLICATE_MARK`]).
/// Runs `f` (planning and starting a query) off the async worker. DataFusion's optimizer is
/// synchronous and exponential in some shapes (16 joins on nested COALESCE conditions: seconds),
/// and a worker busy that long stalls every connection: the worker that last polled the IO
/// driver holds it, and no idle worker takes it over (another session's `SELECT 1` waited 8 s).
/// `block_in_place` hands the worker's queue and the driver to another thread first.
pub(crate) async fn off_worker<F: std::future::Future>(f: F) -> F::Output {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(|| h.block_on(f)),
        _ => f.await,
    }
}

pub(crate) fn client_schema(schema: &Schema) -> SchemaRef {
    use crate::planner::names::output_name;
    if !schema.fields().iter().any(|f| output_name(f.name()) != f.name()) {
        return Arc::new(schema.clone());
    }
    let fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone().with_name(output_name(f.name()))).collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// Refuses a relation definition whose columns repeat a name (PostgreSQL's 42701).
pub(crate) fn unique_column_names<'a>(names: impl Iterator<Item = &'a str>) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(user_err!(sqlstate::DUPLICATE_COLUMN, "column \"{n}\" specified more than once"));
        }
    }
    Ok(())
}

/// Plans `sql` (with the PostgreSQL rewrites) in a scratch context holding in-memory tables and
/// runs it: the client-visible schema and the rows.
pub(crate) async fn run_scratch(ctx: &SessionContext, sql: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let mut stmt = crate::planner::parse::parse_bounded(sql)?
        .pop()
        .ok_or_else(|| user_err!(sqlstate::SYNTAX_ERROR, "empty statement"))?;
    crate::pg::rewrite_statement(&mut stmt)?;
    let state = ctx.state();
    let plan = state.statement_to_plan(DFStatement::Statement(Box::new(stmt))).await?;
    crate::planner::parse::check_plan(&plan)?;
    let plan = crate::pg::rewrite_plan(plan)?;
    let schema = client_schema(plan.schema().as_arrow());
    Ok((schema, DataFrame::new(state, plan).collect().await?))
}

/// `state` for running `plan`: without DataFusion's projection pruning when the plan has a
/// recursive CTE, which that rule breaks when the outer query reads only some of the CTE's
/// columns (it prunes the static term and the work table's output but not what the recursive
/// term reads: "project index 1 out of bounds").
fn recursive_safe(state: SessionState, plan: &LogicalPlan) -> SessionState {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut recursive = false;
    let _ = plan.apply_with_subqueries(|n| {
        recursive |= matches!(n, LogicalPlan::RecursiveQuery(_));
        Ok(if recursive { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    if !recursive {
        return state;
    }
    let rules = state.optimizer().rules.iter().filter(|r| r.name() != "optimize_projections").cloned().collect();
    datafusion::execution::session_state::SessionStateBuilder::new_from_existing(state).with_optimizer_rules(rules).build()
}
