//! The stream runtime (DESIGN.md, "Epochs and checkpoints"). Today it holds the
//! [`BarrierManager`], which turns a stream of write requests into a sequence of durable epoch
//! commits with group commit; operators, actors and barrier alignment build on it.

pub mod barrier;

pub use barrier::BarrierManager;
