//! The stream runtime (see `docs/architecture.md`): messages, incremental operators,
//! the actors that run them (a source actor per table, an actor per materialized view), and
//! the [`BarrierManager`] that cuts epochs, collects every actor's state changes and commits
//! them as one durable write.

pub mod actor;
pub mod barrier;
pub mod cache;
pub mod change_log;
pub mod exchange;
pub mod merge;
pub mod message;
pub mod metrics;
pub mod operator;
pub mod route;
pub mod sink;
pub mod source;
pub mod subscribe;
pub mod table_actor;
pub mod table_write;
pub mod watermark;
pub mod write_set;

pub use actor::{fragment_metrics, Backfill, Branch, Placement, Stage, ViewActor, BACKFILL_EPOCH_ROWS};
pub use barrier::{BarrierManager, Collected, EpochStats, SourceMsg};
pub use metrics::ViewMetrics;
pub use message::{ActorId, Barrier, HashOutput, Message, Mutation, Output, Router, Target, CHANNEL_CAPACITY};
pub use subscribe::{Sealed, Subscription};
pub use sink::{SinkLog, SinkStats, SinkTarget};
pub use source::{ConstantSplit, ReaderPosition, ReaderStats, SourceReader, SplitReader};
pub use table_actor::{Ingest, TableActor};
pub use watermark::{Watermark, WatermarkGen};
pub use table_write::{resolve, ConflictUpdate, OnConflict, TableWrite, TxnId, WriteOutcome};
