//! Hash exchanges between the fragments of a parallel view (docs/architecture.md, "Parallel
//! fragments"): the [`Router`]s that say which vnode a row belongs to, and the [`Merger`] that
//! joins the outputs of a view's parallel last fragment back into the one change stream views
//! on it, subscriptions and sinks read.
//!
//! A row's vnode is the one its receiving operator's state keys carry
//! (`eddy_common::codec::vnode_of` of the encoded distribution key), so the actor owning a
//! vnode range owns exactly the state under it, and moving ownership later moves whole ranges.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::PhysicalExpr;
use eddy_common::codec::vnode_of;
use eddy_common::{ErrorKind, Result};
use eddy_storage::StateTable;
use tokio::sync::mpsc;

use crate::merge::{Aligned, AlignedInputs};
use crate::message::{Message, Router, Target};
use crate::operator::eval::eval_all;
use crate::watermark::{advance, min_common, Watermark};

/// Routes the rows of a relation by its own key: the vnode its state table stores each row
/// under (a table's or view's rows, as its downstream views read them).
#[derive(Debug)]
pub struct TableRouter(pub Arc<StateTable>);

impl Router for TableRouter {
    fn vnodes(&self, batch: &RecordBatch) -> Result<Vec<u16>> {
        self.0.vnodes(batch)
    }
}

/// Routes rows by the values of expressions (a grouping's or a partition's key), encoded as
/// the receiving operator encodes its state keys (see [`route_rows`] for failing rows).
#[derive(Debug)]
pub struct ExprRouter {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    fields: Vec<SortField>,
}

impl ExprRouter {
    /// A router by `exprs` over rows of `input`, keyed by their values in plain (ascending,
    /// nulls first) memcomparable form.
    pub fn try_new(exprs: Vec<Arc<dyn PhysicalExpr>>, input: &Schema) -> Result<Self> {
        let fields = exprs.iter().map(|e| Ok(SortField::new(e.data_type(input)?))).collect::<Result<_>>()?;
        Ok(Self { exprs, fields })
    }

    fn vnodes_of_rows(&self, batch: &RecordBatch) -> Result<Vec<u16>> {
        let cols = eval_all(&self.exprs, batch, batch.num_rows())?;
        let converter = RowConverter::new(self.fields.clone())?;
        Ok(converter.convert_columns(&cols)?.iter().map(|k| vnode_of(k.as_ref())).collect())
    }
}

impl Router for ExprRouter {
    fn vnodes(&self, batch: &RecordBatch) -> Result<Vec<u16>> {
        route_rows(batch, |b| self.vnodes_of_rows(b))
    }
}

/// The vnodes `route` gives the rows of `batch`; if a row's key fails to evaluate (a user
/// error, such as a division by zero), rows are routed one by one and the failing ones go to
/// vnode 0: the receiving operator evaluates them again and counts each failure once.
pub(crate) fn route_rows(batch: &RecordBatch, route: impl Fn(&RecordBatch) -> Result<Vec<u16>>) -> Result<Vec<u16>> {
    match route(batch) {
        Ok(v) => Ok(v),
        Err(e) if e.kind == ErrorKind::User => (0..batch.num_rows())
            .map(|i| match route(&batch.slice(i, 1)) {
                Ok(v) => Ok(v[0]),
                Err(e) if e.kind == ErrorKind::User => Ok(0),
                Err(e) => Err(e),
            })
            .collect(),
        Err(e) => Err(e),
    }
}

/// Joins the outputs of the actors of a parallel view's last fragment into the view's change
/// stream, with aligned barriers: it is what the view's downstreams subscribe to (outputs are
/// added and dropped by the barriers' mutations for the view's id, as an actor's are). It
/// reports to nobody: it holds no state, and an epoch is collected from the actors themselves.
/// A watermark passes on as the smallest of the actors' watermarks.
pub struct Merger {
    /// The view.
    view: u32,
    inputs: AlignedInputs,
    /// Each input's latest watermarks.
    watermarks: Vec<Vec<Watermark>>,
    outputs: crate::message::Dispatcher,
}

impl Merger {
    /// Merges `inputs` (one per actor) of view `view`, sending to `outputs`.
    pub fn new(view: u32, inputs: Vec<mpsc::Receiver<Message>>, outputs: Vec<Target>) -> Self {
        let watermarks = vec![Vec::new(); inputs.len()];
        let mut dispatcher = crate::message::Dispatcher::default();
        for o in outputs {
            dispatcher.add(o);
        }
        Self { view, inputs: AlignedInputs::new(inputs), watermarks, outputs: dispatcher }
    }

    /// Runs until the view is dropped, or one of its actors ends (fails): then its outputs
    /// close, and what reads the view fails as it would reading a failed actor.
    pub async fn run(mut self) {
        if let Err(e) = self.run_inner().await {
            tracing::error!("the output of materialized view {} stopped: {e}", self.view);
        }
    }

    async fn run_inner(&mut self) -> Result<()> {
        while let Some(item) = self.inputs.next().await? {
            match item {
                Aligned::Chunk(_, c) => self.outputs.send(Message::Chunk(c)).await?,
                Aligned::Errors(_, d) => self.outputs.send(Message::Errors(d)).await?,
                Aligned::Watermark(i, w) => advance(&mut self.watermarks[i], w),
                Aligned::Barrier(b) => {
                    for w in min_common(&self.watermarks) {
                        self.outputs.send(Message::Watermark(w)).await?;
                    }
                    self.outputs.send_barrier(self.view, &b).await;
                    if b.stops(self.view) {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::scalar::ScalarValue;
    use eddy_common::{Epoch, StreamChunk};

    use super::*;
    use crate::message::{Barrier, Mutation, Output};

    fn chunk(v: i64) -> Message {
        Message::Chunk(StreamChunk::from_pretty(&format!(" I\n + {v}")).unwrap())
    }

    fn watermark(v: i64) -> Message {
        Message::Watermark(Watermark { col: 0, value: ScalarValue::Int64(Some(v)) })
    }

    #[tokio::test]
    async fn the_merger_aligns_barriers_passes_the_slowest_watermark_and_takes_new_outputs() {
        let (tx0, rx0) = mpsc::channel(8);
        let (tx1, rx1) = mpsc::channel(8);
        let (out_tx, mut out) = mpsc::channel(16);
        tokio::spawn(Merger::new(7, vec![rx0, rx1], vec![Target::One(Output { actor: 100, tx: out_tx })]).run());
        // A new output, added at barrier 1 for relation 7 (every input carries the same barrier).
        let (new_tx, mut new_rx) = mpsc::channel(16);
        let add = Arc::new(Mutation { add_outputs: [(7, vec![Target::One(Output { actor: 101, tx: new_tx })])].into(), ..Default::default() });
        let barrier = || Message::Barrier(Barrier { epoch: Epoch(1), mutation: Some(add.clone()) });
        tx0.send(chunk(1)).await.unwrap();
        tx0.send(watermark(50)).await.unwrap();
        tx0.send(barrier()).await.unwrap();
        // Epoch 2's chunk of input 0 waits behind its barrier until input 1's barrier arrives.
        tx0.send(chunk(3)).await.unwrap();
        tx1.send(chunk(2)).await.unwrap();
        tx1.send(watermark(20)).await.unwrap();
        tx1.send(barrier()).await.unwrap();
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(out.recv().await.unwrap());
        }
        let values: Vec<String> = seen
            .iter()
            .map(|m| match m {
                Message::Chunk(c) => format!("chunk {:?}", c.batch.column(0).as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().value(0)),
                Message::Watermark(w) => format!("watermark {}", w.value),
                Message::Barrier(b) => format!("barrier {}", b.epoch.0),
                Message::Errors(_) => "errors".into(),
            })
            .collect();
        assert_eq!(values, ["chunk 1", "chunk 2", "watermark 20", "barrier 1", "chunk 3"]);
        // The output added at barrier 1 sees epoch 2 on.
        assert!(matches!(new_rx.recv().await, Some(Message::Chunk(_))));
    }

    #[test]
    fn an_expression_router_agrees_with_the_key_encoding_and_sends_failing_rows_to_vnode_0() {
        use arrow::array::{Int64Array, RecordBatch};
        use arrow::datatypes::{DataType, Field};
        use datafusion::logical_expr::Operator as Op;
        use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, true)]);
        let batch = RecordBatch::try_new(Arc::new(schema.clone()), vec![Arc::new(Int64Array::from(vec![Some(5), None, Some(0)]))]).unwrap();
        let col: Arc<dyn PhysicalExpr> = Arc::new(Column::new("k", 0));
        let router = ExprRouter::try_new(vec![col.clone()], &schema).unwrap();
        let keys = RowConverter::new(vec![SortField::new(DataType::Int64)]).unwrap().convert_columns(&[batch.column(0).clone()]).unwrap();
        let expected: Vec<u16> = keys.iter().map(|k| vnode_of(k.as_ref())).collect();
        assert_eq!(router.vnodes(&batch).unwrap(), expected);
        // 100 / k fails for k = 0 only.
        let div: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(Arc::new(Literal::new(ScalarValue::Int64(Some(100)))), Op::Divide, col));
        let router = ExprRouter::try_new(vec![div], &schema).unwrap();
        let v = router.vnodes(&batch).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[2], 0);
    }
}
