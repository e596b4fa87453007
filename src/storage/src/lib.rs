//! Durable state (see `docs/architecture.md`): the [`StateStore`] commits one atomic, durable
//! write batch per epoch into SlateDB over `object_store` and serves reads from a snapshot of the
//! last committed epoch; [`StateTable`] is the typed, keyed view of one table's rows.
//!
//! An epoch need not fit in memory: an [`EpochBatch`] can spill its ops into *runs* written
//! before the epoch commits and made visible atomically by the commit ([`runs`]); a background
//! task folds committed runs into ordinary keys ([`maintenance`]). Reads merge runs and base
//! keys, and can stream ([`ScanCursor`], [`StateTable::scan_stream`]).
//!
//! The commit and recovery *decisions* live in [`protocol`] and [`runs`] as pure functions;
//! this crate's I/O only carries them out. [`testing`] holds the fault-injecting object store
//! the failure tests run on.

mod background;
pub mod batch;
mod block_cache;
mod lsm_settings;
pub mod maintenance;
pub mod memory;
pub mod metered;
pub mod object_store_url;
pub mod protocol;
pub mod runs;
pub mod scan;
pub mod sizes;
mod slate;
pub mod state_table;
pub mod store;
pub mod testing;

#[cfg(test)]
mod slatedb_behaviour;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod fault_tests;

pub use batch::EpochBatch;
pub use memory::MemoryBudget;
pub use metered::{ObjectStoreStats, RequestKind};
pub use runs::RunId;
pub use scan::{ReadSnapshot, ScanCursor};
pub use state_table::{StateTable, TableScan};
pub use store::{LsmMetric, StateStore, StoreOptions, StoreTuning};
/// The object-store crate the store runs on (tests wrap its stores, e.g. in-memory ones).
pub use object_store;
pub use object_store::ObjectStore;
