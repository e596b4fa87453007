//! PostgreSQL catalog emulation (DESIGN.md, crate `sql`): the `pg_catalog` and
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

pub mod colnames;
pub mod defs;
pub mod functions;
pub mod info_schema;
pub mod keywords;
pub mod apply;
pub mod model;
pub mod rewrite;
pub mod rows;
pub mod subquery;
pub mod table;
pub mod types;
pub mod udf;

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
use crate::engine::Engine;
use crate::functions::SessionInfo;

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
fn catalog_table(engine: &Arc<Engine>, def: &'static RelDef, info: bool) -> Arc<dyn TableProvider> {
    let engine = engine.clone();
    Arc::new(CatalogTable {
        def,
        rows: Arc::new(move |state: &dyn Session| {
            let session = session_of(state);
            let model = Model::new(&engine.catalog());
            Ok(rows_of(def, info, &RowContext { model: &model, session: &session }))
        }),
    })
}

/// The `pg_catalog` relation `name` (for unqualified names, which PostgreSQL also looks up in
/// `pg_catalog`).
pub fn catalog_relation(engine: &Arc<Engine>, name: &str) -> Option<Arc<dyn TableProvider>> {
    pg_catalog_rel(name).map(|d| catalog_table(engine, d, false))
}

/// `pg_catalog` or `information_schema` as a DataFusion schema.
#[derive(Debug)]
pub struct SystemSchema {
    engine: Arc<Engine>,
    info: bool,
}

impl SystemSchema {
    /// The schema `name`, if it is one of the two system schemas.
    pub fn for_name(engine: &Arc<Engine>, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let info = match name {
            "pg_catalog" => false,
            "information_schema" => true,
            _ => return None,
        };
        Some(Arc::new(SystemSchema { engine: engine.clone(), info }))
    }

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
        Ok(self.def(name).map(|d| catalog_table(&self.engine, d, self.info)))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.def(name).is_some()
    }
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

/// Installs the catalog functions and the session extension on a session's context.
pub fn install(ctx: &SessionContext, engine: &Arc<Engine>, info: &SessionInfo) {
    let session = Arc::new(PgSession { user: info.user.clone(), pid: info.pid, vars: info.vars.clone() });
    ctx.state_ref().write().config_mut().set_extension(session.clone());
    let registrar = udf::Registrar { ctx, engine: engine.clone(), session };
    functions::register_all(&registrar);
    ctx.register_udtf("pg_get_keywords", Arc::new(KeywordsFn));
}
