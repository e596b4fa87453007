//! Answering Query and Execute messages: Eddy's versions of pgwire's `_on_query` and
//! `_on_execute`, used by the handlers in `wire`.
//!
//! pgwire's Execute path collects a portal's rows into a `Vec` before sending them (all of them
//! when `max_rows` is 0, and pre-allocated by the client's `max_rows` otherwise, so one Execute
//! asking for 2^30 rows aborted the process), and its cancel signal only covers the time until
//! a query's first row. Here rows go to the socket as the query produces them, through the
//! connection's buffered sink, which flushes as it fills: a client that stops reading stops the
//! query (backpressure) instead of making the server buffer its result. `max_rows` only counts
//! rows. A CancelRequest interrupts the statement (`57014`) until its last row is sent;
//! `statement_timeout` is applied where the statement runs (`wire`).

use std::fmt::Debug;
use std::sync::Arc;

use futures::channel::oneshot;
use futures::future::{select, Either};
use futures::{FutureExt, Sink, SinkExt, StreamExt};
use pgwire::api::copy::send_copy_in_response;
use pgwire::api::portal::PortalExecutionState;
use pgwire::api::query::{send_execution_response, send_ready_for_query, ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{CopyResponse, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, ConnectionHandle, PgWireConnectionState, DEFAULT_NAME};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyDone, CopyOutResponse};
use pgwire::messages::data::RowDescription;
use pgwire::messages::extendedquery::{Execute, PortalSuspended};
use pgwire::messages::response::EmptyQueryResponse;
use pgwire::messages::simplequery::Query;
use pgwire::messages::PgWireBackendMessage;

/// The cancel signal of the statement in progress: fires when a CancelRequest names this
/// connection. Taken from pgwire's connection handle, so pgwire's cancel handler reaches it.
struct Cancel(Option<oneshot::Receiver<()>>);

impl Cancel {
    async fn start<C: ClientInfo>(client: &C) -> Self {
        let Some(handle) = client.session_extensions().get::<Arc<ConnectionHandle>>() else { return Self(None) };
        Self(Some(handle.start_query().await))
    }

    /// Resolves when the statement is cancelled; never, if it cannot be.
    async fn fired(&mut self) {
        match self.0.as_mut() {
            Some(rx) => {
                if rx.await.is_err() {
                    // The sender was dropped: no cancel can arrive any more.
                    self.0 = None;
                    std::future::pending::<()>().await
                }
                self.0 = None;
            }
            None => std::future::pending::<()>().await,
        }
    }
}

/// A statement's error as the wire reports it.
pub(crate) fn to_pg(e: eddy_common::EddyError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(e)))
}

/// An ErrorResponse's fields for `e`.
pub(crate) fn error_info(e: eddy_common::EddyError) -> ErrorInfo {
    ErrorInfo::new("ERROR".to_string(), e.sqlstate.to_string(), e.message)
}

/// RowDescription of `fields` (pgwire's own helper is private).
fn row_description(fields: &[FieldInfo]) -> RowDescription {
    RowDescription::new(fields.iter().map(Into::into).collect())
}

fn canceled() -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".into(),
        eddy_common::error::sqlstate::QUERY_CANCELED.into(),
        "canceling statement due to user request".into(),
    )))
}

/// The next item of `items`. When it is not ready, what was fed so far goes out before waiting
/// (the first rows of a slow query, a subscription's latest changes); a cancel interrupts the
/// wait.
async fn next_flushing<C, S>(client: &mut C, items: &mut S, cancel: &mut Cancel) -> PgWireResult<Option<S::Item>>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    S: futures::Stream + Unpin,
{
    if let Some(next) = items.next().now_or_never() {
        return Ok(next);
    }
    client.flush().await?;
    match select(items.next(), Box::pin(cancel.fired())).await {
        Either::Left((next, _)) => Ok(next),
        Either::Right(_) => Err(canceled()),
    }
}

/// Sends up to `max_rows` rows (all when 0) of `results` as they are produced. Returns the
/// number sent and whether rows remain (the portal is suspended).
async fn stream_rows<C>(client: &mut C, results: &mut QueryResponse, max_rows: usize, cancel: &mut Cancel) -> PgWireResult<(usize, bool)>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let mut sent = 0;
    while max_rows == 0 || sent < max_rows {
        let next = next_flushing(client, results.data_rows(), cancel).await?;
        let Some(row) = next else { return Ok((sent, false)) };
        client.feed(PgWireBackendMessage::DataRow(row?)).await?;
        sent += 1;
    }
    Ok((sent, true))
}

/// Sends a COPY OUT response: its header, each CopyData as it is produced (flushed whenever
/// the next is not ready), then CopyDone and `COPY n`; or, if producing fails, ErrorResponse.
/// (pgwire's own sender buffers until the end and answers a failure with CopyFail, which is a
/// frontend message.)
async fn send_copy_out<C>(client: &mut C, resp: CopyResponse, cancel: &mut Cancel) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let formats = resp.column_formats();
    let CopyResponse { format, columns, mut data_stream, .. } = resp;
    client.feed(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(format, columns as i16, formats))).await?;
    let mut rows = 0usize;
    loop {
        let next = next_flushing(client, &mut data_stream, cancel).await?;
        match next {
            Some(Ok(data)) => {
                rows += 1;
                client.feed(PgWireBackendMessage::CopyData(data)).await?;
            }
            Some(Err(e)) => return Err(e),
            None => break,
        }
    }
    client.feed(PgWireBackendMessage::CopyDone(CopyDone::new())).await?;
    client.send(PgWireBackendMessage::CommandComplete(Tag::new("COPY").with_rows(rows).into())).await?;
    Ok(())
}

/// A simple-protocol Query message: every statement's response, then ReadyForQuery.
pub async fn on_query<H, C>(handler: &H, client: &mut C, query: Query) -> PgWireResult<()>
where
    H: SimpleQueryHandler + ?Sized,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
        return Err(PgWireError::NotReadyForQuery);
    }
    let mut status = client.transaction_status();
    client.set_state(PgWireConnectionState::QueryInProgress);
    let mut cancel = Cancel::start(client).await;
    let responses = match select(Box::pin(handler.do_query(client, &query.query)), Box::pin(cancel.fired())).await {
        Either::Left((r, _)) => r,
        Either::Right(_) => Err(canceled()),
    };
    // An error before any response leaves the connection ready for the next query.
    let responses = responses.inspect_err(|_| client.set_state(PgWireConnectionState::ReadyForQuery))?;
    for r in responses {
        match r {
            Response::EmptyQuery => client.feed(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?,
            Response::Query(mut results) => {
                let desc = row_description(&results.row_schema());
                client.feed(PgWireBackendMessage::RowDescription(desc)).await?;
                match stream_rows(client, &mut results, 0, &mut cancel).await {
                    Ok((n, _)) => {
                        let tag = Tag::new(results.command_tag()).with_rows(n);
                        client.feed(PgWireBackendMessage::CommandComplete(tag.into())).await?;
                    }
                    Err(PgWireError::UserError(e)) => {
                        client.feed(PgWireBackendMessage::ErrorResponse((*e).into())).await?;
                        status = status.to_error_state();
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            Response::Execution(tag) => send_execution_response(client, tag).await?,
            Response::TransactionStart(tag) => {
                send_execution_response(client, tag).await?;
                status = status.to_in_transaction_state();
            }
            Response::TransactionEnd(tag) => {
                send_execution_response(client, tag).await?;
                status = status.to_idle_state();
            }
            Response::Error(e) => {
                client.feed(PgWireBackendMessage::ErrorResponse((*e).into())).await?;
                status = status.to_error_state();
            }
            Response::CopyIn(result) => {
                send_copy_in_response(client, result).await?;
                client.set_state(PgWireConnectionState::CopyInProgress(false));
            }
            Response::CopyOut(result) => match send_copy_out(client, result, &mut cancel).await {
                Ok(()) => {}
                Err(PgWireError::UserError(e)) => {
                    client.feed(PgWireBackendMessage::ErrorResponse((*e).into())).await?;
                    status = status.to_error_state();
                    break;
                }
                Err(e) => return Err(e),
            },
            Response::CopyBoth(_) => return Err(PgWireError::NotReadyForQuery),
        }
    }
    if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
        client.set_state(PgWireConnectionState::ReadyForQuery);
        client.set_transaction_status(status);
        send_ready_for_query(client, status).await?;
    }
    Ok(())
}

/// An extended-protocol Execute message: runs the portal's statement on its first Execute,
/// then sends up to `max_rows` rows (all when `max_rows` is 0 or negative), ending with
/// PortalSuspended if rows remain, else CommandComplete.
pub async fn on_execute<H, C>(handler: &H, client: &mut C, message: Execute) -> PgWireResult<()>
where
    H: ExtendedQueryHandler + ?Sized,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = H::Statement>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
        return Err(PgWireError::NotReadyForQuery);
    }
    let mut status = client.transaction_status();
    let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
    // A count, never an allocation size: anything not positive means "all rows".
    let max_rows = usize::try_from(message.max_rows).unwrap_or(0);
    let portal = match client.portal_store().get_portal(name) {
        Some(Entry::Value(portal)) => portal,
        Some(Entry::Empty) => {
            client.feed(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?;
            return Ok(());
        }
        None => return Err(PgWireError::PortalNotFound(name.to_owned())),
    };
    client.set_state(PgWireConnectionState::QueryInProgress);
    let mut cancel = Cancel::start(client).await;
    let state = portal.state();
    let started = !matches!(*state.lock().await, PortalExecutionState::Initial);
    if !started {
        let response = match select(Box::pin(handler.do_query(client, portal.as_ref(), max_rows)), Box::pin(cancel.fired())).await {
            Either::Left((r, _)) => r,
            Either::Right(_) => Err(canceled()),
        };
        let response = response.inspect_err(|_| client.set_state(PgWireConnectionState::ReadyForQuery))?;
        match response {
            Response::Query(results) => portal.start(results).await,
            other => {
                match other {
                    Response::EmptyQuery => client.feed(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?,
                    Response::Execution(tag) => send_execution_response(client, tag).await?,
                    Response::TransactionStart(tag) => {
                        send_execution_response(client, tag).await?;
                        status = status.to_in_transaction_state();
                    }
                    Response::TransactionEnd(tag) => {
                        send_execution_response(client, tag).await?;
                        status = status.to_idle_state();
                        client.portal_store().rm_portal(DEFAULT_NAME);
                    }
                    Response::Error(e) => {
                        client.send(PgWireBackendMessage::ErrorResponse((*e).into())).await?;
                        status = status.to_error_state();
                    }
                    Response::CopyIn(result) => {
                        client.set_state(PgWireConnectionState::CopyInProgress(true));
                        send_copy_in_response(client, result).await?;
                    }
                    Response::CopyOut(result) => match send_copy_out(client, result, &mut cancel).await {
                        Ok(()) => {}
                        Err(PgWireError::UserError(e)) => {
                            client.send(PgWireBackendMessage::ErrorResponse((*e).into())).await?;
                            status = status.to_error_state();
                        }
                        Err(e) => return Err(e),
                    },
                    Response::CopyBoth(_) | Response::Query(_) => return Err(PgWireError::NotReadyForQuery),
                }
                if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
                    client.set_state(PgWireConnectionState::ReadyForQuery);
                    client.set_transaction_status(status);
                }
                return Ok(());
            }
        }
    }
    let mut guard = state.lock().await;
    let outcome = match &mut *guard {
        PortalExecutionState::Suspended(results) => {
            let tag = results.command_tag().to_owned();
            stream_rows(client, results, max_rows, &mut cancel).await.map(|(n, more)| (tag, n, more))
        }
        // Every row was sent by an earlier Execute.
        _ => Ok((String::new(), 0, false)),
    };
    if !matches!(outcome, Ok((_, _, true))) {
        *guard = PortalExecutionState::Finished;
    }
    drop(guard);
    client.set_state(PgWireConnectionState::ReadyForQuery);
    let (tag, n, more) = outcome?;
    if more {
        client.send(PgWireBackendMessage::PortalSuspended(PortalSuspended::new())).await?;
    } else {
        client.send(PgWireBackendMessage::CommandComplete(Tag::new(&tag).with_rows(n).into())).await?;
    }
    client.set_transaction_status(status);
    Ok(())
}
