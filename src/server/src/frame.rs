//! Frontend message framing and validation, in front of pgwire's decoder.
//!
//! pgwire decodes a message body straight out of the connection's read buffer without bounding
//! it by the message's length, and its decoders index, split and pre-allocate by counts the
//! client sends, so a lying length, a missing NUL or a huge count panics or allocates without
//! bound. The connection loop (`conn`) therefore cuts the byte stream into frames itself, refuses a frame
//! whose declared length is out of bounds before buffering it ([`header`]), and checks every
//! field of a complete frame ([`validate`]) before pgwire sees it. These are pure functions of
//! bytes, so they are unit-tested and fuzzed without a socket.
//!
//! Errors follow PostgreSQL: a frame whose length cannot be trusted, or an unknown message type,
//! ends the connection (`FATAL 08P01`, or `FATAL 54000` above `--max-message-bytes`); a
//! well-framed message with bad contents is an `ERROR` (`08P01`, `22021` for text that is not
//! UTF-8) and the session carries on.

use std::panic::AssertUnwindSafe;

use bytes::BytesMut;
use eddy_common::error::sqlstate;
use pgwire::error::PgWireResult;
use pgwire::messages::{DecodeContext, PgWireFrontendMessage, ProtocolVersion};

/// Largest startup-phase packet, as PostgreSQL's `MAX_STARTUP_PACKET_LENGTH`.
pub const MAX_STARTUP_PACKET: usize = 10_000;

/// Largest message of the small, fixed-shape types (Describe, Close, Execute, Sync, ...), as
/// PostgreSQL's `PQ_SMALL_MESSAGE_LIMIT`.
pub const MAX_SMALL_MESSAGE: usize = 10_000;

/// Largest password / SASL message (PostgreSQL's `PG_MAX_AUTH_TOKEN_LENGTH` plus headers).
pub const MAX_AUTH_MESSAGE: usize = 65_535 + 64;

/// Startup-phase request codes (the second word of an untyped packet).
const SSL_REQUEST: i32 = 80_877_103;
const GSS_REQUEST: i32 = 80_877_104;
const CANCEL_REQUEST: i32 = 80_877_102;

/// What the connection expects to read next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Untyped packets: StartupMessage or CancelRequest.
    Startup,
    /// Typed messages, before the client's first password-family (`p`) message: under SCRAM
    /// that one is a SASLInitialResponse.
    AuthFirst,
    /// Typed messages.
    Typed,
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// SQLSTATE reported to the client.
    pub sqlstate: &'static str,
    /// Message naming the problem.
    pub message: String,
    /// The connection cannot continue (the framing itself cannot be trusted).
    pub fatal: bool,
}

impl Violation {
    fn fatal(sqlstate: &'static str, message: impl Into<String>) -> Self {
        Self { sqlstate, message: message.into(), fatal: true }
    }

    fn error(sqlstate: &'static str, message: impl Into<String>) -> Self {
        Self { sqlstate, message: message.into(), fatal: false }
    }

    fn format(what: &str) -> Self {
        Self::error(sqlstate::PROTOCOL_VIOLATION, format!("invalid {what} message format"))
    }
}

/// The result of looking at the start of the read buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Header {
    /// Not enough bytes to know the frame's length yet.
    Incomplete,
    /// The next frame occupies `len` bytes (type byte and length word included).
    Frame {
        /// The message type byte (`None` for startup-phase packets).
        tag: Option<u8>,
        /// Total bytes of the frame.
        len: usize,
    },
}

/// The largest body a message of type `tag` may have under a `max_message` limit for large
/// messages (queries, Parse, Bind, COPY data).
fn max_len(tag: u8, max_message: usize) -> usize {
    match tag {
        b'Q' | b'P' | b'B' | b'd' | b'F' => max_message,
        b'p' => MAX_AUTH_MESSAGE,
        _ => MAX_SMALL_MESSAGE,
    }
}

/// Reads the frame header at the start of `buf`. A declared length that cannot be honest, or
/// one above the limit for its message type, is refused here, before the body is buffered.
pub fn header(buf: &[u8], phase: Phase, max_message: usize) -> Result<Header, Violation> {
    if phase == Phase::Startup {
        let Some(word) = buf.get(0..4) else { return Ok(Header::Incomplete) };
        let len = i32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        if len < 8 || len as usize > MAX_STARTUP_PACKET {
            return Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, format!("invalid length of startup packet: {len}")));
        }
        return Ok(Header::Frame { tag: None, len: len as usize });
    }
    let Some(head) = buf.get(0..5) else { return Ok(Header::Incomplete) };
    let tag = head[0];
    if !known_tag(tag) {
        return Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, format!("invalid frontend message type {tag}")));
    }
    let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    if len < 4 {
        return Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, format!("invalid message length {len}")));
    }
    let limit = max_len(tag, max_message);
    if len as usize > limit {
        let code = if limit == max_message { sqlstate::PROGRAM_LIMIT_EXCEEDED } else { sqlstate::PROTOCOL_VIOLATION };
        return Err(Violation::fatal(
            code,
            format!("message of type '{}' with {len} bytes exceeds the limit of {limit} bytes", tag as char),
        ));
    }
    Ok(Header::Frame { tag: Some(tag), len: len as usize + 1 })
}

/// Message types a frontend may send.
fn known_tag(tag: u8) -> bool {
    matches!(tag, b'Q' | b'P' | b'B' | b'E' | b'D' | b'C' | b'H' | b'S' | b'X' | b'd' | b'c' | b'f' | b'p' | b'F')
}

/// A cursor over a message body that never reads past its end.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let out = self.buf.get(self.at..end)?;
        self.at = end;
        Some(out)
    }

    fn i16(&mut self) -> Option<i16> {
        self.bytes(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }

    fn u16(&mut self) -> Option<u16> {
        self.bytes(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Option<i32> {
        self.bytes(4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }

    /// A NUL-terminated string (without its NUL).
    fn cstring(&mut self) -> Option<&'a [u8]> {
        let rest = &self.buf[self.at..];
        let n = rest.iter().position(|&b| b == 0)?;
        self.at += n + 1;
        Some(&rest[..n])
    }

    fn at_end(&self) -> bool {
        self.at == self.buf.len()
    }
}

/// `22021` for text that is not UTF-8, naming the offending bytes as PostgreSQL does.
fn utf8(text: &[u8]) -> Result<(), Violation> {
    match std::str::from_utf8(text) {
        Ok(_) => Ok(()),
        Err(e) => {
            let at = e.valid_up_to();
            let bad: Vec<String> = text[at..].iter().take(e.error_len().unwrap_or(1).max(1)).map(|b| format!("0x{b:02x}")).collect();
            Err(Violation::error(
                sqlstate::CHARACTER_NOT_IN_REPERTOIRE,
                format!("invalid byte sequence for encoding \"UTF8\": {}", bad.join(" ")),
            ))
        }
    }
}

/// Checks a complete frame (as delimited by [`header`]) field by field, so that decoding it
/// cannot read past its end, allocate by an unchecked count or meet text that is not UTF-8.
pub fn validate(frame: &[u8], phase: Phase) -> Result<(), Violation> {
    if phase == Phase::Startup {
        return validate_startup(frame);
    }
    let Some((&tag, rest)) = frame.split_first() else { return Err(Violation::format("empty")) };
    let body = rest.get(4..).unwrap_or_default();
    let mut r = Reader { buf: body, at: 0 };
    match tag {
        b'Q' => {
            let q = r.cstring().ok_or_else(|| Violation::format("Query"))?;
            if !r.at_end() {
                return Err(Violation::format("Query"));
            }
            utf8(q)
        }
        b'P' => {
            let name = r.cstring().ok_or_else(|| Violation::format("Parse"))?;
            let query = r.cstring().ok_or_else(|| Violation::format("Parse"))?;
            let n = r.u16().ok_or_else(|| Violation::format("Parse"))? as usize;
            if r.remaining() != 4 * n {
                return Err(Violation::error(
                    sqlstate::PROTOCOL_VIOLATION,
                    format!("Parse message declares {n} parameter types but carries {} bytes for them", r.remaining()),
                ));
            }
            utf8(name)?;
            utf8(query)
        }
        b'B' => validate_bind(&mut r),
        b'E' => {
            let name = r.cstring().ok_or_else(|| Violation::format("Execute"))?;
            r.i32().ok_or_else(|| Violation::format("Execute"))?;
            if !r.at_end() {
                return Err(Violation::format("Execute"));
            }
            utf8(name)
        }
        b'D' | b'C' => {
            let what = if tag == b'D' { "Describe" } else { "Close" };
            let kind = r.u8().ok_or_else(|| Violation::format(what))?;
            if kind != b'S' && kind != b'P' {
                return Err(Violation::error(
                    sqlstate::PROTOCOL_VIOLATION,
                    format!("invalid {} message subtype {kind}", what.to_uppercase()),
                ));
            }
            let name = r.cstring().ok_or_else(|| Violation::format(what))?;
            if !r.at_end() {
                return Err(Violation::format(what));
            }
            utf8(name)
        }
        // Sync, Flush, Terminate and CopyDone carry nothing; extra bytes are ignored.
        b'H' | b'S' | b'X' | b'c' | b'd' => Ok(()),
        b'f' => {
            let msg = r.cstring().ok_or_else(|| Violation::format("CopyFail"))?;
            utf8(msg)
        }
        b'p' if phase == Phase::AuthFirst => {
            // SASLInitialResponse: mechanism, then -1 or the length of the rest.
            let mechanism = r.cstring().ok_or_else(|| Violation::format("SASLInitialResponse"))?;
            let len = r.i32().ok_or_else(|| Violation::format("SASLInitialResponse"))?;
            let fits = len == -1 && r.at_end() || len >= 0 && r.remaining() == len as usize;
            if !fits {
                return Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, "invalid SASLInitialResponse message format"));
            }
            utf8(mechanism)
        }
        b'p' => Ok(()),
        b'F' => Err(Violation::error(sqlstate::FEATURE_NOT_SUPPORTED, "the fastpath function call protocol is not supported")),
        other => Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, format!("invalid frontend message type {other}"))),
    }
}

fn validate_bind(r: &mut Reader<'_>) -> Result<(), Violation> {
    let portal = r.cstring().ok_or_else(|| Violation::format("Bind"))?;
    let statement = r.cstring().ok_or_else(|| Violation::format("Bind"))?;
    utf8(portal)?;
    utf8(statement)?;
    let codes = |r: &mut Reader<'_>| -> Result<usize, Violation> {
        let n = r.u16().ok_or_else(|| Violation::format("Bind"))? as usize;
        if r.remaining() < 2 * n {
            return Err(Violation::error(sqlstate::PROTOCOL_VIOLATION, "insufficient data left in message"));
        }
        for _ in 0..n {
            let code = r.i16().ok_or_else(|| Violation::format("Bind"))?;
            if code != 0 && code != 1 {
                return Err(Violation::error(sqlstate::INVALID_PARAMETER_VALUE, format!("unsupported format code: {code}")));
            }
        }
        Ok(n)
    };
    let formats = codes(r)?;
    let params = r.u16().ok_or_else(|| Violation::format("Bind"))? as usize;
    if formats > 1 && formats != params {
        return Err(Violation::error(
            sqlstate::PROTOCOL_VIOLATION,
            format!("bind message has {formats} parameter formats but {params} parameters"),
        ));
    }
    for i in 0..params {
        let len = r.i32().ok_or_else(|| Violation::error(sqlstate::PROTOCOL_VIOLATION, "insufficient data left in message"))?;
        if len == -1 {
            continue;
        }
        if len < 0 || r.bytes(len as usize).is_none() {
            return Err(Violation::error(
                sqlstate::PROTOCOL_VIOLATION,
                format!("insufficient data left in message for parameter ${} ({len} bytes declared)", i + 1),
            ));
        }
    }
    codes(r)?;
    if !r.at_end() {
        return Err(Violation::format("Bind"));
    }
    Ok(())
}

/// A StartupMessage (protocol 3, NUL-separated name/value pairs ending in a NUL) or a
/// CancelRequest. SSL/GSS requests are answered before this phase, so one arriving here is a
/// protocol violation.
fn validate_startup(frame: &[u8]) -> Result<(), Violation> {
    let mut r = Reader { buf: frame, at: 0 };
    let (Some(_len), Some(code)) = (r.i32(), r.i32()) else {
        return Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, "incomplete startup packet"));
    };
    match code {
        CANCEL_REQUEST => {
            // pid, then a secret key of 4 (protocol 3.0) to 256 bytes (3.2).
            if !(16..=12 + 256).contains(&frame.len()) {
                return Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, "invalid length of cancel request packet"));
            }
            Ok(())
        }
        SSL_REQUEST | GSS_REQUEST => Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, "unexpected encryption request after negotiation")),
        _ => {
            let (major, minor) = ((code as u32) >> 16, (code as u32) & 0xffff);
            if major != 3 {
                return Err(Violation::fatal(
                    sqlstate::FEATURE_NOT_SUPPORTED,
                    format!("unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.2"),
                ));
            }
            if frame.last() != Some(&0) {
                return Err(Violation::fatal(
                    sqlstate::PROTOCOL_VIOLATION,
                    "invalid startup packet layout: expected terminator as last byte",
                ));
            }
            loop {
                let name = r.cstring().ok_or_else(|| Violation::fatal(sqlstate::PROTOCOL_VIOLATION, "invalid startup packet layout"))?;
                if name.is_empty() {
                    break;
                }
                let value = r.cstring().ok_or_else(|| {
                    Violation::fatal(sqlstate::PROTOCOL_VIOLATION, "invalid startup packet layout: expected a value after each name")
                })?;
                if std::str::from_utf8(name).is_err() || std::str::from_utf8(value).is_err() {
                    return Err(Violation::fatal(sqlstate::CHARACTER_NOT_IN_REPERTOIRE, "invalid byte sequence for encoding \"UTF8\" in startup packet"));
                }
            }
            if !r.at_end() {
                return Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, "invalid startup packet layout: data after the terminator"));
            }
            Ok(())
        }
    }
}

/// Validates a complete frame and decodes it with pgwire. A panic in pgwire's decoder (which
/// validation is meant to make impossible) is caught and reported as a protocol violation.
pub fn decode(frame: BytesMut, phase: Phase, protocol: ProtocolVersion) -> Result<PgWireFrontendMessage, Violation> {
    validate(&frame, phase)?;
    match std::panic::catch_unwind(AssertUnwindSafe(|| decode_unchecked(frame, phase, protocol))) {
        Ok(Ok(Some(msg))) => Ok(msg),
        Ok(Ok(None)) => Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, "incomplete message")),
        Ok(Err(e)) => Err(Violation::error(sqlstate::PROTOCOL_VIOLATION, e.to_string())),
        Err(_) => {
            tracing::error!("the message decoder panicked on a frame that passed validation (phase {phase:?})");
            Err(Violation::fatal(sqlstate::PROTOCOL_VIOLATION, "invalid message format"))
        }
    }
}

/// pgwire's decoder on exactly one frame, with the context the connection's phase implies.
pub fn decode_unchecked(mut frame: BytesMut, phase: Phase, protocol: ProtocolVersion) -> PgWireResult<Option<PgWireFrontendMessage>> {
    let mut ctx = DecodeContext::new(protocol);
    ctx.awaiting_frontend_ssl = false;
    ctx.awaiting_frontend_startup = phase == Phase::Startup;
    PgWireFrontendMessage::decode(&mut frame, &ctx)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod props;
