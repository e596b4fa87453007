//! `SUBSCRIBE [TO] relation [WITH (SNAPSHOT [= bool], PROGRESS [= bool])]`, as in
//! Materialize: the relation's rows at the current committed epoch (unless `SNAPSHOT = false`),
//! then every committed change, as rows `mz_timestamp` (the epoch), [`mz_progressed`],
//! `mz_diff` (+1 for an inserted row, -1 for a deleted one; an update is both), and the
//! relation's columns. The result never ends by itself: it is read as it arrives through the
//! simple protocol, an Execute, `COPY (SUBSCRIBE ...) TO STDOUT` or a cursor
//! (`DECLARE c CURSOR FOR SUBSCRIBE ...; FETCH ...`), and ends with an error when the relation
//! is dropped or fails, or when the client cancels it.
//!
//! Only committed epochs are delivered ([`eddy_stream::Subscription`]), so every change a
//! client has seen survives a crash. With `PROGRESS`, a row with `mz_progressed = true` and
//! NULL elsewhere follows each epoch: everything up to that epoch has been delivered.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, BooleanArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::sql::sqlparser::ast::ObjectName;
use datafusion::sql::sqlparser::tokenizer::Token;
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, EddyError, Epoch, Op, Result};
use eddy_storage::TableScan;
use eddy_stream::{Mutation, Output, Sealed, Subscription, CHANNEL_CAPACITY};

use crate::catalog::{RelationKind, TableCatalog};
use crate::frontend::names::resolve_relation;
use crate::frontend::session::Session;
use crate::frontend::split::Code;
use crate::planner::provider::{row_errors_error, view_error_counts, RowErrorCounts};

/// Changes a subscription may hold for a client that reads slower than they come.
pub const SUBSCRIBE_BUFFER_BYTES: usize = 64 << 20;

/// A parsed `SUBSCRIBE`.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscribeSpec {
    /// The relation followed.
    pub relation: ObjectName,
    /// Start with the relation's current rows.
    pub snapshot: bool,
    /// Emit a progress row after each epoch.
    pub progress: bool,
}

/// Parses `SUBSCRIBE [TO] name [WITH (options)]`.
pub fn parse_subscribe(sql: &str) -> Result<SubscribeSpec> {
    let mut code = Code::new(sql)?;
    code.expect_word("SUBSCRIBE")?;
    if code.peek() == Some(&Token::LParen) {
        return Err(not_supported!(
            "SUBSCRIBE to a query is not supported; create a materialized view of the query and subscribe to it"
        ));
    }
    // `TO` is optional; a relation called "to" must then be quoted.
    code.eat_word("TO");
    let relation = code.object_name()?;
    let mut spec = SubscribeSpec { relation, snapshot: true, progress: false };
    if code.eat_word("WITH") {
        for (name, value) in code.options()? {
            if !matches!(name.as_str(), "snapshot" | "progress") {
                return Err(user_err!(sqlstate::SYNTAX_ERROR, "unknown SUBSCRIBE option \"{name}\" (known: snapshot, progress)"));
            }
            let on = match value.as_deref().map(str::to_ascii_lowercase).as_deref() {
                None | Some("true" | "on" | "1") => true,
                Some("false" | "off" | "0") => false,
                Some(other) => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "option {name} takes a boolean, not \"{other}\"")),
            };
            if name == "snapshot" {
                spec.snapshot = on;
            } else {
                spec.progress = on;
            }
        }
    }
    if code.eat_word("AS") || code.eat_word("UP") || code.eat_word("ENVELOPE") {
        return Err(not_supported!("SUBSCRIBE takes only WITH (SNAPSHOT, PROGRESS) here"));
    }
    code.expect_end()?;
    Ok(spec)
}

/// `COPY (SUBSCRIBE ...) TO ...`: the subscription, and the statement with `(SELECT 1)` in its
/// place (sqlparser reads the rest). `None` for any other COPY.
pub fn take_copy_subscribe(sql: &str) -> Result<Option<(SubscribeSpec, String)>> {
    let Some(tokens) = crate::frontend::split::tokens_with_offsets(sql) else { return Ok(None) };
    let code: Vec<&(Token, usize)> = tokens.iter().filter(|(t, _)| !matches!(t, Token::Whitespace(_))).collect();
    let is_word = |i: usize, w: &str| matches!(code.get(i), Some((Token::Word(x), _)) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    if !(is_word(0, "COPY") && matches!(code.get(1), Some((Token::LParen, _))) && is_word(2, "SUBSCRIBE")) {
        return Ok(None);
    }
    let mut depth = 0usize;
    for (t, at) in code.iter().skip(1) {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    let spec = parse_subscribe(&sql[code[2].1..*at])?;
                    return Ok(Some((spec, format!("{}(SELECT 1){}", &sql[..code[1].1], &sql[at + 1..]))));
                }
            }
            _ => {}
        }
    }
    Err(user_err!(sqlstate::SYNTAX_ERROR, "syntax error in COPY (SUBSCRIBE ...): unbalanced parentheses"))
}

impl Session {
    /// The relation a `SUBSCRIBE` follows: a table or a materialized view.
    fn subscribed_relation(&self, spec: &SubscribeSpec) -> Result<Arc<TableCatalog>> {
        let (_, name, rel) = resolve_relation(self, &spec.relation)?;
        match rel.kind {
            RelationKind::Table | RelationKind::MaterializedView => Ok(rel),
            RelationKind::Source => Err(not_supported!(
                "cannot subscribe to source \"{name}\": a source keeps no rows; subscribe to a materialized view over it"
            )),
            RelationKind::View => Err(not_supported!(
                "cannot subscribe to view \"{name}\": create a materialized view of its query and subscribe to that"
            )),
            RelationKind::Sink => Err(user_err!(sqlstate::WRONG_OBJECT_TYPE, "\"{name}\" is a sink, which keeps no rows; subscribe to what it reads")),
        }
    }

    /// The columns `SUBSCRIBE` returns.
    pub(crate) fn subscribe_schema(&self, spec: &SubscribeSpec) -> Result<SchemaRef> {
        let rel = self.subscribed_relation(spec)?;
        Ok(output_schema(&rel, spec.progress))
    }

    /// Starts a `SUBSCRIBE`: its columns and its never-ending stream of rows.
    pub(crate) async fn subscribe(&mut self, spec: &SubscribeSpec) -> Result<(SchemaRef, SendableRecordBatchStream)> {
        let rel = self.subscribed_relation(spec)?;
        if let Some(e) = self.engine.view_failure(&rel) {
            return Err(e);
        }
        let (tx, rx) = tokio::sync::mpsc::channel(CHANNEL_CAPACITY);
        let mut sub = Subscription::start(rel.id, rx, &self.engine.barrier, SUBSCRIBE_BUFFER_BYTES);
        let output = Output { actor: self.engine.subscriber_id(), tx };
        let mutation = Mutation { add_outputs: HashMap::from([(rel.id, vec![output.into()])]), ..Default::default() };
        self.engine.barrier.inject(mutation, vec![]).await?;
        // The relation's actor sends the changes of the epochs after that barrier; the
        // snapshot holds every epoch up to its own, which is that one or later.
        let snapshot = self.engine.store.snapshot();
        sub.skip_through(snapshot.epoch);
        let errors = if rel.is_view() { view_error_counts(&rel, &snapshot).await? } else { RowErrorCounts::new() };
        if let Some(e) = row_errors_error(&rel.name, &errors) {
            return Err(e);
        }
        let scan = if spec.snapshot { Some(rel.state_table()?.scan_stream(&snapshot).await?) } else { None };
        let schema = output_schema(&rel, spec.progress);
        let follow = Follow {
            engine: self.engine.clone(),
            visible: rel.visible_indices(),
            rel,
            schema: schema.clone(),
            progress: spec.progress,
            sub,
            scan,
            snapshot_epoch: snapshot.epoch,
            errors,
            ready: Default::default(),
            done: false,
        };
        let stream = futures::stream::unfold(follow, |mut f| async move {
            let item = f.next().await.transpose()?;
            Some((item.map_err(|e| DataFusionError::External(Box::new(e))), f))
        });
        Ok((schema.clone(), Box::pin(RecordBatchStreamAdapter::new(schema, stream))))
    }
}

/// `mz_timestamp`, [`mz_progressed`], `mz_diff`, then the relation's visible columns (all
/// nullable: progress rows have no values).
fn output_schema(rel: &TableCatalog, progress: bool) -> SchemaRef {
    let mut fields = vec![Field::new("mz_timestamp", DataType::Int64, false)];
    if progress {
        fields.push(Field::new("mz_progressed", DataType::Boolean, false));
    }
    fields.push(Field::new("mz_diff", DataType::Int64, true));
    fields.extend(rel.user_schema().fields().iter().map(|f| f.as_ref().clone().with_nullable(true)));
    Arc::new(Schema::new(fields))
}

/// The state of one subscription's row stream.
struct Follow {
    engine: Arc<crate::engine::Engine>,
    rel: Arc<TableCatalog>,
    /// The stored columns the client sees.
    visible: Vec<usize>,
    schema: SchemaRef,
    progress: bool,
    sub: Subscription,
    /// The initial rows still to send.
    scan: Option<TableScan>,
    snapshot_epoch: Epoch,
    /// The relation's failing-row counts as of the last epoch sent.
    errors: RowErrorCounts,
    /// Batches of the current epoch not yet returned.
    ready: std::collections::VecDeque<RecordBatch>,
    done: bool,
}

impl Follow {
    async fn next(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                return Ok(Some(b));
            }
            if self.done {
                return Ok(None);
            }
            if let Some(scan) = self.scan.as_mut() {
                match scan.next_batch().await? {
                    Some(rows) => {
                        let diffs = Int64Array::from(vec![1i64; rows.num_rows()]);
                        return self.rows(self.snapshot_epoch, &rows, diffs).map(Some);
                    }
                    None => {
                        self.scan = None;
                        if self.progress {
                            return self.progress_row(self.snapshot_epoch).map(Some);
                        }
                        continue;
                    }
                }
            }
            match self.sub.next().await {
                Ok(Some(sealed)) => self.epoch(sealed)?,
                Ok(None) => {
                    self.done = true;
                    return Err(self.ended().await);
                }
                Err(e) => {
                    self.done = true;
                    return Err(e);
                }
            }
        }
    }

    /// Queues the rows of one committed epoch (and its progress row), or fails if the view
    /// has failing rows from then on.
    fn epoch(&mut self, sealed: Sealed) -> Result<()> {
        for d in &sealed.errors {
            *self.errors.entry((d.sqlstate.clone(), d.message.clone())).or_default() += d.delta;
        }
        if let Some(e) = row_errors_error(&self.rel.name, &self.errors) {
            self.done = true;
            return Err(e);
        }
        for c in &sealed.chunks {
            let diffs: Int64Array = c.ops.iter().map(|op| Some(if matches!(op, Op::Insert | Op::UpdateInsert) { 1 } else { -1 })).collect();
            let b = self.rows(sealed.epoch, &c.batch, diffs)?;
            if b.num_rows() > 0 {
                self.ready.push_back(b);
            }
        }
        if self.progress {
            let p = self.progress_row(sealed.epoch)?;
            self.ready.push_back(p);
        }
        Ok(())
    }

    /// Output rows of `rows` (stored columns) at `epoch` with `diffs`.
    fn rows(&self, epoch: Epoch, rows: &RecordBatch, diffs: Int64Array) -> Result<RecordBatch> {
        let n = rows.num_rows();
        let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![epoch.0 as i64; n]))];
        if self.progress {
            columns.push(Arc::new(BooleanArray::from(vec![false; n])));
        }
        columns.push(Arc::new(diffs));
        for &i in &self.visible {
            columns.push(rows.column(i).clone());
        }
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    /// The row saying everything up to `epoch` was sent.
    fn progress_row(&self, epoch: Epoch) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| match i {
                0 => Arc::new(Int64Array::from(vec![epoch.0 as i64])) as ArrayRef,
                1 => Arc::new(BooleanArray::from(vec![true])) as ArrayRef,
                _ => new_null_array(f.data_type(), 1),
            })
            .collect();
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    /// Why the relation's change stream ended.
    async fn ended(&self) -> EddyError {
        if !self.sub.stopped() {
            // A failed actor's report reaches the barrier manager with the next barrier.
            let _ = self.engine.barrier.flush().await;
        }
        if let Some(e) = self.engine.view_failure(&self.rel) {
            return e;
        }
        if self.sub.stopped() || self.engine.catalog().by_id(self.rel.id).is_none() {
            return user_err!(sqlstate::UNDEFINED_TABLE, "the subscription ended: {} \"{}\" was dropped", self.rel.kind_name(), self.rel.name);
        }
        user_err!(sqlstate::SERIALIZATION_FAILURE, "the subscription ended: the server is recovering; subscribe again")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribe_statements_parse() {
        let s = parse_subscribe("SUBSCRIBE TO v").unwrap();
        assert_eq!((s.relation.to_string(), s.snapshot, s.progress), ("v".into(), true, false));
        let s = parse_subscribe("subscribe public.\"V\" with (snapshot = false, progress)").unwrap();
        assert_eq!((s.relation.to_string(), s.snapshot, s.progress), ("public.\"V\"".into(), false, true));
        let s = parse_subscribe("SUBSCRIBE v WITH (SNAPSHOT = 'off', PROGRESS = true)").unwrap();
        assert!(!s.snapshot && s.progress);
        for (bad, code) in [
            ("SUBSCRIBE", sqlstate::SYNTAX_ERROR),
            ("SUBSCRIBE TO v WITH (snap = true)", sqlstate::SYNTAX_ERROR),
            ("SUBSCRIBE TO v WITH (snapshot = maybe)", sqlstate::INVALID_PARAMETER_VALUE),
            ("SUBSCRIBE (SELECT 1)", sqlstate::FEATURE_NOT_SUPPORTED),
            ("SUBSCRIBE TO v extra", sqlstate::SYNTAX_ERROR),
        ] {
            assert_eq!(parse_subscribe(bad).unwrap_err().sqlstate, code, "{bad}");
        }
        let (spec, copy) = take_copy_subscribe("COPY (SUBSCRIBE v WITH (progress)) TO STDOUT WITH (FORMAT csv)").unwrap().unwrap();
        assert!(spec.progress);
        assert_eq!(copy, "COPY (SELECT 1) TO STDOUT WITH (FORMAT csv)");
        assert!(take_copy_subscribe("COPY (SELECT 1) TO STDOUT").unwrap().is_none());
        assert!(take_copy_subscribe("COPY t FROM STDIN").unwrap().is_none());
    }
}
