//! Frame validation: each malformed message from issue 10 is refused without a panic, valid
//! messages pass, and a seeded random search over mutated messages finds no frame that passes
//! validation yet makes pgwire's decoder panic or fail.

use bytes::BytesMut;
use pgwire::messages::{PgWireFrontendMessage, ProtocolVersion};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

fn parse(name: &str, sql: &str, oids: &[u32]) -> Vec<u8> {
    let mut b = cstr(name);
    b.extend(cstr(sql));
    b.extend((oids.len() as u16).to_be_bytes());
    for o in oids {
        b.extend(o.to_be_bytes());
    }
    msg(b'P', &b)
}

fn bind(formats: &[i16], params: &[Option<&[u8]>], results: &[i16]) -> Vec<u8> {
    let mut b = cstr("");
    b.extend(cstr(""));
    b.extend((formats.len() as u16).to_be_bytes());
    for f in formats {
        b.extend(f.to_be_bytes());
    }
    b.extend((params.len() as u16).to_be_bytes());
    for p in params {
        match p {
            Some(v) => {
                b.extend((v.len() as i32).to_be_bytes());
                b.extend_from_slice(v);
            }
            None => b.extend((-1i32).to_be_bytes()),
        }
    }
    b.extend((results.len() as u16).to_be_bytes());
    for f in results {
        b.extend(f.to_be_bytes());
    }
    msg(b'B', &b)
}

fn execute(max_rows: i32) -> Vec<u8> {
    let mut b = cstr("");
    b.extend(max_rows.to_be_bytes());
    msg(b'E', &b)
}

fn startup(params: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(196_608i32.to_be_bytes());
    for (k, v) in params {
        b.extend(cstr(k));
        b.extend(cstr(v));
    }
    b.push(0);
    let mut out = (b.len() as i32 + 4).to_be_bytes().to_vec();
    out.extend(b);
    out
}

fn phase_of(frame: &[u8]) -> Phase {
    if frame.first().is_some_and(|b| b.is_ascii_alphabetic()) {
        Phase::Typed
    } else {
        Phase::Startup
    }
}

/// Frames one message the way the connection does, then validates and decodes it.
fn check(frame: &[u8], phase: Phase) -> Result<PgWireFrontendMessage, Violation> {
    match header(frame, phase, 1 << 20)? {
        Header::Incomplete => Err(Violation::fatal("08P01", "incomplete")),
        Header::Frame { len, .. } if len > frame.len() => Err(Violation::fatal("08P01", "incomplete")),
        Header::Frame { len, .. } => {
            let frame = &frame[..len];
            validate(frame, phase)?;
            // No catch_unwind here: a panic fails the test.
            match decode_unchecked(BytesMut::from(frame), phase, ProtocolVersion::PROTOCOL3_0) {
                Ok(Some(m)) => Ok(m),
                other => panic!("validated frame {frame:?} did not decode: {other:?}"),
            }
        }
    }
}

#[test]
fn well_formed_messages_pass_and_decode() {
    for frame in [
        msg(b'Q', &cstr("SELECT 1")),
        msg(b'Q', &cstr("SELECT '€€'")),
        parse("s1", "SELECT $1", &[23]),
        bind(&[1], &[Some(&[0, 0, 0, 1])], &[0]),
        bind(&[], &[None, Some(b"x")], &[]),
        execute(0),
        execute(-1),
        msg(b'D', b"Sname\0"),
        msg(b'C', b"P\0"),
        msg(b'S', b""),
        msg(b'H', b""),
        msg(b'd', b"1\t2\n"),
        msg(b'c', b""),
        msg(b'f', &cstr("stop")),
    ] {
        check(&frame, Phase::Typed).unwrap_or_else(|v| panic!("{frame:?}: {v:?}"));
    }
    check(&startup(&[("user", "root"), ("database", "dev")]), Phase::Startup).unwrap();
}

#[test]
fn the_malformed_messages_of_issue_10_are_refused() {
    let cases: Vec<(Vec<u8>, &str, bool)> = vec![
        // Parse claiming 65535 parameter types it does not carry.
        ({
            let mut b = cstr("");
            b.extend(cstr("SELECT 1"));
            b.extend(65535u16.to_be_bytes());
            msg(b'P', &b)
        }, "08P01", false),
        // Parse without NULs.
        (msg(b'P', b"abc"), "08P01", false),
        // Bind with a parameter length past the end.
        ({
            let mut b = cstr("");
            b.extend(cstr(""));
            b.extend(0u16.to_be_bytes());
            b.extend(1u16.to_be_bytes());
            b.extend(1000i32.to_be_bytes());
            b.extend(b"12");
            msg(b'B', &b)
        }, "08P01", false),
        // Bind with format codes that are neither text nor binary, or a count mismatch.
        (bind(&[7], &[Some(b"1")], &[]), "22023", false),
        (bind(&[0, 1], &[Some(b"1")], &[]), "08P01", false),
        // Query text that is not UTF-8.
        (msg(b'Q', b"SELECT '\xff\xfe'\0"), "22021", false),
        // Query without its NUL, or with bytes after it.
        (msg(b'Q', b"SELECT 1"), "08P01", false),
        (msg(b'Q', b"SELECT 1\0junk"), "08P01", false),
        // Describe of something that is neither a statement nor a portal.
        (msg(b'D', b"Xname\0"), "08P01", false),
        // Execute cut short.
        (msg(b'E', b"\0\0\0"), "08P01", false),
    ];
    for (frame, code, fatal) in cases {
        let v = check(&frame, Phase::Typed).expect_err(&format!("{frame:?} passed"));
        assert_eq!((v.sqlstate, v.fatal), (code, fatal), "{frame:?}: {v:?}");
    }
}

#[test]
fn lying_lengths_are_refused_before_the_body_is_read() {
    // Shorter than the length word itself, negative, and above the limit.
    for len in [0i32, 3, -1, i32::MIN] {
        let mut f = vec![b'Q'];
        f.extend(len.to_be_bytes());
        let v = header(&f, Phase::Typed, 1 << 20).expect_err("refused");
        assert!(v.fatal && v.sqlstate == "08P01", "{len}: {v:?}");
    }
    let mut f = vec![b'Q'];
    f.extend(((1 << 20) + 1i32).to_be_bytes());
    let v = header(&f, Phase::Typed, 1 << 20).expect_err("too large");
    assert_eq!((v.sqlstate, v.fatal), ("54000", true));
    // Small message types have PostgreSQL's small limit whatever --max-message-bytes says.
    let mut f = vec![b'S'];
    f.extend(100_000i32.to_be_bytes());
    assert!(header(&f, Phase::Typed, 1 << 30).is_err());
    // Unknown message types end the connection, as in PostgreSQL.
    let v = header(b"Z\0\0\0\x04", Phase::Typed, 1 << 20).expect_err("unknown type");
    assert!(v.fatal);
    // Startup packets: too short, too long.
    for len in [4i32, 7, 10_001, -8] {
        assert!(header(&len.to_be_bytes(), Phase::Startup, 1 << 20).is_err(), "{len}");
    }
}

#[test]
fn malformed_startup_packets_are_fatal() {
    let mut no_terminator = startup(&[("user", "root")]);
    no_terminator.pop();
    let n = no_terminator.len() as i32;
    no_terminator[0..4].copy_from_slice(&n.to_be_bytes());
    let mut v2 = startup(&[("user", "root")]);
    v2[4..8].copy_from_slice(&131_072i32.to_be_bytes());
    for frame in [no_terminator, v2, startup(&[("user", "\u{0}")])] {
        if let Err(v) = check(&frame, Phase::Startup) {
            assert!(v.fatal, "{frame:?}: {v:?}");
        }
    }
    let mut ssl = 8i32.to_be_bytes().to_vec();
    ssl.extend(80_877_103i32.to_be_bytes());
    assert!(check(&ssl, Phase::Startup).is_err());
}

/// Valid messages of every kind, as seeds for the mutations below.
fn seeds() -> Vec<Vec<u8>> {
    vec![
        msg(b'Q', &cstr("SELECT 1; SELECT 'x'")),
        parse("stmt", "SELECT $1, $2", &[23, 25]),
        parse("", "SELECT 1", &[]),
        bind(&[1, 0], &[Some(&[0, 0, 0, 7]), Some(b"abc")], &[1]),
        bind(&[], &[None], &[0, 1, 0]),
        execute(0),
        execute(1 << 30),
        msg(b'D', b"Sstmt\0"),
        msg(b'C', b"Pportal\0"),
        msg(b'S', b""),
        msg(b'H', b""),
        msg(b'X', b""),
        msg(b'd', b"1,2\n"),
        msg(b'c', b""),
        msg(b'f', &cstr("client gave up")),
        msg(b'p', &cstr("password")),
        startup(&[("user", "root"), ("database", "dev"), ("options", "-c search_path=x")]),
    ]
}

/// One random change: truncate, flip or overwrite bytes, lie about a length or a count.
pub(crate) fn mutate(rng: &mut StdRng, frame: &mut Vec<u8>) {
    match rng.gen_range(0..6) {
        0 if !frame.is_empty() => {
            let n = rng.gen_range(0..frame.len());
            frame.truncate(n);
        }
        1 if !frame.is_empty() => {
            let i = rng.gen_range(0..frame.len());
            frame[i] ^= 1 << rng.gen_range(0..8);
        }
        2 if !frame.is_empty() => {
            let i = rng.gen_range(0..frame.len());
            frame[i] = *[0u8, 0xff, 0x7f, 0x80, b'S', b'P'].get(rng.gen_range(0..6)).unwrap_or(&0);
        }
        3 if frame.len() >= 5 => {
            // Rewrite the length word (after the type byte, or at 0 for startup packets).
            let at = usize::from(frame[0].is_ascii_alphabetic());
            let len: i32 = *[0, 3, 4, -1, i32::MAX, frame.len() as i32 + 100, rng.gen()].get(rng.gen_range(0..7)).unwrap_or(&0);
            frame[at..at + 4].copy_from_slice(&len.to_be_bytes());
        }
        4 => {
            let n = rng.gen_range(1..16);
            let at = rng.gen_range(0..=frame.len());
            let junk: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
            frame.splice(at..at, junk);
        }
        _ if frame.len() > 2 => {
            // A count or length field: two random bytes somewhere after the header.
            let i = rng.gen_range(1..frame.len() - 1);
            frame[i] = 0xff;
            frame[i + 1] = rng.gen();
        }
        _ => frame.push(rng.gen()),
    }
}

#[test]
fn no_mutated_message_passes_validation_and_then_breaks_the_decoder() {
    let mut rng = StdRng::seed_from_u64(0x0edd_7e57);
    let seeds = seeds();
    let mut refused = 0;
    let cases = 200_000;
    for _ in 0..cases {
        let mut frame = seeds[rng.gen_range(0..seeds.len())].clone();
        for _ in 0..rng.gen_range(1..4) {
            mutate(&mut rng, &mut frame);
        }
        let phase = phase_of(&frame);
        if check(&frame, phase).is_err() {
            refused += 1;
        }
        // The SASL initial response layout, too.
        if frame.first() == Some(&b'p') {
            let _ = check(&frame, Phase::AuthFirst);
        }
    }
    assert!(refused > cases / 10, "mutations should mostly be refused ({refused} of {cases})");
}

#[test]
fn random_bytes_never_panic_the_framer() {
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..50_000 {
        let n = rng.gen_range(0..64);
        let mut bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        if rng.gen_bool(0.5) && !bytes.is_empty() {
            bytes[0] = b"QPBEDCHSXdcfpF"[rng.gen_range(0..14)];
        }
        for phase in [Phase::Startup, Phase::AuthFirst, Phase::Typed] {
            let _ = check(&bytes, phase);
        }
    }
}
