//! Stream operators. Each works on whole chunks (Arrow kernels, DataFusion `PhysicalExpr`s)
//! and is driven by its actor: `process` for every chunk, `on_barrier` once per epoch.
//!
//! Contract for implementers:
//! * `process` may emit output immediately (stateless operators) or only update state.
//! * Per-row evaluation failures are data: the failing rows are counted in `RowErrors` (with
//!   the sign of their op, so retracting the input retracts the error) and left out.
//! * `on_barrier(epoch, batch)` must write every state change of `epoch` into `batch` and
//!   return the output that is due at the end of the epoch (stateful operators emit here), so
//!   that after the barrier the operator's committed state and its emitted output agree.
//! * Operators never see a barrier twice and never see chunks of an epoch after its barrier.
//! * Watermarks are mapped through the tree once per epoch ([`Operator::on_watermarks`]).
//! * Stateful operators keep their state in a bounded [`crate::cache::StateCache`] over their
//!   state table: `prefetch` (awaited before every `process`) loads what the chunk touches.

pub mod eowc_buffer;
pub mod eval;
pub mod filter;
pub mod hash_agg;
pub mod hash_join;
pub mod materialize;
pub mod over_window;
pub mod project;
pub mod temporal_filter;
pub mod top_n;
pub mod unnest;

use async_trait::async_trait;
use eddy_common::{Epoch, Result, StreamChunk};
use eddy_storage::{EpochBatch, StateStore};

use crate::cache::CacheStats;
use crate::watermark::Watermark;

pub use eowc_buffer::EowcBuffer;
pub use eval::{ErrorDelta, RowErrors};
pub use filter::Filter;
pub use hash_agg::{AggCall, AggKind, HashAgg, RegrFn};
pub use hash_join::interval::IntervalBound;
pub use hash_join::{HashJoin, JoinKind, JoinSpec};
pub use materialize::Materialize;
pub use over_window::OverWindow;
pub use top_n::TopN;
pub use project::Project;
pub use temporal_filter::{TemporalBound, TemporalFilter, TimeBound};
pub use unnest::{Unnest, UnnestColumn};

/// A converter encoding whole rows of `schema` (every column, ascending).
pub(crate) fn row_converter(schema: &arrow::datatypes::Schema) -> Result<arrow::row::RowConverter> {
    Ok(arrow::row::RowConverter::new(schema.fields().iter().map(|f| arrow::row::SortField::new(f.data_type().clone())).collect())?)
}

/// A converter encoding the values of `order_by` over rows of `schema` so that the encodings
/// sort in that order; `None` without an ORDER BY.
pub(crate) fn order_converter(
    order_by: &[datafusion::physical_expr::PhysicalSortExpr],
    schema: &arrow::datatypes::Schema,
) -> Result<Option<arrow::row::RowConverter>> {
    if order_by.is_empty() {
        return Ok(None);
    }
    let fields = order_by
        .iter()
        .map(|e| Ok(arrow::row::SortField::new_with_options(e.expr.data_type(schema)?, e.options)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(arrow::row::RowConverter::new(fields)?))
}

/// A chunk of `changes`, each an op and an output row encoded by `rows` (whose columns are
/// `schema`'s); none when there are no changes.
pub(crate) fn chunk_of_rows(rows: &arrow::row::RowConverter, schema: &arrow::datatypes::SchemaRef, changes: Vec<(eddy_common::Op, Vec<u8>)>) -> Result<Vec<StreamChunk>> {
    if changes.is_empty() {
        return Ok(vec![]);
    }
    let parser = rows.parser();
    let columns = eddy_common::codec::decode_rows(rows, changes.iter().map(|(_, r)| parser.parse(r)))?;
    let batch = arrow::array::RecordBatch::try_new(schema.clone(), columns)?;
    Ok(vec![StreamChunk::try_new(batch, changes.into_iter().map(|(op, _)| op).collect())?])
}

/// One incremental operator.
#[async_trait]
pub trait Operator: Send + std::fmt::Display {
    /// Loads the state `chunk` will touch from `store` into the operator's cache, so that
    /// `process` needs no I/O. Stateless operators need not.
    async fn prefetch(&mut self, _chunk: &StreamChunk, _store: &StateStore) -> Result<()> {
        Ok(())
    }

    /// Handles a chunk of changes; returns the chunks to pass on. Rows whose expressions fail
    /// with a user error are left out and counted in `errors` (see [`eval`]); an `Err` is an
    /// internal fault that fails the view.
    fn process(&mut self, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Vec<StreamChunk>>;

    /// Ends `epoch`: flushes state changes into `batch`, returns output due now (with rows that
    /// fail counted in `errors`, as for `process`).
    async fn on_barrier(&mut self, epoch: Epoch, batch: &mut EpochBatch, errors: &mut RowErrors) -> Result<Vec<StreamChunk>>;

    /// The watermarks of the output given the input's (see [`crate::watermark`]): called once
    /// per epoch, before any operator's `on_barrier`, with the input's latest watermarks (none
    /// yet: empty). A stateful operator may act on them in its `on_barrier` (close windows,
    /// drop state no later row can touch). Default: none pass.
    fn on_watermarks(&mut self, _input: &[Watermark]) -> Result<Vec<Watermark>> {
        Ok(vec![])
    }

    /// Gives the operator the store its state lives in, for reads outside `prefetch` (called
    /// once, when its actor is built). Default: not needed.
    fn attach_store(&mut self, _store: &std::sync::Arc<StateStore>) {}

    /// Its state cache's entries, bytes and lookups (read at barriers for metrics). Default:
    /// stateless, none.
    fn state_stats(&self) -> Option<CacheStats> {
        None
    }

    /// How the operator may run in parallel (see [`Distribution`]). Default: in one actor.
    fn distribution(&self) -> Distribution {
        Distribution::Single
    }

    /// Makes the operator one of several parallel ones, owning the state under `vnodes` (set
    /// before its first chunk; a [`Distribution::Hash`] operator that scans its state must
    /// scan only these). Default: nothing to do.
    fn own_vnodes(&mut self, _vnodes: std::ops::Range<u16>) {}
}

/// How an operator may be split among parallel actors (docs/architecture.md, "Parallel
/// fragments").
#[derive(Debug, Clone)]
pub enum Distribution {
    /// Anywhere: it keeps no state and its output rows are keyed by its input's key (project,
    /// filter, unnest, materialize), so it runs in the actors of the fragment before it.
    Any,
    /// In actors that each own a vnode range of its state: a hash exchange by this router
    /// must come before it.
    Hash(std::sync::Arc<dyn crate::route::Router>),
    /// In one actor (its state has no vnode-partitioned layout yet, or it needs all rows).
    Single,
}

/// One input of a two-input operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Left,
    Right,
}

impl Side {
    /// The other input.
    pub fn other(self) -> Side {
        match self {
            Side::Left => Side::Right,
            Side::Right => Side::Left,
        }
    }
}

/// An incremental operator with two inputs (a join). The same contract as [`Operator`], with
/// each chunk tagged by the input it came from.
#[async_trait]
pub trait BinaryOperator: Send + std::fmt::Display {
    /// Loads the state a chunk of input `side` will touch (see [`Operator::prefetch`]).
    async fn prefetch(&mut self, _side: Side, _chunk: &StreamChunk, _store: &StateStore) -> Result<()> {
        Ok(())
    }

    /// Handles a chunk of changes of input `side`; returns the chunks to pass on.
    fn process(&mut self, side: Side, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Vec<StreamChunk>>;

    /// Ends `epoch`: flushes state changes into `batch`, returns output due now.
    async fn on_barrier(&mut self, epoch: Epoch, batch: &mut EpochBatch, errors: &mut RowErrors) -> Result<Vec<StreamChunk>>;

    /// The output's watermarks given each input's (see [`Operator::on_watermarks`]).
    fn on_watermarks(&mut self, _left: &[Watermark], _right: &[Watermark]) -> Result<Vec<Watermark>> {
        Ok(vec![])
    }

    /// See [`Operator::attach_store`].
    fn attach_store(&mut self, _store: &std::sync::Arc<StateStore>) {}

    /// See [`Operator::state_stats`].
    fn state_stats(&self) -> Option<CacheStats> {
        None
    }

    /// For a join that may run in parallel actors: the routers of its left and right inputs
    /// (each side's rows go to the actor owning their join key). Default: one actor.
    fn routers(&self) -> Option<[std::sync::Arc<dyn crate::route::Router>; 2]> {
        None
    }

    /// See [`Operator::own_vnodes`].
    fn own_vnodes(&mut self, _vnodes: std::ops::Range<u16>) {}
}
