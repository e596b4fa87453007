//! Routing a join's inputs between its parallel actors: a row goes to the actor owning the
//! vnode of its bucket (its join key's, see the bucket module), so every row of a join key,
//! from either side, meets in one actor. A row whose key never matches (a NULL key) meets no
//! row of the other side: such rows go by their side alone, all of a side to one actor, so a
//! row keeps its actor whatever else in it changes while its key stays NULL.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::PhysicalExpr;
use eddy_common::codec::vnode_of;
use eddy_common::Result;

use super::bucket::{bucket_id, idx};
use super::Side;
use crate::operator::eval::eval_all;
use crate::route::Router;

/// Routes one side of a join by its join key (see the module docs).
#[derive(Debug)]
pub struct JoinRouter {
    pub(super) side: Side,
    pub(super) keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The encoding of join keys (the left side's key types; right keys are cast to them).
    pub(super) key_types: Vec<DataType>,
    /// `IS NOT DISTINCT FROM`: NULL keys match too.
    pub(super) nulls_match: bool,
}

impl JoinRouter {
    fn route(&self, batch: &RecordBatch) -> Result<Vec<u16>> {
        let cols = eval_all(&self.keys, batch, batch.num_rows())?;
        let cols = cols
            .iter()
            .zip(&self.key_types)
            .map(|(c, t)| if c.data_type() == t { Ok(c.clone()) } else { arrow::compute::cast(c, t) })
            .collect::<Result<Vec<_>, _>>()?;
        let converter = RowConverter::new(self.key_types.iter().map(|t| SortField::new(t.clone())).collect())?;
        let encoded = converter.convert_columns(&cols)?;
        let never = vnode_of(&[1, idx(self.side) as u8]);
        Ok((0..batch.num_rows())
            .map(|i| {
                if !self.nulls_match && cols.iter().any(|c| c.is_null(i)) {
                    never
                } else {
                    vnode_of(&bucket_id(Some(encoded.row(i).as_ref()), self.side, &[]))
                }
            })
            .collect())
    }
}

impl Router for JoinRouter {
    fn vnodes(&self, batch: &RecordBatch) -> Result<Vec<u16>> {
        crate::exchange::route_rows(batch, |b| self.route(b))
    }
}
