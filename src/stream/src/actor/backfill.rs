//! Backfill of a new view (see `docs/architecture.md`, "Materialized views"). A new view first
//! backfills, in bounded epochs while the rest of the server keeps committing
//! (RisingWave's scheme): per input it reads the upstream's rows in key order from the snapshot
//! of the last completed epoch, at most [`Backfill::rows_per_epoch`] per epoch, and remembers the
//! key it reached. The upstream's changes of the current epoch are held until the epoch's
//! barrier; then those of rows at or before the position pass (the snapshot gave the row as it
//! was, the change makes it current) and the others are dropped (a later snapshot, read after
//! this epoch commits, includes them). After reporting each barrier the actor waits for that
//! epoch to commit and reads on from its snapshot. Nothing is missed or seen twice: the
//! subscription takes effect exactly at the first snapshot's barrier, and each later snapshot
//! is exactly the epoch whose changes the actor last applied (the next one cannot commit
//! without this actor's report).
//!
//! Each barrier also commits, with the state the epoch's reads produced, every input's position
//! (`codec::backfill_key`): a view created in the background (`SET background_ddl`) resumes
//! from there after a restart.

use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use arrow::array::BooleanArray;
use eddy_common::{internal_err, Epoch, Result, StreamChunk};
use eddy_storage::TableScan;
use futures::FutureExt;
use tokio::sync::{oneshot, watch};

use super::{At, ViewActor};
use crate::barrier::BarrierManager;
use crate::merge::{Aligned, AlignedInputs};
use crate::metrics::{now_ms, ViewMetrics};

/// How a new view loads its initial rows.
pub struct Backfill {
    /// The epoch at whose barrier the view subscribed (known once that barrier is cut).
    pub epoch: oneshot::Receiver<Epoch>,
    /// The barrier manager: its completed epochs, and early barriers to end a full epoch.
    pub barrier: Arc<BarrierManager>,
    /// Told the epoch with which the view's state became complete (dropped if it never does).
    pub done: oneshot::Sender<Epoch>,
    /// Upstream rows read per epoch (`SET backfill_epoch_rows`; default [`BACKFILL_EPOCH_ROWS`]).
    pub rows_per_epoch: usize,
    /// Recovery of a backfill that was under way: read on from the positions committed with
    /// the restored state (a new view starts from the beginning).
    pub resume: bool,
    /// Commit each input's position with every epoch (a view created in the background, which
    /// resumes after a restart; a foreground CREATE's crash is its failure).
    pub record_positions: bool,
}

/// A committed backfill position: whether the input is read through, the rows this actor
/// read of it, and the full key of the last one (see [`eddy_common::codec::backfill_key`]).
fn encode_position(done: bool, rows: u64, pos: Option<&[u8]>) -> Vec<u8> {
    let mut v = Vec::with_capacity(9 + pos.map_or(0, <[u8]>::len));
    v.push(u8::from(done));
    v.extend_from_slice(&rows.to_be_bytes());
    v.extend_from_slice(pos.unwrap_or_default());
    v
}

/// The inverse of [`encode_position`]; an empty key is no position yet.
fn decode_position(v: &[u8]) -> Result<(bool, u64, Option<Vec<u8>>)> {
    let rows = v.get(1..9).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes).ok_or_else(|| internal_err!("corrupt backfill position"))?;
    let pos = &v[9..];
    Ok((v[0] == 1, rows, (!pos.is_empty()).then(|| pos.to_vec())))
}

/// Backfill progress of one input.
#[derive(Default)]
struct Fill {
    /// Full key of the last upstream row read (`None`: none yet).
    pos: Option<Vec<u8>>,
    /// Every upstream row has been read.
    done: bool,
    /// Upstream rows this actor read (committed with its position).
    rows: u64,
    /// The upstream's changes of the current epoch, held until its barrier.
    held: Vec<StreamChunk>,
    /// Open scan of the current snapshot, after `pos`.
    scan: Option<TableScan>,
}

/// Waits until `epoch` has completed.
async fn completed_through(completed: &mut watch::Receiver<Epoch>, epoch: Epoch) -> Result<()> {
    completed
        .wait_for(|e| *e >= epoch)
        .await
        .map(|_| ())
        .map_err(|_| internal_err!("barrier manager stopped before epoch {epoch} completed"))
}

impl ViewActor {
    /// Loads the view's initial rows in bounded epochs (see the module docs). False if the
    /// actor was stopped meanwhile.
    pub(super) async fn backfill(&mut self, bf: Backfill, inputs: &mut AlignedInputs) -> Result<bool> {
        let epoch = bf.epoch.await.map_err(|_| internal_err!("view creation was abandoned"))?;
        let mut completed = bf.barrier.completed();
        completed_through(&mut completed, epoch).await?;
        let mut snapshot = self.store.snapshot();
        let tables: Vec<u32> = self.upstreams.iter().flatten().map(|u| u.table_id()).collect();
        if bf.resume {
            // The counts committed so far already hold what the upstreams had.
            self.restore_error_totals(&snapshot).await?;
        } else if self.placement.first {
            for t in &tables {
                self.inherit_errors(*t, &snapshot).await?;
            }
        }
        let progress = &self.metrics.backfill;
        progress.active.store(true, Relaxed);
        progress.started_ms.compare_exchange(0, now_ms(), Relaxed, Relaxed).ok();
        if self.placement.first {
            count_backfill_total(self.metrics.clone(), &snapshot, tables);
        }
        // Inputs from another fragment of the view have nothing to backfill.
        let mut fills: Vec<Fill> = self.upstreams.iter().map(|u| Fill { done: u.is_none(), ..Fill::default() }).collect();
        if bf.resume {
            for (b, fill) in fills.iter_mut().enumerate().filter(|(_, f)| !f.done) {
                if let Some(v) = snapshot.get(&self.position_key(b)).await? {
                    (fill.done, fill.rows, fill.pos) = decode_position(&v)?;
                    progress.rows_done.fetch_add(fill.rows, Relaxed);
                }
            }
        }
        // This actor's vnodes of its upstreams.
        let vnodes = self.placement.vnodes.clone();
        let mut read = 0usize;
        let mut snapshot_turn = false;
        loop {
            let reading = read < bf.rows_per_epoch && fills.iter().any(|f| !f.done);
            // Queued input and snapshot reads take turns, so neither starves the other.
            snapshot_turn = !snapshot_turn;
            let next = match (reading, snapshot_turn) {
                (true, true) => None,
                (true, false) => inputs.next().now_or_never(),
                (false, _) => Some(inputs.next().await),
            };
            let Some(next) = next else {
                let b = fills.iter().position(|f| !f.done).ok_or_else(|| internal_err!("backfill without an unfinished input"))?;
                let fill = &mut fills[b];
                if fill.scan.is_none() {
                    let upstream = self.upstreams[b].as_ref().ok_or_else(|| internal_err!("backfill of an exchange input"))?;
                    let (first, end) = eddy_storage::scan::vnode_bounds(upstream.table_id(), &vnodes);
                    let start = fill.pos.clone().map_or(first, Bound::Excluded);
                    let batch_rows = bf.rows_per_epoch.min(8192);
                    fill.scan = Some(upstream.scan_stream_keys_by(&snapshot, start, end, batch_rows).await?);
                }
                let scan = fill.scan.as_mut().ok_or_else(|| internal_err!("backfill scan vanished"))?;
                match scan.next_batch_with_last_key().await? {
                    Some((batch, last)) => {
                        fill.pos = Some(last);
                        fill.rows += batch.num_rows() as u64;
                        read += batch.num_rows();
                        self.metrics.backfill.rows_done.fetch_add(batch.num_rows() as u64, Relaxed);
                        self.push(At::Branch(b, 0), vec![StreamChunk::inserts(batch)]).await?;
                    }
                    None => {
                        fill.done = true;
                        fill.scan = None;
                    }
                }
                if read >= bf.rows_per_epoch || fills.iter().all(|f| f.done) {
                    bf.barrier.request_barrier();
                }
                continue;
            };
            // Inputs close only when an upstream failed (see `run_inner`).
            let Some(item) = next? else { return Err(internal_err!("the relation this view reads failed")) };
            match item {
                // Changes pass at once only when they cannot overtake held ones.
                // A branch may have several input channels (behind an exchange).
                Aligned::Chunk(i, c) => {
                    let b = self.input_branch[i];
                    if fills[b].done && fills[b].held.is_empty() {
                        self.push(At::Branch(b, 0), vec![c]).await?;
                    } else {
                        fills[b].held.push(c);
                    }
                }
                Aligned::Errors(_, d) => self.errors.merge(&d),
                // Snapshot rows may be behind an input's watermark: windows close only once
                // the backfill is done (the inputs send their watermark at every barrier).
                Aligned::Watermark(..) => {}
                Aligned::Barrier(barrier) => {
                    for (b, fill) in fills.iter_mut().enumerate() {
                        for c in std::mem::take(&mut fill.held) {
                            let c = if fill.done { c } else { self.upto(b, c, fill.pos.as_deref())? };
                            self.push(At::Branch(b, 0), vec![c]).await?;
                        }
                        // Where to read on after a restart, committed with what was read.
                        if bf.record_positions && self.upstreams[b].is_some() {
                            let key = self.position_key(b);
                            self.own_writes.push((key, encode_position(fill.done, fill.rows, fill.pos.as_deref())));
                        }
                    }
                    if self.barrier(&barrier).await? {
                        return Ok(false);
                    }
                    if fills.iter().all(|f| f.done) {
                        let progress = &self.metrics.backfill;
                        // The view's backfill is done when its last actor's is.
                        if progress.pending.fetch_sub(1, Relaxed) <= 1 {
                            progress.ended_ms.store(now_ms(), Relaxed);
                            progress.done.store(true, Relaxed);
                            progress.active.store(false, Relaxed);
                        }
                        // CREATE waits for this; it may have given up (then the view is dropped).
                        let _ = bf.done.send(barrier.epoch);
                        return Ok(true);
                    }
                    completed_through(&mut completed, barrier.epoch).await?;
                    snapshot = self.store.snapshot();
                    for f in &mut fills {
                        f.scan = None;
                    }
                    read = 0;
                }
            }
        }
    }

    /// The rows of `chunk` (changes of input `b`'s upstream) at or before `pos`, as plain
    /// inserts and deletes (an update's halves may fall on either side of `pos`).
    fn upto(&self, b: usize, chunk: StreamChunk, pos: Option<&[u8]>) -> Result<StreamChunk> {
        let upstream = self.upstreams[b].as_ref().ok_or_else(|| internal_err!("backfill of an exchange input"))?;
        let keys = upstream.keys_of(&chunk.batch)?;
        let keep: BooleanArray = keys.iter().map(|k| Some(pos.is_some_and(|p| k.as_slice() <= p))).collect();
        chunk.filter_plain(&keep)
    }

    /// Key of the committed backfill position of this actor's branch `b`.
    fn position_key(&self, b: usize) -> Vec<u8> {
        let p = &self.placement;
        eddy_common::codec::backfill_key(p.view, p.fragment, p.shard, b as u16)
    }

}

/// Counts the rows a backfill will read (the upstreams' rows in `snapshot`) in a task of its
/// own, so the count never delays the load; progress shows the total once it is known.
fn count_backfill_total(metrics: Arc<ViewMetrics>, snapshot: &eddy_storage::ReadSnapshot, tables: Vec<u32>) {
    let snapshot = snapshot.clone();
    tokio::spawn(async move {
        let mut total = 0u64;
        for t in tables {
            let (start, end) = eddy_storage::scan::prefix_bounds(&eddy_common::codec::table_prefix(t));
            let Ok(mut cursor) = snapshot.scan_batches(start, end, 4096).await else { return };
            loop {
                match cursor.next_batch().await {
                    Ok(Some(batch)) => total += batch.len() as u64,
                    Ok(None) => break,
                    Err(_) => return,
                }
            }
        }
        metrics.backfill.rows_total.fetch_add(total, Relaxed);
    });
}
