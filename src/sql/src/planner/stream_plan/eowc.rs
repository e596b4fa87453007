//! `EMIT ON WINDOW CLOSE` of an append-only query without an aggregation: rows are held by
//! `eddy_stream`'s `EowcBuffer` until the watermark passes them.

use eddy_common::Result;
use eddy_storage::ReadSnapshot;
use eddy_stream::operator::EowcBuffer;

use super::{eowc_refused, Built, PlanCtx, TableIds};

/// Ends `b` (whose first `visible` columns are the query's) in a buffer on its first visible
/// watermarked column; refused if it has none or can retract.
pub(super) async fn hold_until_closed(b: &mut Built, visible: usize, ids: &mut TableIds<'_>, restore: Option<&ReadSnapshot>, internal: &mut PlanCtx) -> Result<()> {
    let col = b.watermarks.iter().copied().find(|&c| c < visible).filter(|_| b.append_only).ok_or_else(eowc_refused)?;
    let table_id = ids.next()?;
    internal.push(table_id);
    let mut op = EowcBuffer::try_new(table_id, col, b.schema.clone())?;
    op.restore(restore).await?;
    b.ops.push(Box::new(op));
    b.watermarks = vec![col];
    Ok(())
}
