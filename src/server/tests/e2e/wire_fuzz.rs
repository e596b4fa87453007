//! Issue 10, item 3: wire-protocol fuzzing against a live `eddy` process. Thousands of
//! connections (seeded, bounded in time) send malformed startup packets, lying lengths, and
//! truncated, byte-flipped or spliced Parse/Bind/Execute/Query messages; afterwards the process
//! is still running, answers a fresh `SELECT 1`, and its log holds no panic.
//!
//! `EDDY_FUZZ_SEED` and `EDDY_FUZZ_CASES` override the seed and the number of cases.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::process::Eddy;
use crate::raw::{bind, cstr, execute, msg, parse, query, startup, sync};
use crate::support::connect;

/// Messages a client sends after startup, as seeds for mutation.
fn seeds() -> Vec<Vec<u8>> {
    vec![
        query("SELECT 1"),
        query("SELECT 'a' || 'b', 2 + 3; SELECT now()"),
        parse("SELECT $1::int + 1", &[23]),
        bind(&[1], &[Some(&7i32.to_be_bytes())], &[0]),
        bind(&[], &[Some(b"42")], &[]),
        bind(&[1], &[Some(&[0xff; 8])], &[1]),
        execute(0),
        execute(1),
        msg(b'D', b"S\0"),
        msg(b'D', b"P\0"),
        msg(b'C', b"S\0"),
        msg(b'H', b""),
        sync(),
        msg(b'd', b"1\t2\n"),
        msg(b'c', b""),
        msg(b'f', &cstr("stop")),
        msg(b'p', &cstr("secret")),
    ]
}

/// Startup-phase packets, as seeds: StartupMessage, SSLRequest, GSSENCRequest, CancelRequest.
fn startup_seeds() -> Vec<Vec<u8>> {
    let packet = |words: &[i32]| -> Vec<u8> {
        let mut b = ((words.len() as i32 + 1) * 4).to_be_bytes().to_vec();
        words.iter().for_each(|w| b.extend(w.to_be_bytes()));
        b
    };
    vec![startup("root"), packet(&[80_877_103]), packet(&[80_877_104]), packet(&[80_877_102, 1000, 1234])]
}

/// One random change: truncate, flip bits, overwrite bytes, lie about a length or a count,
/// splice in junk.
fn mutate(rng: &mut StdRng, m: &mut Vec<u8>) {
    let n = m.len();
    match rng.gen_range(0..6) {
        0 if n > 0 => m.truncate(rng.gen_range(0..n)),
        1 if n > 0 => {
            let i = rng.gen_range(0..n);
            m[i] ^= 1 << rng.gen_range(0..8);
        }
        2 if n > 0 => {
            let i = rng.gen_range(0..n);
            m[i] = [0u8, 0xff, 0x7f, 0x80][rng.gen_range(0..4)];
        }
        3 if n >= 5 => {
            let at = usize::from(m[0].is_ascii_alphabetic());
            let len: i32 = [0, 3, 4, -1, i32::MAX, n as i32 + 50, rng.gen_range(0..1 << 20)][rng.gen_range(0..7)];
            m[at..at + 4].copy_from_slice(&len.to_be_bytes());
        }
        4 => {
            let at = rng.gen_range(0..=n);
            let junk: Vec<u8> = (0..rng.gen_range(1..24)).map(|_| rng.gen()).collect();
            m.splice(at..at, junk);
        }
        _ if n > 2 => {
            let i = rng.gen_range(1..n - 1);
            m[i] = 0xff;
            m[i + 1] = rng.gen();
        }
        _ => m.push(rng.gen()),
    }
}

/// Sends `bytes` on a fresh connection (after a valid startup if `started`), then half-closes
/// and reads until the server closes. Returns false if the server could not be reached.
fn send_case(addr: SocketAddr, started: bool, bytes: &[u8]) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    if started {
        let _ = s.write_all(&startup("root"));
    }
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    let mut sink = [0u8; 65536];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_server_survives_thousands_of_malformed_messages() {
    let mut eddy = Eddy::start("wire-fuzz", &["--max-message-bytes", "1048576"]);
    let seed: u64 = std::env::var("EDDY_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x0edd_f022);
    let cases: usize = std::env::var("EDDY_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(5000);
    let addr = eddy.addr;
    let started_at = Instant::now();
    let sent = tokio::task::spawn_blocking(move || {
        let mut rng = StdRng::seed_from_u64(seed);
        let (seeds, startups) = (seeds(), startup_seeds());
        let deadline = Instant::now() + Duration::from_secs(240);
        let mut sent = 0;
        for _ in 0..cases {
            if Instant::now() > deadline {
                break;
            }
            let (started, bytes) = match rng.gen_range(0..10) {
                // A malformed startup-phase packet.
                0..=2 => {
                    let mut p = startups[rng.gen_range(0..startups.len())].clone();
                    for _ in 0..rng.gen_range(1..4) {
                        mutate(&mut rng, &mut p);
                    }
                    (false, p)
                }
                // Random bytes after startup.
                3 => (true, (0..rng.gen_range(1..64)).map(|_| rng.gen()).collect()),
                // A few messages, some mutated, then Sync and a query that must still work.
                _ => {
                    let mut out = Vec::new();
                    for _ in 0..rng.gen_range(1..5) {
                        let mut m = seeds[rng.gen_range(0..seeds.len())].clone();
                        if rng.gen_bool(0.7) {
                            for _ in 0..rng.gen_range(1..3) {
                                mutate(&mut rng, &mut m);
                            }
                        }
                        out.extend(m);
                    }
                    out.extend(sync());
                    out.extend(query("SELECT 1"));
                    (true, out)
                }
            };
            assert!(send_case(addr, started, &bytes), "server unreachable after {sent} cases");
            sent += 1;
        }
        sent
    })
    .await
    .unwrap();
    assert!(eddy.alive(), "the server process died; log:\n{}", eddy.log_text());
    let c = connect(eddy.addr).await;
    let v: i32 = c.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(v, 1);
    let log = eddy.log_text();
    assert!(!log.contains("panicked"), "the server logged a panic:\n{log}");
    println!("wire fuzz: cases={sent} seed={seed} elapsed={:.1}s panics=0", started_at.elapsed().as_secs_f64());
    assert!(sent >= cases.min(500), "only {sent} cases ran");
}
