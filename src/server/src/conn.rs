//! One client connection, from TLS negotiation to the last message.
//!
//! This replaces `pgwire::tokio::process_socket`'s read loop (pgwire still negotiates TLS,
//! dispatches each message to the handlers in `wire` and reports errors): Eddy reads
//! the socket itself so that every frame is bounded and validated (`frame`) before
//! pgwire decodes it, and so that the limits of `limits` apply:
//!
//! - a message longer than `--max-message-bytes` is refused (`FATAL 54000`) from its header,
//!   before its body is read; large messages wait for the server-wide large-message budget;
//! - a connection beyond `--max-connections` is refused after its startup packet
//!   (`FATAL 53300 sorry, too many clients already`), as PostgreSQL does;
//! - a session idle inside a transaction block for longer than its
//!   `idle_in_transaction_session_timeout` is closed (`FATAL 25P03`);
//! - startup and authentication must finish within a minute, as pgwire's own loop requires;
//! - a panic while handling a message ends that connection only (`FATAL XX000`), never the
//!   process.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use eddy_common::error::sqlstate;
use futures::{FutureExt, SinkExt};
use pgwire::api::{ClientInfo, ErrorHandler, PgWireConnectionState, PgWireServerHandlers};
use pgwire::error::{ErrorInfo, PgWireError};
use pgwire::messages::response::TransactionStatus;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{negotiate_tls, process_error, process_message, MaybeTls, PgWireMessageServerCodec};
use pgwire::tokio::TlsAcceptor;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::codec::Framed;

use crate::frame::{self, Header, Phase, Violation};
use crate::limits::{parse_timeout, Admission};
use crate::wire::{session_setting, Factory, Prepared};

/// How long a client may take from connecting to finishing authentication.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest read buffer a connection keeps between messages. A frame is split off the buffer
/// and shares its allocation, so after one 20 MB query the idle connection would hold those
/// 20 MB (and more, from growth) for the rest of its life: 32 clients that had each sent one
/// held over a gigabyte between queries.
const KEPT_READ_BUFFER: usize = 1 << 20;

type Socket = Framed<MaybeTls, PgWireMessageServerCodec<Arc<Prepared>>>;

/// Why reading the next frame stopped.
enum ReadEnd {
    /// The client closed the connection (or the socket failed).
    Closed,
    /// The frame cannot be accepted; the connection ends with this error.
    Refused(Violation),
    /// A deadline passed while waiting.
    TimedOut,
}

/// Serves one TCP connection until the client leaves or the connection must end.
pub async fn serve(tcp: TcpStream, tls: Option<TlsAcceptor>, factory: Arc<Factory>, admission: Arc<Admission>) {
    let startup_deadline = Instant::now() + STARTUP_TIMEOUT;
    let socket = match tokio::time::timeout_at(startup_deadline, negotiate_tls(tcp, tls)).await {
        Ok(Ok(Some(socket))) => socket,
        Ok(Err(e)) => {
            tracing::debug!("TLS negotiation failed: {e}");
            return;
        }
        _ => return,
    };
    let mut conn = Conn { socket, inbuf: BytesMut::new(), admission, sasl_started: false, startup_deadline };
    conn.inbuf = std::mem::take(conn.socket.read_buffer_mut());
    conn.run(&factory).await;
}

/// A connection's socket and read state.
struct Conn {
    /// pgwire's framed socket: its codec holds the connection's state, its sink writes.
    socket: Socket,
    /// Bytes read but not yet framed (Eddy reads the socket itself; the codec never decodes).
    inbuf: BytesMut,
    /// Server-wide limits.
    admission: Arc<Admission>,
    /// The client has sent its first password-family message.
    sasl_started: bool,
    /// When startup and authentication must be done.
    startup_deadline: Instant,
}

impl Conn {
    async fn run(&mut self, factory: &Factory) {
        let (startup, handlers, cancel) = factory.parts();
        let errors = factory.error_handler();
        // Held for the connection's lifetime once its startup packet is accepted.
        let mut _slot = None;
        loop {
            let phase = self.phase();
            let (frame, _budget) = match self.read_frame(phase).await {
                Ok(f) => f,
                Err(ReadEnd::Closed) => return,
                Err(ReadEnd::Refused(v)) => return self.fatal(v.sqlstate, &v.message).await,
                Err(ReadEnd::TimedOut) if phase == Phase::Typed => {
                    return self
                        .fatal(sqlstate::IDLE_IN_TRANSACTION_SESSION_TIMEOUT, "terminating connection due to idle-in-transaction timeout")
                        .await
                }
                Err(ReadEnd::TimedOut) => return,
            };
            let tag = if phase == Phase::Startup { None } else { frame.first().copied() };
            if tag == Some(b'X') {
                return;
            }
            // After an extended-protocol error everything up to Sync is discarded unread.
            if matches!(self.socket.state(), PgWireConnectionState::AwaitingSync) && tag != Some(b'S') {
                continue;
            }
            if tag == Some(b'p') {
                self.sasl_started = true;
            }
            let msg = match frame::decode(frame, phase, self.socket.protocol_version()) {
                Ok(m) => m,
                Err(v) if v.fatal => return self.fatal(v.sqlstate, &v.message).await,
                Err(v) => {
                    let is_extended = tag.is_some_and(|t| b"PBEDCHS".contains(&t));
                    let error = PgWireError::UserError(Box::new(ErrorInfo::new("ERROR".into(), v.sqlstate.into(), v.message)));
                    if process_error(&mut self.socket, error, is_extended).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            if let PgWireFrontendMessage::Startup(_) = msg {
                match self.admission.connection() {
                    Some(permit) => _slot = Some(permit),
                    None => return self.fatal(sqlstate::TOO_MANY_CONNECTIONS, "sorry, too many clients already").await,
                }
            }
            let is_cancel = matches!(msg, PgWireFrontendMessage::CancelRequest(_));
            let is_extended = match self.socket.state() {
                PgWireConnectionState::CopyInProgress(extended) => extended,
                _ => msg.is_extended_query(),
            };
            let handled = AssertUnwindSafe(process_message(
                msg,
                &mut self.socket,
                startup.clone(),
                handlers.clone(),
                handlers.clone(),
                handlers.clone(),
                cancel.clone(),
            ))
            .catch_unwind()
            .await;
            match handled {
                Ok(Ok(())) => {}
                Ok(Err(mut e)) => {
                    errors.on_error(&self.socket, &mut e);
                    let fatal = e.is_fatal();
                    if process_error(&mut self.socket, e, is_extended).await.is_err() || fatal {
                        return;
                    }
                }
                Err(_) => {
                    // The panic itself was reported by the panic hook.
                    return self.fatal(sqlstate::INTERNAL_ERROR, "internal error: the connection's handler panicked").await;
                }
            }
            if is_cancel {
                return;
            }
        }
    }

    /// What the next frame looks like, from the connection's state.
    fn phase(&self) -> Phase {
        match self.socket.state() {
            PgWireConnectionState::AwaitingSslRequest | PgWireConnectionState::AwaitingStartup => Phase::Startup,
            PgWireConnectionState::AuthenticationInProgress if !self.sasl_started => Phase::AuthFirst,
            _ => Phase::Typed,
        }
    }

    /// When waiting for the next frame must stop: the startup deadline while authenticating,
    /// the session's idle-in-transaction timeout inside a transaction block.
    fn read_deadline(&self, phase: Phase) -> Option<Instant> {
        if phase != Phase::Typed || matches!(self.socket.state(), PgWireConnectionState::AuthenticationInProgress) {
            return Some(self.startup_deadline);
        }
        match self.socket.transaction_status() {
            TransactionStatus::Transaction | TransactionStatus::Error => {
                let idle = session_setting(&self.socket, "idle_in_transaction_session_timeout")?;
                parse_timeout(&idle).map(|d| Instant::now() + d)
            }
            TransactionStatus::Idle => None,
        }
    }

    /// Reads one whole frame: its header first (refusing a bad or oversized length before
    /// reading further), then, after any large-message budget is granted, its body.
    async fn read_frame(&mut self, phase: Phase) -> Result<(BytesMut, Option<tokio::sync::OwnedSemaphorePermit>), ReadEnd> {
        if !self.socket.write_buffer().is_empty() && self.socket.flush().await.is_err() {
            return Err(ReadEnd::Closed);
        }
        let deadline = self.read_deadline(phase);
        let max = self.admission.limits.max_message_bytes;
        let len = loop {
            match frame::header(&self.inbuf, phase, max) {
                Ok(Header::Frame { len, .. }) => break len,
                Ok(Header::Incomplete) => self.fill(deadline, 5).await?,
                Err(v) => return Err(ReadEnd::Refused(v)),
            }
        };
        let budget = self.admission.message(len).await;
        while self.inbuf.len() < len {
            self.fill(deadline, len - self.inbuf.len()).await?;
        }
        let frame = self.inbuf.split_to(len);
        if len > KEPT_READ_BUFFER || self.inbuf.capacity() > KEPT_READ_BUFFER {
            // Only the bytes after the frame are kept, in a buffer of their own.
            self.inbuf = BytesMut::from(&self.inbuf[..]);
        }
        Ok((frame, budget))
    }

    /// Reads more bytes (at least one) into the buffer, reserving room for `want` more.
    async fn fill(&mut self, deadline: Option<Instant>, want: usize) -> Result<(), ReadEnd> {
        self.inbuf.reserve(want.min(1 << 20));
        let read = self.socket.get_mut().read_buf(&mut self.inbuf);
        let n = match deadline {
            Some(d) => tokio::time::timeout_at(d, read).await.map_err(|_| ReadEnd::TimedOut)?,
            None => read.await,
        };
        match n {
            Ok(0) | Err(_) => Err(ReadEnd::Closed),
            Ok(_) => Ok(()),
        }
    }

    /// Sends a FATAL error and closes the connection.
    async fn fatal(&mut self, code: &str, message: &str) {
        let info = ErrorInfo::new("FATAL".into(), code.into(), message.into());
        // The connection is being closed for this error: a client already gone cannot be told.
        let _ = self.socket.send(PgWireBackendMessage::ErrorResponse(info.into())).await;
        let _ = self.socket.close().await;
    }
}
