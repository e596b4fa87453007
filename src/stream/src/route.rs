//! [`Router`]: which vnode each row of a chunk belongs to, for hash exchanges between parallel
//! actors (its implementations are in the exchange module).

use arrow::array::RecordBatch;
use eddy_common::Result;

/// Says which vnode each row of a chunk belongs to, for a hash exchange: the vnode its
/// receiving operator's state keys carry (`eddy_common::codec::vnode_of` of the encoded
/// distribution key), so the actor that owns a vnode range owns exactly that state.
pub trait Router: Send + Sync + std::fmt::Debug {
    /// One vnode per row of `batch`.
    fn vnodes(&self, batch: &RecordBatch) -> Result<Vec<u16>>;
}
