//! Transaction blocks: `BEGIN`, `COMMIT`, `ROLLBACK`, `SAVEPOINT`, `RELEASE`, `ROLLBACK TO`.
//!
//! A block's writes stay in the session until COMMIT: each statement is resolved against the
//! latest committed epoch plus the block's earlier writes (so the block reads its own writes,
//! through an overlay the table providers merge into their scans), and recorded. COMMIT sends
//! the recorded writes to the tables' writers, staged in table-id order, and applies them in
//! one epoch once every table has accepted its part; if one refuses (a key another transaction
//! inserted meanwhile: 23505), none is applied. ROLLBACK drops them; ROLLBACK TO SAVEPOINT drops
//! the writes recorded after the savepoint.
//!
//! The block's recorded writes count against the session's `--query-memory-mb`: a statement
//! that would take the block past it fails with `53200` (the block is then aborted), so one
//! session cannot fill the server's memory with uncommitted writes.
//!
//! Isolation is PostgreSQL's default, READ COMMITTED: every statement reads the latest
//! committed epoch (plus the block's own writes). Writes to the same key by concurrent
//! transactions: the last COMMIT wins, except that an insert of a new key fails at COMMIT with
//! 23505 if another transaction committed that key first.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::Ident;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};
use eddy_stream::{resolve, TableWrite, WriteOutcome};

use crate::catalog::TableCatalog;
use crate::frontend::output::{command, Output};
use crate::frontend::session::Session;
use crate::frontend::state::{Block, BlockWrite, Overlay};
use crate::frontend::statement::ident_name;





impl Session {
    /// True inside `BEGIN ... COMMIT`.
    pub fn in_transaction(&self) -> bool {
        self.block.is_some()
    }

    /// Leaves the transaction block without applying it (ROLLBACK, or COMMIT of a failed block).
    pub fn end_transaction(&mut self) {
        self.block = None;
        self.close_block_cursors(false);
    }

    /// The open block's writes as table providers merge them into reads (empty outside a block).
    pub(crate) fn overlay(&self) -> Overlay {
        self.block.as_ref().map(|b| b.overlay.clone()).unwrap_or_default()
    }

    /// Sends one statement's write to its table: applied now in autocommit mode, recorded in
    /// the open block otherwise.
    pub(crate) async fn write(&mut self, table: &Arc<TableCatalog>, write: TableWrite) -> Result<WriteOutcome> {
        if self.block.is_none() {
            return self.engine.write_table(table.id, write).await;
        }
        // Resolved against the latest committed rows plus the block's own writes.
        let codec = table.codec()?;
        let keys = codec.encode_keys(table.id, &write.chunk.batch)?;
        let snapshot = self.engine.store.snapshot();
        let overlay = self.block.as_ref().and_then(|b| b.overlay.get(&table.id).cloned());
        let mut current = HashMap::new();
        let only_inserts = write.chunk.ops.iter().all(|o| *o == eddy_common::Op::Insert);
        if !(table.has_row_id() && only_inserts) {
            for k in &keys {
                if current.contains_key(k) {
                    continue;
                }
                let v = match overlay.as_ref().and_then(|o| o.get(k)) {
                    Some(v) => v.clone(),
                    None => snapshot.get(k).await?.map(|b| b.to_vec()),
                };
                current.insert(k.clone(), v);
            }
        }
        let resolved = resolve(&write, &keys, &current, &codec, &table.name, table.has_row_id())?;
        let limit = self.engine.config.query_memory_bytes;
        let block = self.block.as_mut().ok_or_else(|| eddy_common::internal_err!("transaction block vanished"))?;
        let recorded = BlockWrite { table: table.clone(), write, kv: resolved.kv };
        let bytes = block.bytes + recorded.approx_bytes();
        if bytes > limit {
            return Err(user_err!(
                sqlstate::OUT_OF_MEMORY,
                "out of memory: the transaction block would hold {} MiB of uncommitted writes, more than the {} MiB a session may buffer \
                 (--query-memory-mb); commit in smaller transactions, or run the COPY or INSERT outside a transaction block, where it streams",
                bytes >> 20,
                limit >> 20
            ));
        }
        let t = block.overlay.entry(table.id).or_default();
        let t = Arc::make_mut(t);
        for (k, v) in &recorded.kv {
            t.insert(k.clone(), v.clone());
        }
        block.bytes = bytes;
        block.writes.push(recorded);
        Ok(resolved.outcome)
    }

    /// `BEGIN` / `START TRANSACTION`.
    pub(crate) fn begin(&mut self) -> Output {
        if self.block.is_some() {
            self.notice("there is already a transaction in progress");
        } else {
            self.block = Some(Block::default());
        }
        Output::TransactionStart("BEGIN".into())
    }

    /// `COMMIT`: applies the block's writes in one epoch, or none of them.
    pub(crate) async fn commit(&mut self) -> Result<Output> {
        let Some(block) = self.block.take() else {
            self.notice("there is no transaction in progress");
            return Ok(Output::TransactionEnd("COMMIT".into()));
        };
        if block.writes.is_empty() {
            self.close_block_cursors(true);
            return Ok(Output::TransactionEnd("COMMIT".into()));
        }
        let txn = self.engine.begin_txn();
        // Staged in table-id order, each table's writes in statement order.
        let mut by_table: BTreeMap<u32, Vec<TableWrite>> = BTreeMap::new();
        for w in block.writes {
            by_table.entry(w.table.id).or_default().push(w.write);
        }
        let tables: Vec<u32> = by_table.keys().copied().collect();
        let mut staged = BTreeSet::new();
        for (table, writes) in by_table {
            for write in writes {
                staged.insert(table);
                if let Err(e) = self.engine.stage(table, txn, write).await {
                    self.engine.abort_txn(txn, &staged.iter().copied().collect::<Vec<_>>()).await;
                    self.close_block_cursors(false);
                    return Err(e);
                }
            }
        }
        let committed = self.engine.commit_txn(txn, &tables).await;
        self.close_block_cursors(committed.is_ok());
        committed?;
        Ok(Output::TransactionEnd("COMMIT".into()))
    }

    /// `ROLLBACK`.
    pub(crate) fn rollback(&mut self) -> Output {
        if self.block.is_none() {
            self.notice("there is no transaction in progress");
        }
        self.end_transaction();
        Output::TransactionEnd("ROLLBACK".into())
    }

    /// `SAVEPOINT name`.
    pub(crate) fn savepoint(&mut self, name: &Ident) -> Result<Output> {
        let block = self
            .block
            .as_mut()
            .ok_or_else(|| user_err!(sqlstate::NO_ACTIVE_SQL_TRANSACTION, "SAVEPOINT can only be used in transaction blocks"))?;
        block.savepoints.push((ident_name(name), block.writes.len()));
        Ok(command("SAVEPOINT"))
    }

    /// `RELEASE [SAVEPOINT] name`: forgets it and the savepoints after it.
    pub(crate) fn release_savepoint(&mut self, name: &Ident) -> Result<Output> {
        let at = self.savepoint_index(name, "RELEASE SAVEPOINT")?;
        if let Some(b) = self.block.as_mut() {
            b.savepoints.truncate(at);
        }
        Ok(command("RELEASE"))
    }

    /// `ROLLBACK TO [SAVEPOINT] name`: drops the writes after it (the savepoint stays).
    pub(crate) fn rollback_to_savepoint(&mut self, name: &Ident) -> Result<Output> {
        let at = self.savepoint_index(name, "ROLLBACK TO SAVEPOINT")?;
        if let Some(b) = self.block.as_mut() {
            let keep = b.savepoints[at].1;
            b.savepoints.truncate(at + 1);
            if b.writes.len() > keep {
                b.writes.truncate(keep);
                b.rebuild_overlay();
            }
        }
        Ok(command("ROLLBACK"))
    }

    /// Position of the newest savepoint called `name`.
    fn savepoint_index(&self, name: &Ident, what: &str) -> Result<usize> {
        let Some(block) = &self.block else {
            return Err(user_err!(sqlstate::NO_ACTIVE_SQL_TRANSACTION, "{what} can only be used in transaction blocks"));
        };
        let name = ident_name(name);
        block
            .savepoints
            .iter()
            .rposition(|(s, _)| *s == name)
            .ok_or_else(|| user_err!(sqlstate::INVALID_SAVEPOINT_SPECIFICATION, "savepoint \"{name}\" does not exist"))
    }
}
