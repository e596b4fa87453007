//! Materialized views: CREATE (plan, subscribe at a barrier, backfill, commit), DROP, VERIFY,
//! EXPLAIN and SHOW CREATE.
//!
//! Creation protocol: the view's actor is subscribed to its upstream by a barrier mutation at
//! epoch E; it backfills from the snapshot of E and then consumes the changes of E+1 onward.
//! Its catalog entry commits in the first epoch its backfilled state commits in, so a crash at
//! any point leaves either no view or a complete one.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::row::{RowConverter, SortField};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::collect;
use datafusion::sql::sqlparser::ast::{Ident, ObjectName, Query, Statement};
use eddy_common::error::sqlstate;
use eddy_common::{internal_err, user_err, Result};
use eddy_storage::{EpochBatch, ReadSnapshot};
use eddy_stream::operator::Materialize;
use eddy_stream::{Mutation, Target, BACKFILL_EPOCH_ROWS};

use crate::catalog::{CatalogChange, RelationKind, TableCatalog};
use crate::engine::views::BackfillStart;
use crate::engine::ViewOperators;
use crate::frontend::names::resolve_name;
use crate::frontend::session::Session;
use crate::planner::stream_plan::{check_deterministic, plan_view, PlannedView, TableIds};


impl Session {
    /// The optimized logical plan of a view's query.
    async fn view_plan(&self, query: &Query) -> Result<(datafusion::execution::SessionState, LogicalPlan)> {
        let (state, plan) = self.plan(&Statement::Query(Box::new(query.clone())), false).await?;
        let plan = crate::planner::arbitrary::settle_arbitrary_choices(plan)?;
        // `now()` in a filter is a temporal filter, kept out of constant folding.
        let plan = crate::planner::temporal::rewrite_now(plan)?;
        check_deterministic(&plan)?;
        // A view keeps every subquery incremental: uncorrelated scalar subqueries become joins
        // too, instead of being left for a one-off physical evaluation.
        let mut config = state.config().clone();
        config.options_mut().optimizer.enable_physical_uncorrelated_scalar_subquery = false;
        let state = datafusion::execution::SessionStateBuilder::new_from_existing(state).with_config(config).build();
        let optimized = state.optimize(&plan)?;
        Ok((state, optimized))
    }

    /// `query` as the text a view keeps, parsed again at every start. sqlparser writes a unary
    /// operator straight before its operand, so `- - a` came back as `--a`, a comment (and
    /// `- @ a` as `-@a`): such operands are parenthesized. A text that does not parse back is
    /// refused here rather than stored.
    pub(crate) fn stored_query_text(query: &Query) -> Result<String> {
        use datafusion::sql::sqlparser::ast::{visit_expressions_mut, Expr, Value};
        let mut q = query.clone();
        let _ = visit_expressions_mut(&mut q, |e| {
            if let Expr::UnaryOp { expr, .. } = e {
                if matches!(expr.as_ref(), Expr::UnaryOp { .. }) {
                    let operand = std::mem::replace(expr.as_mut(), Expr::value(Value::Null));
                    **expr = Expr::Nested(Box::new(operand));
                }
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        let text = q.to_string();
        Self::parse_query(&text)?;
        Ok(text)
    }

    pub(crate) fn parse_query(text: &str) -> Result<Query> {
        let mut stmts = crate::planner::parse::parse_bounded(text).map_err(|e| internal_err!("stored view query does not parse: {e}"))?;
        match stmts.pop() {
            Some(Statement::Query(q)) => Ok(*q),
            _ => Err(internal_err!("stored view query is not a query")),
        }
    }

    /// Recovery: the stream plan of an existing view, with state restored from `snapshot`;
    /// its root stage ends in `Materialize`.
    pub(crate) async fn view_operators(&mut self, view: &TableCatalog, snapshot: Option<&ReadSnapshot>) -> Result<PlannedView> {
        let text = view.query.as_deref().ok_or_else(|| internal_err!("view {} has no query", view.name))?;
        let query = Self::parse_query(text)?;
        let (_, plan) = self.view_plan(&query).await?;
        let mut ids = TableIds::Reuse(view.internal_tables.iter());
        let mut planned = plan_view(&plan, &mut ids, snapshot, view.emit_on_window_close, view.parallelism > 1).await?;
        let terminal: Box<dyn eddy_stream::operator::Operator> = if view.kind == RelationKind::Sink {
            let log = *view.internal_tables.last().ok_or_else(|| internal_err!("sink {} has no log", view.name))?;
            let next_seq = match snapshot {
                Some(s) => eddy_stream::sink::restored_next_seq(log, s).await?,
                None => 0,
            };
            self.sink_log(view, planned.append_only, next_seq)?
        } else {
            Box::new(Materialize::new(view.state_table()?))
        };
        planned.root_mut()?.operators.push(terminal);
        Ok(planned)
    }

    /// Plans a new view's query, with the number of actors per fragment it will run with: as
    /// many as the session asks for if the plan can be split (then planned for parallel
    /// actors), else one (a sink's log is written by one actor).
    async fn plan_new_view(&self, plan: &LogicalPlan, ids: &mut TableIds<'_>, emit_on_window_close: bool, sink: bool) -> Result<(PlannedView, usize)> {
        let want = self.streaming_parallelism();
        if want > 1 && !sink {
            let planned = plan_view(plan, ids, None, emit_on_window_close, true).await?;
            if crate::engine::views::chain_can_run_parallel(&planned.branches, &planned.stages) {
                return Ok((planned, want));
            }
            let tables = planned.internal_tables.clone();
            let mut again = TableIds::Reuse(tables.iter());
            return Ok((plan_view(plan, &mut again, None, emit_on_window_close, false).await?, 1));
        }
        Ok((plan_view(plan, ids, None, emit_on_window_close, false).await?, 1))
    }

    /// The last operator of a new view: its `Materialize`, or a sink's log.
    fn terminal(&self, view: &TableCatalog, append_only: bool) -> Result<Box<dyn eddy_stream::operator::Operator>> {
        Ok(if view.kind == RelationKind::Sink { self.sink_log(view, append_only, 0)? } else { Box::new(Materialize::new(view.state_table()?)) })
    }

    /// Actors per fragment for a new view (`SET streaming_parallelism`; 0: one per core).
    fn streaming_parallelism(&self) -> usize {
        match self.var("streaming_parallelism").and_then(|v| v.parse::<usize>().ok()) {
            Some(n) if n > 0 => n,
            _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
        .min(usize::from(eddy_common::codec::VNODE_COUNT))
    }

    /// `CREATE MATERIALIZED VIEW`, or with `sink` (its options), `CREATE SINK`: the same
    /// maintained query, ending in the sink's log instead of a state table.
    /// `query` with its output columns named by `column_names` (`CREATE MATERIALIZED VIEW v (a, b)
    /// AS ...`): `SELECT * FROM (query) AS v(a, b, ...)`, the columns past the list keeping their
    /// names, as PostgreSQL names them.
    async fn with_column_names(&mut self, view: &str, query: Query, column_names: &[Ident]) -> Result<Query> {
        use datafusion::sql::sqlparser::ast::{SelectItem, SetExpr};
        let listed: Vec<String> = column_names.iter().map(|c| crate::frontend::names::normalize_ident(&c.to_string())).collect();
        if let Some(dup) = listed.iter().enumerate().find(|(i, n)| listed[..*i].contains(n)).map(|(_, n)| n) {
            return Err(user_err!(sqlstate::DUPLICATE_COLUMN, "column \"{dup}\" specified more than once"));
        }
        let planned = self.view_plan(&query).await;
        let shared_names = planned.as_ref().map_or(true, |(_, plan)| {
            let names: Vec<&str> = plan.schema().fields().iter().map(|f| crate::planner::names::output_name(f.name())).collect();
            names.iter().enumerate().any(|(i, n)| names[..i].contains(n))
        });
        // A plain SELECT list whose items share a name (`SELECT a, a`, which does not plan as
        // a derived table) is renamed in place.
        if let (true, SetExpr::Select(select)) = (shared_names, query.body.as_ref()) {
            if select.projection.iter().all(|i| matches!(i, SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. })) {
                if listed.len() > select.projection.len() {
                    return Err(user_err!(sqlstate::SYNTAX_ERROR, "too many column names were specified"));
                }
                let mut renamed = query.clone();
                if let SetExpr::Select(select) = renamed.body.as_mut() {
                    for (item, name) in select.projection.iter_mut().zip(&listed) {
                        if let SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } = item {
                            *item = SelectItem::ExprWithAlias { expr: expr.clone(), alias: Ident::with_quote('"', name.clone()) };
                        }
                    }
                }
                return Ok(renamed);
            }
        }
        let (_, plan) = planned?;
        let fields = plan.schema().fields();
        if listed.len() > fields.len() {
            return Err(user_err!(sqlstate::SYNTAX_ERROR, "too many column names were specified"));
        }
        let mut names: Vec<String> = Vec::with_capacity(fields.len());
        for (i, f) in fields.iter().enumerate() {
            let name = listed.get(i).cloned().unwrap_or_else(|| crate::planner::names::output_name(f.name()).to_string());
            if names.contains(&name) {
                return Err(user_err!(sqlstate::DUPLICATE_COLUMN, "column \"{name}\" specified more than once"));
            }
            names.push(name);
        }
        let quote = |n: &str| format!("\"{}\"", n.replace('"', "\"\""));
        let columns: Vec<String> = names.iter().map(|n| quote(n)).collect();
        let sql = format!("SELECT * FROM ({query}) AS {}({})", quote(view), columns.join(", "));
        let parsed = datafusion::sql::sqlparser::parser::Parser::parse_sql(&datafusion::sql::sqlparser::dialect::PostgreSqlDialect {}, &sql);
        match parsed.map_err(|e| internal_err!("a renamed view query does not parse: {e}"))?.pop() {
            Some(Statement::Query(q)) => Ok(*q),
            _ => Err(internal_err!("a renamed view query is not a query")),
        }
    }

    pub(crate) async fn create_mview(
        &mut self,
        name: &ObjectName,
        column_names: &[Ident],
        query: &Query,
        if_not_exists: bool,
        sql: &str,
        sink: Option<std::collections::BTreeMap<String, String>>,
    ) -> Result<()> {
        let (schema, name) = resolve_name(self, name)?;
        {
            let cat = self.engine.catalog();
            cat.require_schema(&schema)?;
            if cat.table(&schema, &name).is_some() || self.engine.creating.named(&schema, &name).is_some() {
                drop(cat);
                if if_not_exists {
                    self.notice(&format!("relation \"{name}\" already exists, skipping"));
                    return Ok(());
                }
                return Err(user_err!(sqlstate::DUPLICATE_TABLE, "relation \"{name}\" already exists"));
            }
        }
        // The view keeps its query with plain views expanded: replacing one of them later
        // must not change what this view computes (or what its recovery re-plans).
        let mut expanded = query.clone();
        let direct = self.expand_views(&mut expanded)?;
        if !column_names.is_empty() {
            expanded = self.with_column_names(&name, expanded, column_names).await?;
        }
        let query = &expanded;
        let (_, plan) = self.view_plan(query).await?;
        let engine = self.engine.clone();
        let mut alloc = || engine.allocate_id();
        let mut ids = TableIds::Allocate(&mut alloc);
        let emit_on_window_close = crate::frontend::split::take_emit_on_window_close(sql).is_some();
        let (mut planned, n) = self.plan_new_view(&plan, &mut ids, emit_on_window_close, sink.is_some()).await?;
        let id = self.engine.allocate_id();
        if sink.is_some() {
            // The sink's log, last of its internal tables.
            planned.internal_tables.push(self.engine.allocate_id());
        }
        // A constant input reads no relation.
        let mut dependencies: Vec<u32> = planned.branches.iter().filter(|b| b.constant.is_none()).map(|b| b.upstream.id).chain(direct).collect();
        dependencies.sort_unstable();
        dependencies.dedup();
        let view = TableCatalog {
            id,
            schema,
            name: name.clone(),
            kind: if sink.is_some() { RelationKind::Sink } else { RelationKind::MaterializedView },
            columns: planned.columns,
            pk: planned.pk,
            definition: sql.trim().trim_end_matches(';').to_string(),
            query: Some(Self::stored_query_text(query)?),
            dependencies,
            internal_tables: planned.internal_tables,
            comments: Default::default(),
            on_conflict: Default::default(),
            // Views on this one see its watermark and whether it only inserts.
            append_only: planned.append_only,
            watermark: planned.watermark_column.clone().map(|column| crate::catalog::WatermarkDef { column, delay_us: 0 }),
            emit_on_window_close,
            parallelism: 1,
            with_options: sink.unwrap_or_default(),
            checks: vec![],
            derived: Default::default(),
        };
        if view.kind == RelationKind::Sink {
            let spec = crate::frontend::sink::sink_spec(&view, planned.append_only)?;
            eddy_connector::sink::prepare(&spec).await?;
        }
        let terminal = self.terminal(&view, planned.append_only)?;
        let root = planned.stages.last_mut().ok_or_else(|| internal_err!("a view plan without a root stage"))?;
        root.operators.push(terminal);
        let mut readers: Vec<u32> = planned.branches.iter().filter_map(|b| b.reader).collect();
        readers.sort_unstable();
        readers.dedup();
        // One actor, or as many per fragment as the session asks for if the view's operators
        // can be split by key: then the query is planned once per actor.
        let mut builds = vec![ViewOperators { branches: planned.branches, stages: planned.stages }];
        for _ in 1..n {
            let mut ids = TableIds::Reuse(view.internal_tables.iter());
            let mut more = plan_view(&plan, &mut ids, None, emit_on_window_close, true).await?;
            let terminal = self.terminal(&view, more.append_only)?;
            more.root_mut()?.operators.push(terminal);
            builds.push(ViewOperators { branches: more.branches, stages: more.stages });
        }
        let view = TableCatalog { parallelism: n as u32, ..view };
        let rows_per_epoch = self.var("backfill_epoch_rows").and_then(|v| v.parse().ok()).unwrap_or(BACKFILL_EPOCH_ROWS);
        let background = view.kind == RelationKind::MaterializedView && self.var("background_ddl").is_some_and(|v| v == "true");
        // The ids just taken are durable before any state is written under them: a crash
        // during the backfill must not let a later relation reuse them (and find that state).
        // A background creation's record commits with them, so a restart resumes it.
        let mut mark = EpochBatch::default();
        mark.put(eddy_common::codec::NEXT_ID_KEY.to_vec(), self.engine.catalog().next_id().to_be_bytes().to_vec());
        if background {
            let record = crate::engine::background::CreatingRecord { view: view.clone(), rows_per_epoch };
            let record = serde_json::to_vec(&record).map_err(|e| internal_err!("creation record encode: {e}"))?;
            mark.put(eddy_common::codec::creating_key(id), record);
        }
        self.engine.barrier.commit_writes(mark).await?;
        let start = BackfillStart { rows_per_epoch, resume: false, record_positions: background };
        let mut started = self.engine.start_view(&view, builds, vec![], Some(start), None).await?;
        let mut add_outputs: HashMap<u32, Vec<Target>> = HashMap::new();
        for (upstream, o) in std::mem::take(&mut started.upstream_outputs) {
            add_outputs.entry(upstream).or_default().push(o);
        }
        let metrics = started.metrics.clone();
        let actors = started.actors.clone();
        let handles = started.backfill.take().ok_or_else(|| internal_err!("a new view without a backfill"))?;
        started.spawn(&self.engine);
        let mutation = Mutation { add_outputs, start: readers.clone(), ..Default::default() };
        let epoch = self.engine.barrier.inject(mutation, actors.clone()).await?;
        for tx in handles.epochs {
            // Fails only if the actor already ended; its failure is reported (view_failure below).
            let _ = tx.send(epoch);
        }
        if background {
            // An engine task commits the view when its backfill is done (`WAIT` waits for it).
            self.engine.complete_in_background(view, actors, handles.done);
            return Ok(());
        }
        // The view is complete when every actor that backfills is.
        let done_rx = crate::engine::background::backfill_done(handles.done);
        // The backfill runs over as many epochs as it needs; the catalog entry commits only
        // after the view's state is complete, so no reader ever sees a partial view.
        let every = self
            .var("backfill_progress_interval")
            .and_then(|v| crate::frontend::settings::parse_progress_interval(&v).ok())
            .map_or(PROGRESS_NOTICE_INTERVAL, std::time::Duration::from_millis);
        let mut done_rx = std::pin::pin!(done_rx);
        let started = std::time::Instant::now();
        let done = loop {
            tokio::select! {
                done = &mut done_rx => break done,
                _ = tokio::time::sleep(every), if !every.is_zero() => self.live_notice(progress_notice(&view.name, &metrics.backfill.report())),
            }
        };
        // A backfill long enough to have been reported on says that it finished.
        if done.is_ok() && started.elapsed() >= every {
            self.live_notice(progress_notice(&view.name, &metrics.backfill.report()));
        }
        if done.is_err() {
            self.engine.forget_view_metrics(id);
            // The actor's failure report reaches the barrier manager with the next barrier.
            if let Err(e) = self.engine.barrier.flush().await {
                tracing::warn!("no barrier after the failed backfill of {}: {e}", view.name);
            }
            // The query's own error, as PostgreSQL's CREATE reports it (`SELECT 1/0` is 22012).
            let err = self.engine.barrier.failure(view.id).unwrap_or_else(|| {
                user_err!(sqlstate::SERIALIZATION_FAILURE, "the backfill of materialized view \"{}\" was interrupted by a server recovery; retry the statement", view.name)
            });
            // The view's other actors (of a parallel view) and its readers still run.
            self.engine.stop_view_actors(&view, &actors).await;
            self.engine.discard_view_state(&view).await;
            return Err(err);
        }
        let result = self
            .engine
            .ddl(|cat| {
                if cat.table(&view.schema, &view.name).is_some() {
                    return Err(user_err!(sqlstate::DUPLICATE_TABLE, "relation \"{}\" already exists", view.name));
                }
                if view.dependencies.iter().any(|d| cat.by_id(*d).is_none()) {
                    return Err(user_err!(sqlstate::UNDEFINED_TABLE, "the relation the view reads was dropped"));
                }
                Ok((vec![CatalogChange::CreateTable(view.clone())], EpochBatch::default()))
            })
            .await;
        if let Err(e) = result {
            self.engine.stop_view_actors(&view, &actors).await;
            return Err(e);
        }
        if let Some(err) = self.engine.barrier.failure(view.id) {
            // The backfill hit an error (the query's own, or an internal fault). As in PostgreSQL, a CREATE that fails creates
            // nothing: drop the entry that committed with the failure, and the view's state.
            if let Some(created) = self.engine.catalog().by_id(id).cloned() {
                if let Err(e) = self.drop_relation(created, false).await {
                    tracing::warn!("materialized view {} failed while being created and could not be dropped: {e}", view.name);
                }
            }
            return Err(err);
        }
        Ok(())
    }

    /// Drops `rel` (a table or view) and, with `cascade`, the views that read it.
    pub(crate) async fn drop_relation(&mut self, rel: Arc<TableCatalog>, cascade: bool) -> Result<()> {
        let dependents = self.engine.catalog().dependents(rel.id);
        // Views being created in the background that read it are cancelled with CASCADE.
        let creating = self.engine.creating.reading(rel.id);
        if !creating.is_empty() {
            if !cascade {
                let names: Vec<String> = creating.iter().map(|(_, n)| format!("materialized view {n} (being created)")).collect();
                return Err(user_err!(
                    sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                    "cannot drop {} {} because other objects depend on it: {}; use DROP ... CASCADE to drop them too",
                    rel.kind_name(),
                    rel.name,
                    names.join(", ")
                ));
            }
            for (id, _) in creating {
                self.engine.cancel_creating(id).await?;
            }
        }
        if !dependents.is_empty() {
            if !cascade {
                let names: Vec<String> = dependents.iter().map(|d| format!("{} {}", d.kind_name(), d.name)).collect();
                let what = rel.kind_name();
                return Err(user_err!(
                    sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                    "cannot drop {what} {} because other objects depend on it: {}; use DROP ... CASCADE to drop them too",
                    rel.name,
                    names.join(", ")
                ));
            }
            for d in dependents {
                // Dropping an earlier dependent may have dropped this one (it read both).
                if self.engine.catalog().by_id(d.id).is_none() {
                    continue;
                }
                Box::pin(self.drop_relation(d, true)).await?;
            }
        }
        if rel.kind == RelationKind::View {
            return self.drop_plain_view(rel).await;
        }
        // Stop the actor first: after this barrier nothing writes the relation any more.
        let stop = std::iter::once(rel.id).chain(rel.internal_tables.iter().copied()).chain(self.engine.view_actors(rel.id)).collect();
        self.engine.barrier.inject(Mutation { stop, ..Default::default() }, vec![]).await?;
        self.engine.forget_view_actors(rel.id);
        self.engine.remove_source(rel.id);
        self.engine.forget_readers(&rel.internal_tables);
        self.engine.forget_view_metrics(rel.id);
        let batch = self.engine.state_deletes(&rel).await?;
        self.engine.barrier.forget_failure(rel.id);
        let id = rel.id;
        self.engine
            .ddl(|cat| {
                let t = cat.by_id(id).cloned().ok_or_else(|| user_err!(sqlstate::UNDEFINED_TABLE, "relation was dropped concurrently"))?;
                Ok((vec![CatalogChange::DropTable(t)], batch))
            })
            .await
    }

    /// `VERIFY MATERIALIZED VIEW name`: recomputes the view's query in batch over the same
    /// snapshot and compares the result with the maintained contents as multisets.
    pub(crate) async fn verify_mview(&mut self, name: &str) -> Result<Vec<String>> {
        let view = self.lookup_view(name)?;
        let query = Self::parse_query(view.query.as_deref().unwrap_or_default())?;
        let (state, plan) = self.plan(&Statement::Query(Box::new(query)), false).await?;
        let plan = crate::planner::arbitrary::settle_arbitrary_choices(plan)?;
        let snapshot = state
            .config()
            .get_extension::<crate::planner::provider::QuerySnapshot>()
            .map(|s| s.0.clone())
            .ok_or_else(|| internal_err!("statement has no snapshot"))?;
        // A view with failing input rows is right when the query fails the same way.
        let view_error = crate::planner::provider::view_row_errors(&view, &snapshot).await?;
        let computed = match state.create_physical_plan(&plan).await {
            Ok(p) => collect(p, state.task_ctx()).await.map_err(eddy_common::EddyError::from),
            Err(e) => Err(e.into()),
        };
        let expected_batches = match (view_error, computed) {
            (Some(v), Err(q)) if v.sqlstate == q.sqlstate => return Ok(vec!["OK".into()]),
            (Some(v), Err(q)) => return Ok(vec![format!("MISMATCH: the view fails with {}: {}, the query with {}: {}", v.sqlstate, v.message, q.sqlstate, q.message)]),
            (Some(v), Ok(_)) => return Ok(vec![format!("MISMATCH: the view fails with {}: {} but the query succeeds", v.sqlstate, v.message)]),
            (None, Err(q)) if q.kind == eddy_common::ErrorKind::User && q.sqlstate.starts_with("22") => {
                return Ok(vec![format!("MISMATCH: the query fails with {}: {} but the view has no failing rows", q.sqlstate, q.message)]);
            }
            (None, Err(q)) => return Err(q),
            (None, Ok(b)) => b,
        };
        let st = view.state_table()?;
        let visible = view.visible_indices();
        let actual_batches: Vec<RecordBatch> = st.scan(&snapshot).await?.iter().map(|b| b.project(&visible)).collect::<Result<_, _>>()?;
        let schema = view.user_schema();
        let conv = RowConverter::new(schema.fields().iter().map(|f| SortField::new(f.data_type().clone())).collect())?;
        let encode = |batches: &[RecordBatch]| -> Result<Vec<Vec<u8>>> {
            let mut out = Vec::new();
            for b in batches {
                let cols = b
                    .columns()
                    .iter()
                    .zip(schema.fields())
                    .map(|(c, f)| Ok(canonical_floats(arrow::compute::cast(c, f.data_type())?)))
                    .collect::<Result<Vec<ArrayRef>>>()?;
                out.extend(conv.convert_columns(&cols)?.iter().map(|r| r.as_ref().to_vec()));
            }
            out.sort();
            Ok(out)
        };
        let expected = encode(&expected_batches)?;
        let actual = encode(&actual_batches)?;
        if expected == actual {
            return Ok(vec!["OK".into()]);
        }
        let mut diffs = Vec::new();
        let (mut i, mut j) = (0, 0);
        while (i < expected.len() || j < actual.len()) && diffs.len() < 10 {
            let pick = match (expected.get(i), actual.get(j)) {
                (Some(e), Some(a)) if e == a => {
                    i += 1;
                    j += 1;
                    continue;
                }
                (Some(e), Some(a)) if e < a => ("missing", e.clone(), &mut i),
                (Some(_), Some(a)) => ("unexpected", a.clone(), &mut j),
                (Some(e), None) => ("missing", e.clone(), &mut i),
                (None, Some(a)) => ("unexpected", a.clone(), &mut j),
                (None, None) => break,
            };
            *pick.2 += 1;
            let parser = conv.parser();
            let cols = eddy_common::codec::decode_rows(&conv, [parser.parse(&pick.1)])?;
            let vals: Vec<String> = cols.iter().map(|c| arrow::util::display::array_value_to_string(c, 0).unwrap_or_default()).collect();
            diffs.push(format!("{} row: ({})", pick.0, vals.join(", ")));
        }
        diffs.insert(0, format!("MISMATCH: view has {} rows, query has {}", actual.len(), expected.len()));
        Ok(diffs)
    }

    /// The view named `name` (schema-qualified or not).
    pub(crate) fn lookup_view(&self, name: &str) -> Result<Arc<TableCatalog>> {
        let parsed = ObjectName::from(
            name.split('.').map(|p| datafusion::sql::sqlparser::ast::Ident::new(p.trim())).collect::<Vec<_>>(),
        );
        let (schema, n) = resolve_name(self, &parsed)?;
        let t = self
            .engine
            .catalog()
            .table(&schema, &crate::frontend::names::normalize_ident(&n))
            .cloned()
            .ok_or_else(|| user_err!(sqlstate::UNDEFINED_TABLE, "materialized view \"{n}\" does not exist"))?;
        if !t.is_view() {
            return Err(user_err!(sqlstate::WRONG_OBJECT_TYPE, "\"{n}\" is not a materialized view"));
        }
        Ok(t)
    }

    /// `EXPLAIN CREATE MATERIALIZED VIEW`: the stream plan, without creating anything.
    pub(crate) async fn explain_mview(&mut self, query: &Query, emit_on_window_close: bool) -> Result<Vec<String>> {
        let (_, plan) = self.view_plan(query).await?;
        let mut next = 0u32;
        let mut alloc = || {
            next += 1;
            next
        };
        let mut ids = TableIds::Allocate(&mut alloc);
        let (planned, n) = self.plan_new_view(&plan, &mut ids, emit_on_window_close, false).await?;
        let mut lines = vec!["StreamPlan".to_string()];
        // (The plan in one piece first, then its fragments.)
        for (b, branch) in planned.branches.iter().enumerate() {
            lines.push(format!("  input {b}: reads {} -> stage {} ({:?})", branch.upstream.name, branch.parent.0, branch.parent.1));
            for op in &branch.operators {
                lines.push(format!("    {op}"));
            }
        }
        for (s, stage) in planned.stages.iter().enumerate() {
            match stage.parent {
                Some((p, side)) => lines.push(format!("  stage {s} -> stage {p} ({side:?})")),
                None => lines.push(format!("  stage {s} (root)")),
            }
            if let Some(join) = &stage.join {
                lines.push(format!("    {join}"));
            }
            for op in &stage.operators {
                lines.push(format!("    {op}"));
            }
        }
        let key: Vec<&str> = planned.pk.iter().map(|&k| planned.columns[k].name.as_str()).collect();
        lines.push(format!("  Materialize key=[{}] (vnode = hash(key) % 256)", key.join(", ")));
        lines.push(format!("state tables: view + {} operator table(s)", planned.internal_tables.len()));
        if n == 1 {
            lines.push("fragment 0: 1 actor runs the whole view".to_string());
            return Ok(lines);
        }
        // Where the tree is cut (see `engine::fragments`): before each operator partitioned
        // by key, and at each join.
        let fragments = crate::engine::fragments::cut(ViewOperators { branches: planned.branches, stages: planned.stages })?;
        let last = fragments.len() - 1;
        for (f, fragment) in fragments.iter().enumerate() {
            let to = if f == last { "the view (a merger joins its actors' changes for views on it)".to_string() } else { "an exchange".to_string() };
            lines.push(format!("fragment {f}: {n} actors -> {to}"));
            for (k, input) in fragment.inputs.iter().enumerate() {
                let from = match &input.source {
                    crate::engine::fragments::Source::Upstream(b) => format!("reads its vnodes of {}", b.upstream.name),
                    crate::engine::fragments::Source::Exchange(g, _) => format!("from fragment {g}, routed by key"),
                };
                lines.push(format!("  input {k}: {from} -> stage {} ({:?})", input.parent.0, input.parent.1));
                lines.extend(input.operators.iter().map(|op| format!("    {op}")));
            }
            for (s, stage) in fragment.stages.iter().enumerate() {
                lines.push(format!("  stage {s}"));
                lines.extend(stage.join.iter().map(|j| format!("    {j}")));
                lines.extend(stage.operators.iter().map(|op| format!("    {op}")));
            }
        }
        Ok(lines)
    }
}

/// Floats as PostgreSQL compares them: every NaN equal (x86 makes `inf - inf` a NaN with the
/// sign bit set), and -0 equal to 0; and rounded to 12 significant digits, since a view sums
/// in arrival order (with retractions) and the recomputation in another order.
fn round_float(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x == 0.0 || !x.is_finite() {
        return x + 0.0;
    }
    format!("{x:.11e}").parse().unwrap_or(x)
}

/// See [`round_float`].
fn canonical_floats(a: ArrayRef) -> ArrayRef {
    use arrow::array::{AsArray, Float32Array, Float64Array};
    use arrow::datatypes::{Float32Type, Float64Type};
    match a.data_type() {
        arrow::datatypes::DataType::Float64 => {
            let v: Float64Array = a.as_primitive::<Float64Type>().unary(round_float);
            Arc::new(v)
        }
        arrow::datatypes::DataType::Float32 => {
            let v: Float32Array = a.as_primitive::<Float32Type>().unary(|x| round_float(f64::from(x)) as f32);
            Arc::new(v)
        }
        _ => a,
    }
}

/// How often a client creating a materialized view is told how far its backfill has come
/// (`SET backfill_progress_interval` changes it; a backfill that outlasts it also reports its
/// end, so `0` reports just the end).
pub const PROGRESS_NOTICE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The NOTICE text of a backfill's progress.
pub fn progress_notice(view: &str, r: &eddy_stream::metrics::ProgressReport) -> String {
    let total = match (r.rows_total, r.percent) {
        (Some(t), Some(p)) => format!("{p:.1}% ({} of {t} rows", r.rows_done),
        _ => format!("{} rows (total still being counted", r.rows_done),
    };
    let eta = r.eta_secs.map(|s| format!(", about {s:.0} s left")).unwrap_or_default();
    format!("materialized view \"{view}\": backfill {total}, {:.0} rows/s{eta})", r.rows_per_sec)
}
