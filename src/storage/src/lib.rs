//! Durable state (DESIGN.md, "State layers"): the [`StateStore`] commits one atomic, durable
//! write batch per epoch into SlateDB over `object_store` and serves reads from a snapshot of the
//! last committed epoch; [`StateTable`] is the typed, keyed view of one table's rows.
//!
//! The commit and recovery *decisions* live in [`protocol`] as pure functions; this crate's I/O
//! only carries them out.

pub mod object_store_url;
pub mod protocol;
pub mod state_table;
pub mod store;
pub mod testing;

pub use state_table::StateTable;
pub use store::{EpochBatch, ReadSnapshot, StateStore, StoreOptions};
