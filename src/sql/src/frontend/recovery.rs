//! Opening a database: the engine recovers its graph, re-planning each view with a session of
//! its own (the engine sits below planning and asks through [`ViewPlanner`]).

use std::sync::Arc;

use async_trait::async_trait;
use eddy_common::Result;
use eddy_storage::ReadSnapshot;

use crate::catalog::TableCatalog;
use crate::engine::{Engine, EngineConfig, ViewOperators, ViewPlanner};
use crate::frontend::session::Session;

/// Plans views for recovery the way `CREATE MATERIALIZED VIEW` planned them. Holds the engine
/// weakly: the engine keeps its planner for later rebuilds.
struct SessionPlanner {
    engine: std::sync::Weak<Engine>,
}

#[async_trait]
impl ViewPlanner for SessionPlanner {
    async fn view_operators(&self, view: &TableCatalog, snapshot: &ReadSnapshot) -> Result<ViewOperators> {
        let engine = self.engine.upgrade().ok_or_else(|| eddy_common::EddyError::internal("the engine is gone"))?;
        let mut session = Session::new(engine, "root", 0);
        let planned = session.view_operators(view, Some(snapshot)).await?;
        Ok(ViewOperators {
            branches: planned.branches,
            stages: planned.stages,
        })
    }
}

/// Opens the state store, recovers the catalog and starts every actor from committed state.
pub async fn open_database(config: EngineConfig) -> Result<Arc<Engine>> {
    let engine = Engine::open(config).await?;
    engine.recover(Arc::new(SessionPlanner { engine: Arc::downgrade(&engine) })).await?;
    Ok(engine)
}
