//! The SQL side of Eddy (see `docs/architecture.md`), in layers whose imports only point down:
//!
//! 1. [`catalog`]: relations, schemas, types, serial counters and their persistence; the
//!    narrow [`catalog::Relations`] trait through which the layers above read the database.
//! 2. [`engine`]: the process-wide runtime wiring: state store, barrier manager, table source
//!    actors, view actors and recovery (which re-plans views through [`engine::ViewPlanner`]).
//! 3. [`planner`]: DataFusion integration: UDFs, checked arithmetic, text casts, table
//!    providers and the stream planner (LogicalPlan → operators).
//! 4. [`pg`]: PostgreSQL compatibility, a plug-in of the planner: `pg_catalog`,
//!    `information_schema`, catalog functions and the SQL rewrites clients need.
//! 5. [`frontend`]: sessions and statement dispatch (DDL, DML, COPY, views, transactions): the
//!    only layer that knows a [`Session`].
//!
//! `server` turns wire messages into calls on [`Session`]. A test (`tests/layers.rs`) fails on
//! any import that points up or any cycle between modules.

pub mod catalog;
pub mod engine;
pub mod frontend;
pub mod pg;
pub mod planner;

pub use engine::{Engine, EngineConfig};
pub use frontend::recovery::open_database;
pub use frontend::output::{Described, Output};
pub use frontend::session::Session;
pub use frontend::statement::EddyStatement;
