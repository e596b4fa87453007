//! SQL frontend (DESIGN.md, "Planning"): parsing, the catalog, DataFusion integration, DDL,
//! DML and session settings. `server` turns wire messages into calls on [`Session`].

pub mod catalog;
pub mod copy;
pub mod ddl;
pub mod dml;
pub mod engine;
pub mod enums;
pub mod functions;
pub mod jsonb;
pub mod mview;
pub mod on_conflict;
pub mod overflow;
pub mod pg;
pub mod provider;
pub mod returning;
pub mod rewrite;
pub mod sequence;
pub mod session;
pub mod split;
pub mod stream_plan;
pub mod text_cast;
pub mod types;
pub mod view;

pub use engine::{Engine, EngineConfig};
pub use session::{Described, EddyStatement, Output, Session};
