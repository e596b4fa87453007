//! Per-session state of statements that span messages: the open transaction block's recorded
//! writes (`transaction.rs`) and the COPY in progress (`copy.rs`). Data only, so the session
//! can hold it without depending on the modules that act on it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use eddy_common::EddyError;
use eddy_stream::{TableWrite, TxnId};

use crate::catalog::TableCatalog;
use crate::frontend::copy_in::CopyParser;

/// One statement's write recorded in a block.
pub(crate) struct BlockWrite {
    /// The table written.
    pub(crate) table: Arc<TableCatalog>,
    /// What the statement asked for (replayed by the table's writer at COMMIT).
    pub(crate) write: TableWrite,
    /// Its effect as resolved in the block: key → new row (`None`: deleted).
    pub(crate) kv: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// Bookkeeping bytes per resolved key on top of its key and row (vector slot, tree node share).
const KV_OVERHEAD_BYTES: usize = 64;

impl BlockWrite {
    /// Approximate heap bytes the block holds for this write: the statement's rows, and its
    /// resolved effect twice (recorded here, and folded into the overlay).
    pub(crate) fn approx_bytes(&self) -> usize {
        let kv: usize = self.kv.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len) + KV_OVERHEAD_BYTES).sum();
        self.write.chunk.batch.get_array_memory_size() + 2 * kv
    }
}

/// The block's writes as readers see them: per table, key → current row (`None`: deleted).
pub type Overlay = HashMap<u32, Arc<BTreeMap<Vec<u8>, Option<Vec<u8>>>>>;

/// An open transaction block.
#[derive(Default)]
pub(crate) struct Block {
    /// Recorded writes, in statement order.
    pub(crate) writes: Vec<BlockWrite>,
    /// Savepoints, oldest first: name and the number of writes recorded before it.
    pub(crate) savepoints: Vec<(String, usize)>,
    /// The recorded writes folded per table, for reads and for resolving later statements.
    pub(crate) overlay: Overlay,
    /// Approximate heap bytes of `writes` and `overlay` ([`BlockWrite::approx_bytes`]).
    pub(crate) bytes: usize,
}

impl Block {
    /// Recomputes the overlay from the recorded writes (after ROLLBACK TO SAVEPOINT).
    pub(crate) fn rebuild_overlay(&mut self) {
        let mut tables: HashMap<u32, BTreeMap<Vec<u8>, Option<Vec<u8>>>> = HashMap::new();
        for w in &self.writes {
            let t = tables.entry(w.table.id).or_default();
            for (k, v) in &w.kv {
                t.insert(k.clone(), v.clone());
            }
        }
        self.overlay = tables.into_iter().map(|(id, m)| (id, Arc::new(m))).collect();
        self.bytes = self.writes.iter().map(BlockWrite::approx_bytes).sum();
    }
}

/// An open cursor (`DECLARE`, see `cursor.rs`).
pub(crate) struct Cursor {
    /// Its columns.
    pub(crate) schema: arrow::datatypes::SchemaRef,
    /// Its rows, produced as FETCH asks for them (in a mutex only so that the session is
    /// `Sync`; reached through `get_mut`, never locked).
    pub(crate) stream: parking_lot::Mutex<datafusion::execution::SendableRecordBatchStream>,
    /// Rows produced but not fetched yet.
    pub(crate) pending: Option<arrow::array::RecordBatch>,
    /// A `SUBSCRIBE` cursor: FETCH returns what has arrived instead of waiting for `count` rows.
    pub(crate) follows: bool,
    /// `WITH HOLD`: outlives the transaction block.
    pub(crate) hold: bool,
    /// Declared in the open block: goes if the block does not commit (even WITH HOLD).
    pub(crate) in_block: bool,
    /// Its rows ran out (or failed).
    pub(crate) ended: bool,
}

/// A COPY FROM STDIN in progress.
pub struct CopyState {
    /// Parses the data as it arrives.
    pub(crate) parser: CopyParser,
    /// The transaction its batches are staged under (autocommit mode).
    pub(crate) txn: TxnId,
    /// Whether a batch was staged (so there is something to commit or abort).
    pub(crate) staged: bool,
    /// When its progress was last logged.
    pub(crate) logged: std::time::Instant,
    /// The first error; the COPY fails with it at the end of the data.
    pub(crate) error: Option<EddyError>,
    /// Its rows and bytes so far, in the server's COPY progress (ends when the state is
    /// dropped).
    pub(crate) progress: crate::engine::copies::CopyTicket,
}
