//! What a write to a table is ([`TableWrite`]) and how its rows resolve against the table's
//! current rows: the single writer of a table (its [`crate::TableActor`]) decides primary-key
//! conflicts here, against current state rather than the statement's snapshot.
//!
//! Resolution is a pure function over the current values of the keys a write touches
//! ([`resolve`]); the actor fetches those values first. A write resolves completely or fails
//! with nothing changed, so a statement is atomic.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::interleave;
use eddy_common::codec::RowCodec;
use eddy_common::error::sqlstate;
use eddy_common::{internal_err, user_err, EddyError, Op, Result, StreamChunk};

/// Identifies a transaction (a COPY, a transaction block's commit) across table actors.
pub type TxnId = u64;

/// Computes the row an `INSERT ... ON CONFLICT DO UPDATE` stores for conflicting rows.
pub trait ConflictUpdate: Send + Sync {
    /// For each `i`, the updated version of `existing` row `i` given the proposed row
    /// `proposed` row `i` (`excluded` in SQL), and whether to store it at all (the clause's
    /// `WHERE`). Both batches have the table's storage schema.
    fn update(&self, existing: &RecordBatch, proposed: &RecordBatch) -> Result<(RecordBatch, Vec<bool>)>;
}

/// What an insert does when its key already exists.
#[derive(Clone, Default)]
pub enum OnConflict {
    /// Refuse the whole statement with 23505 (PostgreSQL's primary key).
    #[default]
    Error,
    /// Replace the existing row (upsert).
    Overwrite,
    /// Keep the existing row and drop the new one (`DO NOTHING`).
    Ignore,
    /// Take the new row's non-null values over the existing row's (RisingWave's
    /// `DO UPDATE IF NOT NULL`).
    UpdateIfNotNull,
    /// `ON CONFLICT DO UPDATE SET ...`: a row may be affected only once per statement (21000).
    Update(Arc<dyn ConflictUpdate>),
    /// An `UPDATE` evaluated against the writer's current rows: each insert names an existing
    /// row by its key, which the update rewrites (or leaves, if its `WHERE` no longer holds);
    /// a row deleted meanwhile is skipped. Concurrent `SET v = v + 1`s lose nothing, as under
    /// PostgreSQL's row locks.
    UpdateExisting(Arc<dyn ConflictUpdate>),
}

impl std::fmt::Debug for OnConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OnConflict::Error => "Error",
            OnConflict::Overwrite => "Overwrite",
            OnConflict::Ignore => "Ignore",
            OnConflict::UpdateIfNotNull => "UpdateIfNotNull",
            OnConflict::Update(_) => "Update",
            OnConflict::UpdateExisting(_) => "UpdateExisting",
        })
    }
}

/// One statement's changes to one table, in the table's storage schema.
///
/// `Insert` rows are inserted under `on_conflict`; `Delete` rows remove the row with their key
/// (only key columns are read) if it exists; an adjacent `UpdateDelete`/`UpdateInsert` pair
/// replaces the row with the first one's key by the second row, if that row still exists (a
/// key change that lands on another existing row is a 23505 conflict).
#[derive(Debug, Clone)]
pub struct TableWrite {
    /// The changes.
    pub chunk: StreamChunk,
    /// What inserts do on a key conflict.
    pub on_conflict: OnConflict,
    /// Return the affected rows (new versions for inserts and updates, old ones for deletes).
    pub returning: bool,
}

/// What a write did.
#[derive(Debug, Clone, Default)]
pub struct WriteOutcome {
    /// Rows inserted, updated or deleted (PostgreSQL's command-tag count).
    pub rows: usize,
    /// The affected rows, when asked for.
    pub returned: Option<RecordBatch>,
}

/// A resolved write: key-value changes, the change stream downstream views see, and the outcome.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Key → new encoded row (`None`: deleted), in write order.
    pub kv: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Changes as downstream views must see them (deletes carry the full old row).
    pub changes: Option<StreamChunk>,
    /// What the statement did.
    pub outcome: WriteOutcome,
}

/// The error of a primary-key conflict.
pub fn unique_violation(table: &str) -> EddyError {
    user_err!(sqlstate::UNIQUE_VIOLATION, "duplicate key value violates unique constraint \"{table}_pkey\"")
}

/// Where an output row comes from: the write's row `i`, old row `j`, or merged row `m`.
#[derive(Clone, Copy)]
enum Pick {
    New(usize),
    Old(usize),
    Merged(usize),
}

/// Resolves `write` against `current`, the current encoded row of every key it touches
/// (`None`: absent). `keys[i]` is the state key of the write's row `i`. Nothing is changed on
/// error. `no_conflicts`: keys are fresh hidden row ids, so inserts cannot conflict.
pub fn resolve(
    write: &TableWrite,
    keys: &[Vec<u8>],
    current: &HashMap<Vec<u8>, Option<Vec<u8>>>,
    codec: &RowCodec,
    table: &str,
    no_conflicts: bool,
) -> Result<Resolved> {
    let chunk = &write.chunk;
    let new_values = codec.encode_values(&chunk.batch)?;
    if no_conflicts && chunk.ops.iter().all(|o| *o == Op::Insert) {
        // Fresh hidden row ids: every row is inserted as it is, and is its own change.
        let kv = keys.iter().zip(new_values.iter()).map(|(k, v)| (k.clone(), Some(v.data().to_vec()))).collect();
        let rows = chunk.len();
        let batch = RecordBatch::try_new(codec.schema().clone(), chunk.batch.columns().to_vec())?;
        let changes = (rows > 0).then(|| StreamChunk::try_new(batch.clone(), chunk.ops.clone())).transpose()?;
        let returned = write.returning.then_some(batch);
        return Ok(Resolved { kv, changes, outcome: WriteOutcome { rows, returned } });
    }
    // This statement's own changes, over `current`.
    let mut local: HashMap<&[u8], Option<Vec<u8>>> = HashMap::new();
    let lookup = |local: &HashMap<&[u8], Option<Vec<u8>>>, k: &[u8]| -> Option<Vec<u8>> {
        match local.get(k) {
            Some(v) => v.clone(),
            None => current.get(k).cloned().flatten(),
        }
    };
    let mut kv: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::with_capacity(keys.len());
    let mut picks: Vec<Pick> = Vec::new();
    let mut ops: Vec<Op> = Vec::new();
    let mut old_rows: Vec<Vec<u8>> = Vec::new();
    let mut returned: Vec<Pick> = Vec::new();
    let mut rows = 0usize;
    // `ON CONFLICT DO UPDATE` rows, computed in a second pass.
    let mut merges: Vec<(usize, Vec<u8>)> = Vec::new();
    // Rows computed from an existing and a proposed row (`Pick::Merged` indexes their concatenation).
    let mut merged_rows: Vec<RecordBatch> = Vec::new();
    let mut affected: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    let n = chunk.len();
    let mut i = 0;
    while i < n {
        let op = chunk.ops[i];
        let key = keys[i].as_slice();
        match op {
            Op::Insert => {
                if matches!(write.on_conflict, OnConflict::Update(_) | OnConflict::UpdateExisting(_)) && !affected.insert(key) {
                    return Err(user_err!(
                        "21000",
                        "ON CONFLICT DO UPDATE command cannot affect row a second time; ensure that no rows proposed for insertion within the same command have duplicate constrained values"
                    ));
                }
                let old = if no_conflicts { None } else { lookup(&local, key) };
                let new = new_values.row(i).data().to_vec();
                match (old, &write.on_conflict) {
                    // The row to update is gone.
                    (None, OnConflict::UpdateExisting(_)) => {}
                    (None, _) => {
                        picks.push(Pick::New(i));
                        ops.push(Op::Insert);
                        returned.push(Pick::New(i));
                        kv.push((key.to_vec(), Some(new.clone())));
                        local.insert(key, Some(new));
                        rows += 1;
                    }
                    (Some(_), OnConflict::Error) => return Err(unique_violation(table)),
                    (Some(_), OnConflict::Ignore) => {}
                    (Some(o), OnConflict::Overwrite) => {
                        picks.push(Pick::Old(old_rows.len()));
                        old_rows.push(o);
                        ops.push(Op::UpdateDelete);
                        picks.push(Pick::New(i));
                        ops.push(Op::UpdateInsert);
                        returned.push(Pick::New(i));
                        kv.push((key.to_vec(), Some(new.clone())));
                        local.insert(key, Some(new));
                        rows += 1;
                    }
                    (Some(o), OnConflict::UpdateIfNotNull) => {
                        // Row by row: a later row of the same key merges over this result.
                        let existing = codec.decode_values([o.as_slice()])?;
                        let proposed = chunk.batch.slice(i, 1);
                        let proposed = RecordBatch::try_new(existing.schema(), proposed.columns().to_vec())?;
                        let merged = coalesce_new_over_old(&proposed, &existing)?;
                        let m = merged_rows.len();
                        merged_rows.push(merged);
                        let new = codec.encode_values(&merged_rows[m])?.row(0).data().to_vec();
                        rows += 1;
                        returned.push(Pick::Merged(m));
                        if new != o {
                            picks.push(Pick::Old(old_rows.len()));
                            old_rows.push(o);
                            ops.push(Op::UpdateDelete);
                            picks.push(Pick::Merged(m));
                            ops.push(Op::UpdateInsert);
                            kv.push((key.to_vec(), Some(new.clone())));
                        }
                        local.insert(key, Some(new));
                    }
                    (Some(o), OnConflict::Update(_) | OnConflict::UpdateExisting(_)) => {
                        // Evaluated for all conflicting rows at once below; each key at most once.
                        merges.push((i, o));
                    }
                }
                i += 1;
            }
            Op::Delete => {
                if let Some(o) = lookup(&local, key) {
                    picks.push(Pick::Old(old_rows.len()));
                    returned.push(Pick::Old(old_rows.len()));
                    old_rows.push(o);
                    ops.push(Op::Delete);
                    kv.push((key.to_vec(), None));
                    local.insert(key, None);
                    rows += 1;
                }
                i += 1;
            }
            Op::UpdateDelete => {
                if i + 1 >= n || chunk.ops[i + 1] != Op::UpdateInsert {
                    return Err(internal_err!("an update's delete is not followed by its insert"));
                }
                let new_key = keys[i + 1].as_slice();
                if let Some(o) = lookup(&local, key) {
                    if new_key != key && lookup(&local, new_key).is_some() {
                        return Err(unique_violation(table));
                    }
                    let new = new_values.row(i + 1).data().to_vec();
                    if new_key == key {
                        picks.push(Pick::Old(old_rows.len()));
                        old_rows.push(o);
                        ops.push(Op::UpdateDelete);
                        picks.push(Pick::New(i + 1));
                        ops.push(Op::UpdateInsert);
                    } else {
                        picks.push(Pick::Old(old_rows.len()));
                        old_rows.push(o);
                        ops.push(Op::Delete);
                        kv.push((key.to_vec(), None));
                        local.insert(key, None);
                        picks.push(Pick::New(i + 1));
                        ops.push(Op::Insert);
                    }
                    returned.push(Pick::New(i + 1));
                    kv.push((new_key.to_vec(), Some(new.clone())));
                    local.insert(new_key, Some(new));
                    rows += 1;
                }
                i += 2;
            }
            _ => return Err(internal_err!("an update's insert without its delete")),
        }
    }
    // `DO UPDATE` rows: existing row + proposed row → stored row, evaluated together.
    if let (false, OnConflict::Update(f) | OnConflict::UpdateExisting(f)) = (merges.is_empty(), &write.on_conflict) {
        let existing = codec.decode_values(merges.iter().map(|(_, o)| o.as_slice()))?;
        let idx: Vec<(usize, usize)> = merges.iter().map(|(i, _)| (0, *i)).collect();
        let proposed = RecordBatch::try_new(existing.schema(), take_rows(&chunk.batch, &idx)?.columns().to_vec())?;
        let (out, keep) = f.update(&existing, &proposed)?;
        if out.num_rows() != merges.len() || keep.len() != merges.len() {
            return Err(internal_err!("conflict update returned {} rows for {}", out.num_rows(), merges.len()));
        }
        let out_values = codec.encode_values(&out)?;
        let base = merged_rows.len();
        merged_rows.push(out);
        for (m, ((i, o), keep)) in merges.iter().zip(keep).enumerate() {
            let key = keys[*i].as_slice();
            if !keep {
                continue;
            }
            let new = out_values.row(m).data().to_vec();
            rows += 1;
            returned.push(Pick::Merged(base + m));
            if new == *o {
                continue;
            }
            picks.push(Pick::Old(old_rows.len()));
            old_rows.push(o.clone());
            ops.push(Op::UpdateDelete);
            picks.push(Pick::Merged(base + m));
            ops.push(Op::UpdateInsert);
            kv.push((key.to_vec(), Some(new.clone())));
            local.insert(key, Some(new));
        }
    }
    let schema = codec.schema().clone();
    let old_batch = codec.decode_values(old_rows.iter().map(|v| v.as_slice()))?;
    let new_batch = RecordBatch::try_new(schema.clone(), chunk.batch.columns().to_vec())?;
    let merged = if merged_rows.is_empty() {
        RecordBatch::new_empty(schema.clone())
    } else {
        let rebound = merged_rows
            .iter()
            .map(|b| RecordBatch::try_new(schema.clone(), b.columns().to_vec()))
            .collect::<Result<Vec<_>, _>>()?;
        arrow::compute::concat_batches(&schema, &rebound)?
    };
    let gather = |picks: &[Pick]| -> Result<RecordBatch> {
        let idx: Vec<(usize, usize)> = picks
            .iter()
            .map(|p| match p {
                Pick::New(i) => (0, *i),
                Pick::Old(j) => (1, *j),
                Pick::Merged(m) => (2, *m),
            })
            .collect();
        let columns = (0..schema.fields().len())
            .map(|c| {
                let sources: [&dyn Array; 3] = [new_batch.column(c).as_ref(), old_batch.column(c).as_ref(), merged.column(c).as_ref()];
                Ok(interleave(&sources, &idx)?)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        Ok(RecordBatch::try_new(schema.clone(), columns)?)
    };
    let changes = if ops.is_empty() { None } else { Some(StreamChunk::try_new(gather(&picks)?, ops)?) };
    let returned = if write.returning { Some(gather(&returned)?) } else { None };
    Ok(Resolved { kv, changes, outcome: WriteOutcome { rows, returned } })
}

/// Rows `idx` (pairs of batch 0 and row) of `batch`.
fn take_rows(batch: &RecordBatch, idx: &[(usize, usize)]) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .map(|c| Ok(interleave(&[c.as_ref()], idx)?))
        .collect::<Result<Vec<ArrayRef>>>()?;
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// Each column of `new` where it is not null, else of `old`.
fn coalesce_new_over_old(new: &RecordBatch, old: &RecordBatch) -> Result<RecordBatch> {
    let columns = new
        .columns()
        .iter()
        .zip(old.columns())
        .map(|(n, o)| {
            let is_null = arrow::compute::is_null(n.as_ref())?;
            Ok(arrow::compute::kernels::zip::zip(&is_null, o, n)?)
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    Ok(RecordBatch::try_new(new.schema(), columns)?)
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn codec() -> RowCodec {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true), Field::new("v", DataType::Utf8, true)]));
        RowCodec::try_new(schema, vec![0]).unwrap()
    }

    fn write(text: &str, on_conflict: OnConflict) -> TableWrite {
        let chunk = StreamChunk::from_pretty(text).unwrap();
        let batch = RecordBatch::try_new(codec().schema().clone(), chunk.batch.columns().to_vec()).unwrap();
        TableWrite { chunk: StreamChunk::try_new(batch, chunk.ops).unwrap(), on_conflict, returning: true }
    }

    fn run(w: &TableWrite, existing: &[(i64, &str)]) -> Result<Resolved> {
        let c = codec();
        let keys = c.encode_keys(1, &w.chunk.batch).unwrap();
        let mut current = HashMap::new();
        for (k, v) in existing {
            let e = write(&format!(" I T\n + {k} {v}"), OnConflict::Error);
            let key = c.encode_keys(1, &e.chunk.batch).unwrap().remove(0);
            current.insert(key, Some(c.encode_values(&e.chunk.batch).unwrap().row(0).data().to_vec()));
        }
        for k in &keys {
            current.entry(k.clone()).or_insert(None);
        }
        resolve(w, &keys, &current, &c, "t", false)
    }

    #[test]
    fn a_duplicate_key_fails_the_whole_statement_by_default() {
        let e = run(&write(" I T\n + 1 a\n + 2 b", OnConflict::Error), &[(2, "x")]).unwrap_err();
        assert_eq!(e.sqlstate, sqlstate::UNIQUE_VIOLATION);
        let e = run(&write(" I T\n + 3 a\n + 3 b", OnConflict::Error), &[]).unwrap_err();
        assert_eq!(e.sqlstate, sqlstate::UNIQUE_VIOLATION, "a key repeated within the statement conflicts too");
    }

    #[test]
    fn overwrite_turns_a_conflict_into_an_update() {
        let r = run(&write(" I T\n + 1 a", OnConflict::Overwrite), &[(1, "x")]).unwrap();
        assert_eq!(r.changes.unwrap().ops, vec![Op::UpdateDelete, Op::UpdateInsert]);
        assert_eq!(r.outcome.rows, 1);
    }

    #[test]
    fn ignore_keeps_the_first_row_of_a_key() {
        let r = run(&write(" I T\n + 1 a\n + 1 b\n + 2 c", OnConflict::Ignore), &[(2, "x")]).unwrap();
        assert_eq!(r.outcome.rows, 1);
        assert_eq!(r.kv.len(), 1);
    }

    #[test]
    fn if_not_null_keeps_existing_values_where_the_new_row_has_nulls() {
        let r = run(&write(" I T\n + 1 .", OnConflict::UpdateIfNotNull), &[(1, "x")]).unwrap();
        let out = r.outcome.returned.unwrap();
        assert_eq!(arrow::util::display::array_value_to_string(out.column(1), 0).unwrap(), "x");
        assert!(r.changes.is_none(), "an unchanged row emits nothing");
    }

    #[test]
    fn deletes_of_missing_keys_change_nothing_and_updates_of_missing_rows_are_skipped() {
        let r = run(&write(" I T\n - 1 .\n U- 2 .\n U+ 2 b", OnConflict::Error), &[]).unwrap();
        assert_eq!(r.outcome.rows, 0);
        assert!(r.changes.is_none());
    }

    #[test]
    fn an_update_moving_a_key_onto_an_existing_row_conflicts() {
        let e = run(&write(" I T\n U- 1 .\n U+ 2 a", OnConflict::Error), &[(1, "a"), (2, "b")]).unwrap_err();
        assert_eq!(e.sqlstate, sqlstate::UNIQUE_VIOLATION);
        let r = run(&write(" I T\n U- 1 .\n U+ 3 a", OnConflict::Error), &[(1, "a")]).unwrap();
        assert_eq!(r.changes.unwrap().ops, vec![Op::Delete, Op::Insert]);
    }

    #[test]
    fn deletes_carry_the_current_row_downstream() {
        let r = run(&write(" I T\n - 1 .", OnConflict::Error), &[(1, "current")]).unwrap();
        let c = r.changes.unwrap();
        assert_eq!(arrow::util::display::array_value_to_string(c.batch.column(1), 0).unwrap(), "current");
    }
}
