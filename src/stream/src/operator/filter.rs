//! `Filter`: keeps the rows whose predicate is true. An update pair may be split by the
//! predicate, so surviving update halves become plain inserts and deletes.

use std::fmt;
use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray};
use async_trait::async_trait;
use datafusion::physical_expr::PhysicalExpr;
use eddy_common::{internal_err, Epoch, Result, StreamChunk};
use eddy_storage::EpochBatch;

use super::eval::{evaluate, RowErrors};
use super::Operator;

/// Drops rows whose predicate is false or NULL.
pub struct Filter {
    /// Boolean predicate over the input schema.
    predicate: Arc<dyn PhysicalExpr>,
}

impl Filter {
    /// A filter on `predicate`.
    pub fn new(predicate: Arc<dyn PhysicalExpr>) -> Self {
        Self { predicate }
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Filter {}", self.predicate)
    }
}

#[async_trait]
impl Operator for Filter {
    /// Stateless, keyed by its input's key: runs wherever its input is.
    fn distribution(&self) -> super::Distribution {
        super::Distribution::Any
    }

    /// Dropping rows keeps every promise about the remaining ones.
    fn on_watermarks(&mut self, input: &[crate::watermark::Watermark]) -> Result<Vec<crate::watermark::Watermark>> {
        Ok(input.to_vec())
    }

    fn process(&mut self, chunk: StreamChunk, errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        let (chunk, values) = evaluate(std::slice::from_ref(&self.predicate), chunk, errors)?;
        let n = chunk.len();
        let mask = values[0].as_boolean_opt().ok_or_else(|| internal_err!("filter predicate is not boolean"))?;
        // NULL counts as false.
        let mask: BooleanArray = mask.iter().map(|v| Some(v.unwrap_or(false))).collect();
        if mask.true_count() == 0 {
            return Ok(vec![]);
        }
        debug_assert_eq!(mask.len(), n);
        Ok(vec![chunk.filter_plain(&mask)?])
    }

    async fn on_barrier(&mut self, _epoch: Epoch, _batch: &mut EpochBatch, _errors: &mut RowErrors) -> Result<Vec<StreamChunk>> {
        Ok(vec![])
    }
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::Operator as BinOp;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
    use datafusion::scalar::ScalarValue;

    use super::*;
    use eddy_common::Op;

    #[test]
    fn an_update_split_by_the_predicate_becomes_a_plain_delete() {
        // c0 > 10
        let pred = Arc::new(BinaryExpr::new(
            Arc::new(Column::new("c0", 0)),
            BinOp::Gt,
            Arc::new(Literal::new(ScalarValue::Int64(Some(10)))),
        ));
        let mut f = Filter::new(pred);
        let out = f.process(StreamChunk::from_pretty(" I T\n U- 20 a\n U+ 5 a\n + 11 b\n - 1 c").unwrap(), &mut RowErrors::default()).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].ops, vec![Op::Delete, Op::Insert]);
        assert_eq!(out[0].batch.num_rows(), 2);
    }

    #[test]
    fn nulls_do_not_pass() {
        let pred = Arc::new(BinaryExpr::new(
            Arc::new(Column::new("c0", 0)),
            BinOp::Gt,
            Arc::new(Literal::new(ScalarValue::Int64(Some(0)))),
        ));
        let mut f = Filter::new(pred);
        assert!(f.process(StreamChunk::from_pretty(" I\n + .").unwrap(), &mut RowErrors::default()).unwrap().is_empty());
    }
}
