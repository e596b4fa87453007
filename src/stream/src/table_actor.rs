//! [`TableActor`]: the source of a table. DML sends it changes; it applies them to the table's
//! state and, when views depend on the table, turns them into an exact change stream.
//!
//! The actor is the single writer of its table, so it is where PostgreSQL-style conflicts are
//! resolved: an INSERT of an existing key becomes `UpdateDelete(old)`/`UpdateInsert(new)`, a
//! DELETE of a missing key emits nothing, and a DELETE retracts the row as it currently is (not
//! as the DML's snapshot saw it). Downstream views therefore always see a consistent history.
//! Without downstream views it only writes, which keeps bulk loads cheap.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::interleave;
use eddy_common::codec::RowCodec;
use eddy_common::{Epoch, Op, Result, StreamChunk};
use eddy_storage::{EpochBatch, StateStore, StateTable};
use tokio::sync::{mpsc, watch};

use crate::barrier::{Collected, SourceMsg, Waiter};
use crate::message::{ActorId, Dispatcher, Message, Output};

/// The source actor of one table.
pub struct TableActor {
    /// Actor id (the table's relation id).
    id: ActorId,
    /// The table's rows.
    table: Arc<StateTable>,
    /// Row encoding (same as `table`'s).
    codec: RowCodec,
    /// Keys are fresh hidden row ids: inserts can never conflict.
    append_only_keys: bool,
    /// DML writes and barriers.
    rx: mpsc::Receiver<SourceMsg>,
    /// Downstream views.
    outputs: Dispatcher,
    /// Where epoch reports go.
    collector: mpsc::UnboundedSender<Collected>,
    /// Committed state (for looking up current rows).
    store: Arc<StateStore>,
    /// Last completed epoch.
    completed: watch::Receiver<Epoch>,
    /// Writes of the current epoch.
    pending: EpochBatch,
    /// Writers in the current epoch.
    waiters: Vec<Waiter>,
    /// Current value of keys written in the current epoch (`None` = deleted); only kept while
    /// there are downstream views.
    dirty: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// The epoch the next barrier closes.
    epoch: Epoch,
    /// Whether the committed table was empty at this epoch's first write (then only this
    /// epoch's own writes can conflict, and no lookups are needed); `None` until checked.
    committed_empty: Option<bool>,
}

impl TableActor {
    /// An actor for `table`, starting after committed epoch `last`.
    #[allow(clippy::too_many_arguments)]
    pub fn try_new(
        id: ActorId,
        table: Arc<StateTable>,
        append_only_keys: bool,
        rx: mpsc::Receiver<SourceMsg>,
        outputs: Vec<Output>,
        collector: mpsc::UnboundedSender<Collected>,
        store: Arc<StateStore>,
        completed: watch::Receiver<Epoch>,
    ) -> Result<Self> {
        let codec = RowCodec::try_new(table.schema().clone(), table.pk_indices().to_vec())?;
        let epoch = completed.borrow().next();
        let mut dispatcher = Dispatcher::default();
        for o in outputs {
            dispatcher.add(o);
        }
        Ok(Self {
            id,
            table,
            codec,
            append_only_keys,
            rx,
            outputs: dispatcher,
            collector,
            store,
            completed,
            pending: EpochBatch::default(),
            waiters: Vec::new(),
            dirty: HashMap::new(),
            epoch,
            committed_empty: None,
        })
    }

    /// Runs until the table is dropped; failures are reported to the barrier manager.
    pub async fn run(mut self) {
        let (id, collector) = (self.id, self.collector.clone());
        crate::actor::run_reporting(id, "table source", collector, self.run_inner()).await;
    }

    async fn run_inner(&mut self) -> Result<()> {
        while let Some(msg) = self.rx.recv().await {
            match msg {
                SourceMsg::Write { chunk, ack } => {
                    if let Err(e) = self.write(chunk).await {
                        let _ = ack.send(Err(e));
                    } else {
                        self.waiters.push(ack);
                    }
                }
                SourceMsg::Barrier(b) => {
                    let report = Collected {
                        actor: self.id,
                        epoch: b.epoch,
                        batch: std::mem::take(&mut self.pending),
                        waiters: std::mem::take(&mut self.waiters),
                        failed: None,
                    };
                    let _ = self.collector.send(report);
                    self.outputs.send_barrier(self.id, &b).await;
                    self.dirty.clear();
                    self.committed_empty = None;
                    self.epoch = b.epoch.next();
                    if b.stops(self.id) {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    async fn write(&mut self, chunk: StreamChunk) -> Result<()> {
        if self.outputs.is_empty() {
            return self.table.write_chunk(&chunk, &mut self.pending);
        }
        // Lookups read the committed state plus this epoch's writes: wait for earlier epochs.
        let before = Epoch(self.epoch.0.saturating_sub(1));
        let _ = self.completed.wait_for(|e| *e >= before).await;
        let snapshot = self.store.snapshot();
        let committed_empty = match self.committed_empty {
            Some(e) => e,
            None => {
                let e = snapshot.is_prefix_empty(&eddy_common::codec::table_prefix(self.table.table_id())).await?;
                self.committed_empty = Some(e);
                e
            }
        };
        let keys = self.codec.encode_keys(self.table.table_id(), &chunk.batch)?;
        let values = self.codec.encode_values(&chunk.batch)?;
        // Output rows: (0, i) = row i of the input, (1, j) = j-th old row.
        let mut picks: Vec<(usize, usize)> = Vec::new();
        let mut ops: Vec<Op> = Vec::new();
        let mut old_rows: Vec<Vec<u8>> = Vec::new();
        for (i, key) in keys.into_iter().enumerate() {
            let insert = chunk.ops[i].is_insert();
            let old = if insert && self.append_only_keys {
                None
            } else {
                match self.dirty.get(&key) {
                    Some(v) => v.clone(),
                    None if committed_empty => None,
                    None => snapshot.get(&key).await?.map(|b| b.to_vec()),
                }
            };
            if insert {
                let new = values.row(i).data().to_vec();
                match old {
                    Some(o) => {
                        picks.push((1, old_rows.len()));
                        old_rows.push(o);
                        ops.push(Op::UpdateDelete);
                        picks.push((0, i));
                        ops.push(Op::UpdateInsert);
                    }
                    None => {
                        picks.push((0, i));
                        ops.push(Op::Insert);
                    }
                }
                self.pending.put(key.clone(), new.clone());
                self.dirty.insert(key, Some(new));
            } else if let Some(o) = old {
                picks.push((1, old_rows.len()));
                old_rows.push(o);
                ops.push(Op::Delete);
                self.pending.delete(key.clone());
                self.dirty.insert(key, None);
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        let old_batch = self.codec.decode_values(old_rows.iter().map(|v| v.as_slice()))?;
        let new_batch = RecordBatch::try_new(self.table.schema().clone(), chunk.batch.columns().to_vec())?;
        let columns = (0..new_batch.num_columns())
            .map(|c| {
                let sources: [&dyn arrow::array::Array; 2] = [new_batch.column(c).as_ref(), old_batch.column(c).as_ref()];
                Ok(interleave(&sources, &picks)?)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let out = StreamChunk::try_new(RecordBatch::try_new(self.table.schema().clone(), columns)?, ops)?;
        self.outputs.send(Message::Chunk(out)).await;
        Ok(())
    }
}
