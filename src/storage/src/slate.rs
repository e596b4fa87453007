//! Small helpers around SlateDB calls: deadlines and write batches.

use std::future::Future;
use std::time::Duration;

use eddy_common::{EddyError, Result};
use slatedb::WriteBatch;

use crate::runs::Op;

/// Awaits a SlateDB call for at most `limit`.
pub(crate) async fn bounded<T>(
    limit: Duration,
    what: &str,
    fut: impl Future<Output = std::result::Result<T, slatedb::Error>>,
) -> Result<T> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(|e| EddyError::external(format!("state store: {what}: {e}"))),
        Err(_) => Err(EddyError::external(format!("state store: {what} did not finish within {limit:?}"))),
    }
}

/// Adds ops to a SlateDB write batch (puts hand their buffers over without a copy).
pub(crate) fn add_ops(wb: &mut WriteBatch, ops: impl IntoIterator<Item = Op>) {
    for (k, v) in ops {
        match v {
            Some(v) => wb.put_bytes(bytes::Bytes::from(k), bytes::Bytes::from(v)),
            None => wb.delete(k),
        }
    }
}
