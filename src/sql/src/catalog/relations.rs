//! [`Relations`]: the narrow view of the live database that the planner and the PostgreSQL
//! layer take instead of the engine or a session. The engine implements it.

use std::sync::Arc;

use eddy_common::EddyError;
use eddy_storage::ReadSnapshot;

use super::sequence::Sequences;
use super::{Catalog, TableCatalog};

/// What planning and catalog emulation may read of the database.
///
/// Implementers guarantee: [`Relations::catalog`] is the catalog as of the last committed DDL
/// (an immutable copy; later DDL never changes it), and [`Relations::snapshot`] shows the last
/// committed epoch, in which every relation of that catalog exists.
pub trait Relations: Send + Sync + std::fmt::Debug {
    /// The catalog as of the last committed DDL.
    fn catalog(&self) -> Arc<Catalog>;

    /// A snapshot of the last committed epoch.
    fn snapshot(&self) -> ReadSnapshot;

    /// Why materialized view `table` cannot be read now, if it cannot.
    fn view_failure(&self, table: &TableCatalog) -> Option<EddyError>;

    /// The counters of serial columns.
    fn sequences(&self) -> &Arc<Sequences>;

    /// The running source readers: (reader id, view id, source name).
    fn source_readers(&self) -> Vec<(u32, u32, String)> {
        Vec::new()
    }

    /// The live counters of the running view actors, with each view's qualified name.
    fn view_metrics(&self) -> Vec<(String, Arc<eddy_stream::ViewMetrics>)> {
        Vec::new()
    }
}
