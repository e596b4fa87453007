//! A raw PostgreSQL protocol client for tests that send what no driver would: lying lengths,
//! malformed messages, huge counts. Blocking I/O with generous timeouts (the server runs on its
//! own runtime, so blocking a test thread does not stall it).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One backend message: its type byte and body.
pub type Msg = (u8, Vec<u8>);

/// A message with type `tag` and body `body`.
pub fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// `s` with its NUL terminator.
pub fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// A simple-protocol Query.
pub fn query(sql: &str) -> Vec<u8> {
    msg(b'Q', &cstr(sql))
}

/// Parse of the unnamed statement with the given parameter type OIDs.
pub fn parse(sql: &str, oids: &[u32]) -> Vec<u8> {
    let mut b = cstr("");
    b.extend(cstr(sql));
    b.extend((oids.len() as u16).to_be_bytes());
    for o in oids {
        b.extend(o.to_be_bytes());
    }
    msg(b'P', &b)
}

/// Bind of the unnamed portal: parameter formats, values (`None` = NULL), result formats.
pub fn bind(formats: &[i16], params: &[Option<&[u8]>], results: &[i16]) -> Vec<u8> {
    let mut b = cstr("");
    b.extend(cstr(""));
    b.extend((formats.len() as u16).to_be_bytes());
    formats.iter().for_each(|f| b.extend(f.to_be_bytes()));
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
    results.iter().for_each(|f| b.extend(f.to_be_bytes()));
    msg(b'B', &b)
}

/// Execute of the unnamed portal.
pub fn execute(max_rows: i32) -> Vec<u8> {
    let mut b = cstr("");
    b.extend(max_rows.to_be_bytes());
    msg(b'E', &b)
}

/// Sync.
pub fn sync() -> Vec<u8> {
    msg(b'S', b"")
}

/// A protocol-3.0 StartupMessage for `user` on database `dev`.
pub fn startup(user: &str) -> Vec<u8> {
    let mut b = 196_608i32.to_be_bytes().to_vec();
    for (k, v) in [("user", user), ("database", "dev")] {
        b.extend(cstr(k));
        b.extend(cstr(v));
    }
    b.push(0);
    let mut out = (b.len() as i32 + 4).to_be_bytes().to_vec();
    out.extend(b);
    out
}

/// An ErrorResponse's severity, SQLSTATE and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFields {
    pub severity: String,
    pub code: String,
    pub message: String,
}

/// The fields of an ErrorResponse body.
pub fn error_fields(body: &[u8]) -> ErrorFields {
    let mut e = ErrorFields { severity: String::new(), code: String::new(), message: String::new() };
    for f in body.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let v = String::from_utf8_lossy(&f[1..]).into_owned();
        match f[0] {
            b'S' => e.severity = v,
            b'C' => e.code = v,
            b'M' => e.message = v,
            _ => {}
        }
    }
    e
}

/// A raw connection.
pub struct Raw {
    sock: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    /// Connects without sending anything.
    pub fn open(addr: SocketAddr) -> Self {
        let sock = TcpStream::connect(addr).expect("connects");
        sock.set_read_timeout(Some(Duration::from_secs(120))).expect("timeout");
        let _ = sock.set_nodelay(true);
        Self { sock, buf: Vec::new() }
    }

    /// Connects and completes startup as `root` (trust).
    pub fn connect(addr: SocketAddr) -> Self {
        let mut r = Self::open(addr);
        r.send(&startup("root"));
        let msgs = r.until_ready();
        assert!(matches!(msgs.last(), Some((b'Z', _))), "startup: {msgs:?}");
        r
    }

    /// Writes `bytes` (errors ignored: the server may have closed the connection).
    pub fn send(&mut self, bytes: &[u8]) {
        let _ = self.sock.write_all(bytes);
    }

    /// The next message, or `None` at end of stream.
    pub fn next(&mut self) -> Option<Msg> {
        loop {
            if self.buf.len() >= 5 {
                let len = i32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
                if self.buf.len() > len {
                    let body = self.buf[5..1 + len].to_vec();
                    let tag = self.buf[0];
                    self.buf.drain(..1 + len);
                    return Some((tag, body));
                }
            }
            let mut chunk = [0u8; 65536];
            match self.sock.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Messages up to and including ReadyForQuery (or up to the end of the stream).
    pub fn until_ready(&mut self) -> Vec<Msg> {
        let mut out = Vec::new();
        while let Some(m) = self.next() {
            let ready = m.0 == b'Z';
            out.push(m);
            if ready {
                break;
            }
        }
        out
    }

    /// Sends `bytes`, then returns the messages up to ReadyForQuery.
    pub fn round_trip(&mut self, bytes: &[u8]) -> Vec<Msg> {
        self.send(bytes);
        self.until_ready()
    }

    /// Everything until the server closes the connection.
    pub fn until_closed(&mut self) -> Vec<Msg> {
        let mut out = Vec::new();
        while let Some(m) = self.next() {
            out.push(m);
        }
        out
    }

    /// The text of the first column of each DataRow in `msgs`.
    pub fn first_values(msgs: &[Msg]) -> Vec<String> {
        msgs.iter()
            .filter(|(t, _)| *t == b'D')
            .map(|(_, b)| {
                let len = i32::from_be_bytes([b[2], b[3], b[4], b[5]]);
                if len < 0 {
                    "NULL".to_string()
                } else {
                    String::from_utf8_lossy(&b[6..6 + len as usize]).into_owned()
                }
            })
            .collect()
    }

    /// The errors in `msgs`.
    pub fn errors(msgs: &[Msg]) -> Vec<ErrorFields> {
        msgs.iter().filter(|(t, _)| *t == b'E').map(|(_, b)| error_fields(b)).collect()
    }

    /// Runs `SELECT 1` on this connection and checks the answer.
    pub fn assert_alive(&mut self) {
        let msgs = self.round_trip(&query("SELECT 1"));
        assert_eq!(Self::first_values(&msgs), vec!["1"], "connection should still answer: {msgs:?}");
    }
}
