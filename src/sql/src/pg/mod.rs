//! PostgreSQL catalog emulation (docs/architecture.md, crate `sql`): the `pg_catalog` and
//! `information_schema` schemas, the catalog functions, and the SQL rewrites that let
//! DataFusion plan what psql, drivers and BI tools send.
//!
//! Everything is computed from the native catalog when a statement runs: the relations are
//! read-only tables built on each scan ([`table::CatalogTable`]) from one [`model::Model`], so
//! `pg_class`, `pg_attribute`, `information_schema.columns` and `format_type` agree with each
//! other and with `CREATE`/`DROP` as soon as those return. Nothing here is stored.
//!
//! Unqualified names resolve as in PostgreSQL, which searches `pg_catalog` implicitly: when a
//! user schema has no relation of that name, [`catalog_relation`] supplies the `pg_catalog` one.

mod age;
pub mod colnames;
mod correlation;
pub mod ddl_progress;
mod set_ops;
pub mod defs;
mod date_bin_range;
pub mod extract;
mod operand_types;
mod epoch_timestamp;
pub mod functions;
pub mod info_schema;
pub mod intervals;
pub mod keywords;
pub mod apply;
mod array_contains;
pub mod literals;
mod math;
pub mod model;
pub(crate) mod name_tag;
mod named_struct;
pub mod rewrite;
pub mod rows;
mod scalar_fns;
mod make_datetime;
pub(crate) mod jsonb_ops;
pub mod series;
mod sizes;
mod series_check;
mod string_limits;
pub mod session_functions;
pub mod subquery;
pub mod table;
pub mod timestamps;
mod time_zones;
mod uuid_literals;
mod to_char;
mod to_number;
pub mod types;
pub mod udf;
pub mod view_status;
pub mod state_tables;
pub mod watermarks;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, Session, TableFunctionImpl, TableProvider};
use datafusion::catalog::TableFunctionArgs;
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::prelude::SessionContext;
use parking_lot::RwLock;

use self::defs::{information_schema_rel, pg_catalog_rel, INFORMATION_SCHEMA_RELS, PG_CATALOG_RELS};
use self::model::Model;
use self::rows::{keyword_rows, rows_of, RowContext};
use self::table::{build_batch, CatalogTable, RelDef, Ty};
use crate::catalog::Relations;
use crate::pg::session_functions::SessionInfo;
use crate::planner::provider::SystemCatalog;

/// The session a catalog read or catalog function runs for, kept as a DataFusion
/// session-config extension so table scans can find it.
#[derive(Debug)]
pub struct PgSession {
    /// Connected user (shown as the owner of everything).
    pub user: String,
    /// Backend pid.
    pub pid: i32,
    /// Live session settings.
    pub vars: Arc<RwLock<BTreeMap<String, String>>>,
}

impl PgSession {
    /// A setting's current value.
    pub fn var(&self, name: &str) -> Option<String> {
        self.vars.read().get(name).cloned()
    }

    /// Schemas named by `search_path`, in order (`"$user"` dropped).
    pub fn search_path(&self) -> Vec<String> {
        self.var("search_path")
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().trim_matches('"').to_string())
            .filter(|s| !s.is_empty() && s != "$user")
            .collect()
    }
}

fn session_of(state: &dyn Session) -> Arc<PgSession> {
    state.config().get_extension::<PgSession>().unwrap_or_else(|| {
        Arc::new(PgSession { user: "root".into(), pid: 0, vars: Arc::new(RwLock::new(BTreeMap::new())) })
    })
}

/// The catalog table for `def` (`info`: an `information_schema` relation).
fn catalog_table(relations: &Arc<dyn Relations>, def: &'static RelDef, info: bool) -> Arc<dyn TableProvider> {
    let relations = relations.clone();
    Arc::new(CatalogTable {
        def,
        rows: Arc::new(move |state: &dyn Session| {
            let session = session_of(state);
            let model = Model::new(&relations.catalog());
            let cx = RowContext { model: &model, session: &session };
            Ok(if info { info_schema::rows_of(def, &cx) } else { rows_of(def, &cx) })
        }),
    })
}

/// The PostgreSQL layer as the planner's [`SystemCatalog`] plug-in: `pg_catalog` and
/// `information_schema`, and `pg_catalog`'s relations for unqualified names.
#[derive(Debug)]
pub struct PgCatalog {
    relations: Arc<dyn Relations>,
}

impl PgCatalog {
    /// The system schemas of `relations`' database.
    pub fn new(relations: Arc<dyn Relations>) -> Arc<Self> {
        Arc::new(Self { relations })
    }
}

impl SystemCatalog for PgCatalog {
    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let info = match name {
            "pg_catalog" => false,
            "information_schema" => true,
            _ => return None,
        };
        Some(Arc::new(SystemSchema { relations: self.relations.clone(), info }))
    }

    fn implicit_relation(&self, name: &str) -> Option<Arc<dyn TableProvider>> {
        if let Some(t) = eddy_view(name, &self.relations) {
            return Some(t);
        }
        pg_catalog_rel(name).map(|d| catalog_table(&self.relations, d, false))
    }
}

/// `pg_catalog` or `information_schema` as a DataFusion schema.
#[derive(Debug)]
struct SystemSchema {
    relations: Arc<dyn Relations>,
    info: bool,
}

impl SystemSchema {
    fn def(&self, name: &str) -> Option<&'static RelDef> {
        if self.info {
            information_schema_rel(name)
        } else {
            pg_catalog_rel(name)
        }
    }
}

#[async_trait]
impl SchemaProvider for SystemSchema {
    fn table_names(&self) -> Vec<String> {
        let rels = if self.info { INFORMATION_SCHEMA_RELS } else { PG_CATALOG_RELS };
        rels.iter().map(|r| r.name.to_string()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if let Some(t) = eddy_view(name, &self.relations).filter(|_| !self.info) {
            return Ok(Some(t));
        }
        Ok(self.def(name).map(|d| catalog_table(&self.relations, d, self.info)))
    }

    fn table_exist(&self, name: &str) -> bool {
        (!self.info && EDDY_VIEWS.contains(&name)) || self.def(name).is_some()
    }
}

/// Eddy's own status views, resolvable unqualified or as `pg_catalog.` (not in `pg_class`).
const EDDY_VIEWS: [&str; 4] = [view_status::NAME, watermarks::NAME, state_tables::NAME, ddl_progress::NAME];

/// The provider of Eddy status view `name`, if it is one.
fn eddy_view(name: &str, relations: &Arc<dyn Relations>) -> Option<Arc<dyn TableProvider>> {
    let r = relations.clone();
    Some(match name {
        view_status::NAME => view_status::ViewStatusTable::new(r),
        watermarks::NAME => watermarks::WatermarksTable::new(r),
        state_tables::NAME => state_tables::StateTablesTable::new(r),
        ddl_progress::NAME => ddl_progress::DdlProgressTable::new(r),
        _ => return None,
    })
}

static KEYWORDS_REL: RelDef = RelDef {
    name: "pg_get_keywords",
    oid: 0,
    kind: 'v',
    cols: &[("word", Ty::Text), ("catcode", Ty::Char), ("barelabel", Ty::Bool), ("catdesc", Ty::Text), ("baredesc", Ty::Text)],
};

/// `pg_get_keywords()` as a table function.
#[derive(Debug)]
struct KeywordsFn;

impl TableFunctionImpl for KeywordsFn {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        if !args.exprs().is_empty() {
            return Err(DataFusionError::Plan("pg_get_keywords() takes no arguments".into()));
        }
        let batch = build_batch(&KEYWORDS_REL, &keyword_rows())?;
        Ok(Arc::new(MemTable::try_new(KEYWORDS_REL.schema(), vec![vec![batch]])?))
    }
}

/// Rewrites a statement's PostgreSQL syntax into what DataFusion plans: catalog syntax and
/// output column names ([`rewrite`]), then literal syntax ([`literals`]).
pub fn rewrite_statement(stmt: &mut datafusion::sql::sqlparser::ast::Statement) -> eddy_common::Result<()> {
    rewrite::rewrite(stmt)?;
    timestamps::microsecond_timestamps(stmt);
    literals::rewrite_literals(stmt)
}

/// The plan-level rewrites that follow [`rewrite_statement`] (implicit interval casts, integer
/// literal widths).
pub fn rewrite_plan(plan: datafusion::logical_expr::LogicalPlan) -> eddy_common::Result<datafusion::logical_expr::LogicalPlan> {
    correlation::check_correlations(&plan)?;
    let plan = operand_types::unmarked_text_casts(operand_types::float_comparisons(timestamps::type_timestamp_literals(plan)?)?)?;
    set_ops::multiset_set_ops(literals::rewrite_plan(operand_types::date_differences(intervals::pg_intervals(plan)?)?)?)
}

/// Installs the catalog functions and the session extension on a session's context.
pub fn install(ctx: &SessionContext, relations: &Arc<dyn Relations>, info: &SessionInfo) {
    let session = Arc::new(PgSession { user: info.user.clone(), pid: info.pid, vars: info.vars.clone() });
    ctx.state_ref().write().config_mut().set_extension(session.clone());
    sizes::install(ctx, relations, &session);
    let registrar = udf::Registrar { ctx, relations: relations.clone(), session };
    functions::register_all(&registrar);
    ctx.register_udf(age::udf());
    math::install(ctx);
    name_tag::install(ctx);
    named_struct::install(ctx);
    ctx.register_udf(operand_types::plain_text());
    epoch_timestamp::install(ctx);
    timestamps::install_now(ctx);
    ctx.register_udtf("pg_get_keywords", Arc::new(KeywordsFn));
    let series = datafusion::functions_table::generate_series().function().clone();
    ctx.register_udtf("generate_series", Arc::new(series::GenerateSeries::new(series, true)));
    series_check::install(ctx);
    date_bin_range::install(ctx);
    string_limits::install(ctx);
    let range = datafusion::functions_table::range().function().clone();
    ctx.register_udtf("range", Arc::new(series::GenerateSeries::new(range, false)));
}
