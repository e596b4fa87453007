//! Property tests of the frame decoder (issue 10 item 3), with proptest's generation and
//! shrinking: a message built from any field values the protocol allows is accepted and decodes
//! to exactly those fields (validation is not stricter than PostgreSQL), and the same message
//! with a lying length, a lying count, a truncation, an overwrite or inserted bytes is either
//! refused or decodes; no byte sequence panics the framer, the validator or pgwire's decoder.
//! A failure shrinks to a minimal message and is printed as one. `PROPTEST_CASES` raises the
//! number of cases (default 2,048 per property, a few seconds in CI).

use bytes::BytesMut;
use pgwire::messages::{PgWireFrontendMessage, ProtocolVersion};
use proptest::collection::vec;
use proptest::prelude::*;

use super::*;

/// A frontend message of the typed phase, by its fields.
#[derive(Debug, Clone)]
enum Msg {
    Query(String),
    Parse { name: String, sql: String, oids: Vec<u32> },
    Bind { portal: String, statement: String, formats: Vec<i16>, params: Vec<Option<Vec<u8>>>, results: Vec<i16> },
    Execute { portal: String, max_rows: i32 },
    Describe { portal: bool, name: String },
    Close { portal: bool, name: String },
    Sync,
    Flush,
    CopyData(Vec<u8>),
    CopyDone,
    CopyFail(String),
}

/// Text without NUL (a C string's contents), any other character allowed.
fn text() -> impl Strategy<Value = String> {
    any::<String>().prop_map(|s| s.replace('\0', ""))
}

fn message() -> impl Strategy<Value = Msg> {
    let format = prop_oneof![Just(0i16), Just(1i16)];
    let bind = (text(), text(), vec(proptest::option::of(vec(any::<u8>(), 0..24)), 0..8), any::<bool>(), vec(format.clone(), 0..4))
        .prop_flat_map(move |(portal, statement, params, one_format, results)| {
            // Zero codes, one code for all, or one per parameter, as the protocol allows.
            let n = if one_format { 1 } else { params.len() };
            (Just(portal), Just(statement), vec(format.clone(), 0..=n), Just(params), Just(results))
        })
        .prop_map(|(portal, statement, formats, params, results)| {
            let formats = if formats.len() > 1 && formats.len() != params.len() { Vec::new() } else { formats };
            Msg::Bind { portal, statement, formats, params, results }
        });
    prop_oneof![
        text().prop_map(Msg::Query),
        (text(), text(), vec(any::<u32>(), 0..8)).prop_map(|(name, sql, oids)| Msg::Parse { name, sql, oids }),
        bind,
        (text(), any::<i32>()).prop_map(|(portal, max_rows)| Msg::Execute { portal, max_rows }),
        (any::<bool>(), text()).prop_map(|(portal, name)| Msg::Describe { portal, name }),
        (any::<bool>(), text()).prop_map(|(portal, name)| Msg::Close { portal, name }),
        Just(Msg::Sync),
        Just(Msg::Flush),
        vec(any::<u8>(), 0..64).prop_map(Msg::CopyData),
        Just(Msg::CopyDone),
        text().prop_map(Msg::CopyFail),
    ]
}

fn cstring(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

fn count(out: &mut Vec<u8>, n: usize) {
    out.extend((n as u16).to_be_bytes());
}

/// The message's bytes on the wire: type, length word, body.
fn encode(m: &Msg) -> Vec<u8> {
    let mut b = Vec::new();
    let tag = match m {
        Msg::Query(q) => {
            cstring(&mut b, q);
            b'Q'
        }
        Msg::Parse { name, sql, oids } => {
            cstring(&mut b, name);
            cstring(&mut b, sql);
            count(&mut b, oids.len());
            oids.iter().for_each(|o| b.extend(o.to_be_bytes()));
            b'P'
        }
        Msg::Bind { portal, statement, formats, params, results } => {
            cstring(&mut b, portal);
            cstring(&mut b, statement);
            count(&mut b, formats.len());
            formats.iter().for_each(|f| b.extend(f.to_be_bytes()));
            count(&mut b, params.len());
            for p in params {
                match p {
                    Some(v) => {
                        b.extend((v.len() as i32).to_be_bytes());
                        b.extend_from_slice(v);
                    }
                    None => b.extend((-1i32).to_be_bytes()),
                }
            }
            count(&mut b, results.len());
            results.iter().for_each(|f| b.extend(f.to_be_bytes()));
            b'B'
        }
        Msg::Execute { portal, max_rows } => {
            cstring(&mut b, portal);
            b.extend(max_rows.to_be_bytes());
            b'E'
        }
        Msg::Describe { portal, name } | Msg::Close { portal, name } => {
            b.push(if *portal { b'P' } else { b'S' });
            cstring(&mut b, name);
            if matches!(m, Msg::Describe { .. }) {
                b'D'
            } else {
                b'C'
            }
        }
        Msg::Sync => b'S',
        Msg::Flush => b'H',
        Msg::CopyData(d) => {
            b.extend_from_slice(d);
            b'd'
        }
        Msg::CopyDone => b'c',
        Msg::CopyFail(s) => {
            cstring(&mut b, s);
            b'f'
        }
    };
    let mut out = vec![tag];
    out.extend((b.len() as i32 + 4).to_be_bytes());
    out.extend(b);
    out
}

/// How a hostile client bends a valid message.
#[derive(Debug, Clone)]
enum Bend {
    /// The length word says something else.
    Length(i32),
    /// The frame ends early.
    Truncate(usize),
    /// A 16-bit count or format code somewhere in the body is rewritten.
    Count(usize, u16),
    /// A 32-bit length somewhere in the body is rewritten.
    Word(usize, i32),
    /// A byte is overwritten.
    Byte(usize, u8),
    /// Bytes are inserted.
    Insert(usize, Vec<u8>),
}

fn bend() -> impl Strategy<Value = Bend> {
    let word = prop_oneof![Just(-1i32), Just(0), Just(3), Just(4), Just(i32::MAX), Just(i32::MIN), any::<i32>()];
    prop_oneof![
        word.clone().prop_map(Bend::Length),
        any::<usize>().prop_map(Bend::Truncate),
        (any::<usize>(), prop_oneof![Just(0u16), Just(1), Just(u16::MAX), Just(0x8000), any::<u16>()]).prop_map(|(at, v)| Bend::Count(at, v)),
        (any::<usize>(), word).prop_map(|(at, v)| Bend::Word(at, v)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, v)| Bend::Byte(at, v)),
        (any::<usize>(), vec(any::<u8>(), 1..12)).prop_map(|(at, v)| Bend::Insert(at, v)),
    ]
}

fn apply(frame: &mut Vec<u8>, bend: &Bend) {
    let body = 5..frame.len().max(5);
    let at = |i: usize, width: usize| body.start + i % (body.len().saturating_sub(width - 1).max(1));
    match bend {
        Bend::Length(len) if frame.len() >= 5 => frame[1..5].copy_from_slice(&len.to_be_bytes()),
        Bend::Truncate(n) => frame.truncate(n % frame.len()),
        Bend::Count(i, v) if frame.len() >= 7 => {
            let i = at(*i, 2);
            frame[i..i + 2].copy_from_slice(&v.to_be_bytes());
        }
        Bend::Word(i, v) if frame.len() >= 9 => {
            let i = at(*i, 4);
            frame[i..i + 4].copy_from_slice(&v.to_be_bytes());
        }
        Bend::Byte(i, v) => {
            let i = i % frame.len();
            frame[i] = *v;
        }
        Bend::Insert(i, bytes) => {
            let i = i % (frame.len() + 1);
            frame.splice(i..i, bytes.iter().copied());
        }
        _ => frame.push(0xff),
    }
}

/// Frames, validates and decodes like the connection does; a validated frame that does not
/// decode, or any panic, fails the property.
fn run(frame: &[u8], phase: Phase) -> Result<Option<PgWireFrontendMessage>, Violation> {
    let len = match header(frame, phase, 1 << 20)? {
        Header::Frame { len, .. } if len <= frame.len() => len,
        _ => return Ok(None),
    };
    let frame = &frame[..len];
    validate(frame, phase)?;
    match decode_unchecked(BytesMut::from(frame), phase, ProtocolVersion::PROTOCOL3_0) {
        Ok(Some(m)) => Ok(Some(m)),
        other => panic!("a validated frame did not decode: {other:?}"),
    }
}

fn named(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(2_048);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_well_formed_message_is_accepted_with_its_fields(m in message()) {
        let decoded = run(&encode(&m), Phase::Typed).map_err(|v| TestCaseError::fail(format!("refused {m:?}: {v:?}")))?;
        let decoded = decoded.ok_or_else(|| TestCaseError::fail("incomplete"))?;
        match (&m, decoded) {
            (Msg::Query(q), PgWireFrontendMessage::Query(d)) => prop_assert_eq!(q, &d.query),
            (Msg::Parse { name, sql, oids }, PgWireFrontendMessage::Parse(d)) => {
                prop_assert_eq!(named(name), d.name);
                prop_assert_eq!(sql, &d.query);
                prop_assert_eq!(oids, &d.type_oids);
            }
            (Msg::Bind { portal, statement, formats, params, results }, PgWireFrontendMessage::Bind(d)) => {
                prop_assert_eq!(named(portal), d.portal_name);
                prop_assert_eq!(named(statement), d.statement_name);
                prop_assert_eq!(formats, &d.parameter_format_codes);
                let got: Vec<Option<Vec<u8>>> = d.parameters.iter().map(|p| p.as_ref().map(|b| b.to_vec())).collect();
                prop_assert_eq!(params, &got);
                prop_assert_eq!(results, &d.result_column_format_codes);
            }
            (Msg::Execute { portal, max_rows }, PgWireFrontendMessage::Execute(d)) => {
                prop_assert_eq!(named(portal), d.name);
                prop_assert_eq!(*max_rows, d.max_rows);
            }
            (Msg::Describe { name, .. }, PgWireFrontendMessage::Describe(d)) => prop_assert_eq!(named(name), d.name),
            (Msg::Close { name, .. }, PgWireFrontendMessage::Close(d)) => prop_assert_eq!(named(name), d.name),
            (Msg::Sync, PgWireFrontendMessage::Sync(_))
            | (Msg::Flush, PgWireFrontendMessage::Flush(_))
            | (Msg::CopyDone, PgWireFrontendMessage::CopyDone(_)) => {}
            (Msg::CopyData(bytes), PgWireFrontendMessage::CopyData(d)) => prop_assert_eq!(&bytes[..], &d.data[..]),
            (Msg::CopyFail(s), PgWireFrontendMessage::CopyFail(d)) => prop_assert_eq!(s, &d.message),
            (m, d) => prop_assert!(false, "{m:?} decoded as {d:?}"),
        }
    }

    #[test]
    fn a_bent_message_is_refused_or_decodes_and_never_panics(m in message(), bends in vec(bend(), 1..4)) {
        let mut frame = encode(&m);
        for b in &bends {
            if frame.is_empty() {
                break;
            }
            apply(&mut frame, b);
        }
        // As a message, as a startup packet, and as the first message under SCRAM.
        for phase in [Phase::Typed, Phase::Startup, Phase::AuthFirst] {
            let _ = run(&frame, phase);
        }
    }
}
