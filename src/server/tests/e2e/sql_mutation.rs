//! Issue 10, item 3's second target: parse → plan → run of arbitrary statements. Every
//! statement of the project's sqllogictest corpus (`e2e_test/**/*.slt`) is a seed. The corpus
//! first runs as written (for a third of the time), so its tables, views and rows exist; then
//! each case mutates one statement at the word level (mostly a literal, name or operator
//! replaced by another of its kind from the corpus or an edge value, which keeps most statements
//! parseable; also words dropped, repeated, swapped or replaced by keywords, statements spliced,
//! text cut short) and runs it on a live `eddy` process, for a bounded time. Afterwards the process is still running, answers
//! `SELECT 1`, logged no panic, and no case ended in an internal error (XX000): whatever the
//! text, the answer is rows or a proper SQLSTATE.
//!
//! `EDDY_FUZZ_SEED` (a number, or `random`; fixed by default so CI repeats itself),
//! `EDDY_FUZZ_CASES` (default 10,000) and `EDDY_FUZZ_SECS` (default 60) pin and bound a run.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::process::Eddy;
use crate::support::connect;

/// The SQL of every record of the corpus's `.slt` files.
fn corpus() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e_test");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "slt") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        let mut lines = text.lines();
        while let Some(l) = lines.next() {
            if !(l.starts_with("statement ") || l.starts_with("query ")) {
                continue;
            }
            // Comments dropped: the mutated statement is one line.
            let sql: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.trim().is_empty() && *l != "----")
                .filter(|l| !l.trim_start().starts_with("--"))
                .collect();
            if !sql.is_empty() {
                out.push(sql.join("\n"));
            }
        }
    }
    out
}

/// Words a mutation may put in.
const VOCABULARY: &[&str] = &[
    "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "HAVING", "LIMIT", "JOIN", "LEFT JOIN", "ON", "USING", "UNION", "ALL",
    "DISTINCT", "AS", "AND", "OR", "NOT", "NULL", "IS", "IN", "EXISTS", "CASE", "WHEN", "THEN", "ELSE", "END", "OVER",
    "PARTITION BY", "(", ")", ",", "*", "+", "-", "/", "%", "||", "=", "<>", "<", "::", "[", "]", "'x'", "''", "0", "1", "-1",
    "2147483647", "9223372036854775807", "1e308", "0.5", "NULL::int", "true", "'2024-01-01'::date", "INTERVAL '1 day'",
    "'{}'::jsonb", "ARRAY[1,2]", "t", "v", "x", "count(*)", "sum(", "max(", "now()", "generate_series(1, 3)", "$1", "?",
    ";", "LATERAL", "WITH", "RECURSIVE", "VALUES (1)", "TABLE", "MATERIALIZED VIEW", "CAST(", "AT TIME ZONE",
];

/// Splits `sql` into words, parentheses, commas and semicolons, keeping quoted strings whole
/// (operators stay words: `>=` and `->>` are not split).
fn words(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for ch in sql.chars() {
        if quoted {
            cur.push(ch);
            quoted = ch != '\'';
            if !quoted {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        match ch {
            '\'' => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                cur.push(ch);
                quoted = true;
            }
            c if c.is_whitespace() => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            '(' | ')' | ',' | ';' => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                out.push(ch.to_string());
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// What a word is, for replacing it with one of its kind (which keeps most statements
/// parseable, so the mutations reach planning and evaluation).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Number,
    Text,
    Name,
    Other,
}

fn kind(word: &str) -> Kind {
    const KEYWORDS: &[&str] = &[
        "SELECT", "FROM", "WHERE", "GROUP", "ORDER", "BY", "HAVING", "LIMIT", "JOIN", "LEFT", "RIGHT", "FULL", "INNER", "OUTER",
        "ON", "USING", "UNION", "ALL", "DISTINCT", "AS", "AND", "OR", "NOT", "NULL", "IS", "IN", "EXISTS", "CASE", "WHEN", "THEN",
        "ELSE", "END", "OVER", "PARTITION", "CREATE", "TABLE", "MATERIALIZED", "VIEW", "INSERT", "INTO", "VALUES", "UPDATE", "SET",
        "DELETE", "DROP", "PRIMARY", "KEY", "WITH", "TRUE", "FALSE", "BETWEEN", "LIKE", "ASC", "DESC", "CAST", "INTERVAL", "TYPE",
        "INDEX", "SOURCE", "SINK", "VERIFY", "FLUSH", "COPY", "EXPLAIN", "ANALYZE", "BEGIN", "COMMIT", "ROLLBACK", "RECURSIVE",
        "LATERAL", "WINDOW", "FILTER", "WITHIN", "EMIT", "CLOSE", "TUMBLE", "HOP", "AT", "ZONE", "ANY", "SOME", "ARRAY", "ROW",
        "OFFSET", "FETCH", "FIRST", "NEXT", "ROWS", "ONLY", "RANGE", "PRECEDING", "FOLLOWING", "UNBOUNDED", "CURRENT", "EXCEPT",
        "INTERSECT", "CROSS", "NATURAL", "CONFLICT", "DO", "NOTHING", "RETURNING", "DEFAULT", "CHECK", "CONSTRAINT", "UNIQUE",
    ];
    if word.starts_with('\'') {
        Kind::Text
    } else if word.starts_with(|c: char| c.is_ascii_digit()) || (word.starts_with('-') && word.len() > 1 && word[1..].starts_with(|c: char| c.is_ascii_digit())) {
        Kind::Number
    } else if word.starts_with(|c: char| c.is_ascii_alphabetic())
        && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !KEYWORDS.contains(&word.to_ascii_uppercase().as_str())
    {
        Kind::Name
    } else {
        Kind::Other
    }
}

/// The corpus's words by kind, with edge values added.
fn pools(corpus: &[String]) -> BTreeMap<Kind, Vec<String>> {
    let mut pools: BTreeMap<Kind, std::collections::BTreeSet<String>> = BTreeMap::new();
    for sql in corpus {
        for w in words(sql) {
            pools.entry(kind(&w)).or_default().insert(w);
        }
    }
    for n in ["0", "-1", "2147483647", "-2147483648", "9223372036854775807", "1e308", "0.000001", "99999999999999999999999999999999999999"] {
        pools.entry(Kind::Number).or_default().insert(n.into());
    }
    for t in ["''", "'NaN'", "'infinity'", "'-infinity'", "'{}'", "'[]'", "'{\"a\": 1}'", "'9999-12-31'", "'0001-01-01 BC'", "'1 day'", "'\\x00'"] {
        pools.entry(Kind::Text).or_default().insert(t.into());
    }
    pools.into_iter().map(|(k, v)| (k, v.into_iter().collect())).collect()
}

/// One mutated statement built from the corpus.
fn mutated(rng: &mut StdRng, corpus: &[String], pools: &BTreeMap<Kind, Vec<String>>) -> String {
    let mut w = words(&corpus[rng.gen_range(0..corpus.len())]);
    for _ in 0..rng.gen_range(1..3) {
        if w.is_empty() {
            w.push("SELECT".into());
        }
        let i = rng.gen_range(0..w.len());
        match rng.gen_range(0..20) {
            // Most often a literal or a name replaced by another of its kind.
            0..=13 => {
                let replaceable: Vec<usize> = (0..w.len()).filter(|&j| kind(&w[j]) != Kind::Other).collect();
                if let Some(&j) = replaceable.get(rng.gen_range(0..replaceable.len().max(1))) {
                    let pool = &pools[&kind(&w[j])];
                    w[j] = pool[rng.gen_range(0..pool.len())].clone();
                }
            }
            14 => {
                w.remove(i);
            }
            15 => {
                let x = w[i].clone();
                w.insert(i, x);
            }
            16 => {
                let j = rng.gen_range(0..w.len());
                w.swap(i, j);
            }
            17 => w[i] = VOCABULARY[rng.gen_range(0..VOCABULARY.len())].to_string(),
            18 => {
                // Splice: this statement's head, another's tail.
                let other = words(&corpus[rng.gen_range(0..corpus.len())]);
                let from = rng.gen_range(0..=other.len());
                w.truncate(i);
                w.extend(other.into_iter().skip(from));
            }
            _ => w.truncate(i.max(1)),
        }
    }
    w.join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_statements_of_the_corpus_answer_rows_or_a_proper_error() {
    let mut eddy = Eddy::start("sql-mutation", &[]);
    // A fixed seed by default, so CI is repeatable; EDDY_FUZZ_SEED=random explores.
    let seed: u64 = match std::env::var("EDDY_FUZZ_SEED").ok().as_deref() {
        Some("random") => rand::random(),
        Some(s) => s.parse().expect("EDDY_FUZZ_SEED: a number or random"),
        None => 0x0005_eed0_f5e1,
    };
    let cases: usize = std::env::var("EDDY_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let verbose = std::env::var("EDDY_FUZZ_VERBOSE").is_ok();
    let secs: u64 = std::env::var("EDDY_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let corpus = corpus();
    assert!(corpus.len() > 500, "the corpus has {} statements", corpus.len());
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let mut c = connect(eddy.addr).await;
    // The corpus as written first, so its tables, views and rows exist for the mutations.
    let setup_deadline = Instant::now() + Duration::from_secs(secs / 3);
    for sql in &corpus {
        if Instant::now() > setup_deadline {
            break;
        }
        let _ = c.batch_execute("ROLLBACK; SET statement_timeout = '1s'").await;
        if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(120), c.batch_execute(sql)).await {
            assert_ne!(e.as_db_error().map(|d| d.code().code()), Some("XX000"), "the corpus itself: {sql}: {e:?}");
            if e.as_db_error().is_none() {
                c = connect(eddy.addr).await;
            }
        }
    }
    let pools = pools(&corpus);
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    let (mut ran, mut internal) = (0usize, Vec::new());
    while ran < cases && Instant::now() < deadline {
        let sql = mutated(&mut rng, &corpus, &pools);
        ran += 1;
        // Each case on a session that reads for at most a second.
        let _ = c.batch_execute("ROLLBACK; SET statement_timeout = '1s'").await;
        let mut message = String::new();
        let code = match tokio::time::timeout(Duration::from_secs(120), c.batch_execute(&sql)).await {
            Ok(Ok(())) => "ok".to_string(),
            Ok(Err(e)) => match e.as_db_error() {
                Some(d) => {
                    message = d.message().to_string();
                    d.code().code().to_string()
                }
                // The session ended (a FATAL error ends only that session): a new one.
                None => {
                    assert!(eddy.alive(), "the server died on: {sql}\nlog:\n{}", eddy.log_text());
                    c = connect(eddy.addr).await;
                    "session ended".to_string()
                }
            },
            Err(_) => panic!("seed {seed}: no answer within 120 s to: {sql}"),
        };
        if verbose {
            eprintln!("{code}: {sql}");
        }
        if code == "XX000" {
            internal.push(format!("{sql}\n  ({message})"));
        }
        *states.entry(code).or_default() += 1;
    }
    assert!(eddy.alive(), "the server process died; log:\n{}", eddy.log_text());
    let c = connect(eddy.addr).await;
    let v: i32 = c.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(v, 1);
    let log = eddy.log_text();
    assert!(!log.contains("panicked"), "seed {seed}: the server logged a panic:\n{log}");
    println!(
        "sql mutation: cases={ran} seed={seed} elapsed={:.1}s corpus={} outcomes={states:?}",
        started.elapsed().as_secs_f64(),
        corpus.len()
    );
    assert!(internal.is_empty(), "seed {seed}: {} internal errors:\n{}", internal.len(), internal.join("\n---\n"));
    assert!(ran >= cases.min(300), "only {ran} cases ran");
}
