//! Randomized differential testing of incremental view maintenance: random INSERT/UPDATE/
//! DELETE/COPY on a few tables feeding several views; after every step each view is checked
//! with `VERIFY MATERIALIZED VIEW`, which recomputes its query in batch over the same snapshot
//! and compares multisets (or, for a view with failing rows, the error). A step that fails
//! with an expected error must leave every table as it was (statement atomicity).
//!
//! Scenarios:
//! * [`BASIC`]: integers, text, booleans; aggregates, filters, HAVING, a view on a view, UNION ALL;
//!   INSERT ... ON CONFLICT DO NOTHING / DO UPDATE.
//! * [`TYPED`]: floats (double and real, values exact in binary so that any summation order
//!   gives the same sum), numerics, strings (empty, non-ASCII, case variants), NULLs everywhere,
//!   COPY FROM STDIN (tokio-postgres `copy_in`), the tables' own conflict policies (OVERWRITE,
//!   IGNORE, DO UPDATE IF NOT NULL), transaction blocks, and a view with failing rows (numeric
//!   division by zero).
//! * [`FLOAT_SPECIAL_SUMS`], [`FLOAT_SPECIAL_EXTREMES`]: NaN and ±Infinity flowing through
//!   sum/avg and min/max and retracted again (ignored for now: see their tests).
//!
//! A second test checks that a run with a restart in the middle ends with exactly the view
//! contents of an uninterrupted run.
//!
//! `EDDY_DIFF_STEPS` scales the number of steps of every scenario (default: each scenario's
//! own, which together make about 5,500 view checks in CI, ~1 minute on the debug build) and
//! `EDDY_DIFF_SEED` sets the seed; a failing run prints its seed.

use futures::SinkExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::{Client, SimpleQueryMessage};

use crate::support::{connect, rows, server, temp_dir, verify};

/// One random step: a statement (or several, e.g. a transaction block), or a COPY.
enum Step {
    /// SQL run with the simple query protocol.
    Sql(String),
    /// `COPY table FROM STDIN` with these text-format lines.
    Copy { table: &'static str, lines: Vec<String> },
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Sql(s) => write!(f, "{s}"),
            Step::Copy { table, lines } => write!(f, "COPY {table} FROM STDIN: {lines:?}"),
        }
    }
}

/// A schema, its views and a generator of random steps over it.
struct Scenario {
    /// Tables and views.
    setup: &'static str,
    /// The views to VERIFY after every step.
    views: &'static [&'static str],
    /// A query summarizing every table's rows (compared around failed steps).
    digest: &'static str,
    /// SQLSTATEs a step may fail with (changing nothing).
    expected_errors: &'static [&'static str],
    /// Steps per run by default.
    steps: usize,
    /// The step generator.
    step: fn(&mut StdRng) -> Step,
}

const BASIC: Scenario = Scenario {
    setup: "
CREATE TABLE t1 (id INT PRIMARY KEY, g INT, v INT, s TEXT);
CREATE TABLE t2 (a INT, b INT, flag BOOLEAN);
CREATE MATERIALIZED VIEW v_groups AS SELECT g, count(*) AS c, sum(v) AS sv, min(v) AS lo, max(v) AS hi, avg(v) AS av FROM t1 GROUP BY g;
CREATE MATERIALIZED VIEW v_filter AS SELECT id, v * 2 AS v2, s FROM t1 WHERE v > 50;
CREATE MATERIALIZED VIEW v_global AS SELECT count(*) AS n, sum(a) AS sa, count(DISTINCT b) AS db, bool_or(flag) AS anyflag FROM t2;
CREATE MATERIALIZED VIEW v_having AS SELECT a, count(*) AS c, count(DISTINCT s) AS ds, min(s) AS ms FROM (SELECT a, CAST(b AS TEXT) AS s FROM t2) x GROUP BY a HAVING count(*) > 1;
CREATE MATERIALIZED VIEW v_on_view AS SELECT count(*) AS groups, sum(c) AS rows_in_groups, max(hi) AS top FROM v_groups;
CREATE MATERIALIZED VIEW v_project AS SELECT s, g FROM t1;
CREATE MATERIALIZED VIEW v_union AS SELECT x, count(*) AS n, sum(y) AS sy FROM (SELECT g AS x, v AS y FROM t1 UNION ALL SELECT a, b FROM t2) u GROUP BY x;
",
    views: &["v_groups", "v_filter", "v_global", "v_having", "v_on_view", "v_project", "v_union"],
    digest: "SELECT (SELECT count(*) FROM t1), (SELECT sum(id) FROM t1), (SELECT sum(v) FROM t1), (SELECT string_agg(s, ',' ORDER BY id) FROM t1), (SELECT count(*) FROM t2), (SELECT sum(b) FROM t2)",
    // A key conflict (a plain INSERT of an existing key, an UPDATE moving a key onto another
    // row) or ON CONFLICT DO UPDATE meeting a key twice.
    expected_errors: &["23505", "21000"],
    steps: 400,
    step: basic_step,
};

fn opt_int(rng: &mut StdRng, max: i32) -> String {
    if rng.gen_ratio(1, 10) { "NULL".into() } else { rng.gen_range(0..max).to_string() }
}

/// One random statement of [`BASIC`].
fn basic_step(rng: &mut StdRng) -> Step {
    Step::Sql(match rng.gen_range(0..12) {
        0..=2 => {
            let rows: Vec<String> = (0..rng.gen_range(1..5))
                .map(|_| {
                    format!("({}, {}, {}, 's{}')", rng.gen_range(0..150), opt_int(rng, 8), opt_int(rng, 100), rng.gen_range(0..5))
                })
                .collect();
            // A plain INSERT of an existing key fails (23505) and changes nothing.
            let on_conflict = match rng.gen_range(0..3) {
                0 => "",
                1 => " ON CONFLICT DO NOTHING",
                _ => " ON CONFLICT (id) DO UPDATE SET v = excluded.v + t1.v, s = excluded.s WHERE t1.g IS DISTINCT FROM 3",
            };
            format!("INSERT INTO t1 VALUES {}{on_conflict}", rows.join(", "))
        }
        3 => format!("UPDATE t1 SET v = v + {} WHERE g = {}", rng.gen_range(-30..30), rng.gen_range(0..8)),
        4 => format!("UPDATE t1 SET g = {} WHERE id = {}", opt_int(rng, 8), rng.gen_range(0..150)),
        5 => format!("UPDATE t1 SET id = id + 1 WHERE id = {}", rng.gen_range(0..150)),
        6 => format!("DELETE FROM t1 WHERE id = {}", rng.gen_range(0..150)),
        7 => format!("DELETE FROM t1 WHERE g = {}", rng.gen_range(0..8)),
        8 | 9 => {
            let rows: Vec<String> = (0..rng.gen_range(1..4))
                .map(|_| format!("({}, {}, {})", opt_int(rng, 6), opt_int(rng, 20), ["true", "false", "NULL"][rng.gen_range(0..3)]))
                .collect();
            format!("INSERT INTO t2 VALUES {}", rows.join(", "))
        }
        10 => format!("DELETE FROM t2 WHERE a = {}", rng.gen_range(0..6)),
        _ => format!("UPDATE t2 SET b = b + 1, flag = NOT flag WHERE a = {}", rng.gen_range(0..6)),
    })
}

const JOINS: Scenario = Scenario {
    setup: "
CREATE TABLE o (id INT PRIMARY KEY, c INT, amount INT);
CREATE TABLE cu (id INT PRIMARY KEY, r INT, name TEXT);
CREATE TABLE re (r INT, label TEXT);
CREATE MATERIALIZED VIEW j_inner AS SELECT o.id, cu.name, o.amount FROM o JOIN cu ON o.c = cu.id;
CREATE MATERIALIZED VIEW j_left AS SELECT o.id, o.c, cu.name FROM o LEFT JOIN cu ON o.c = cu.id;
CREATE MATERIALIZED VIEW j_right AS SELECT o.id AS oid, cu.id AS cid FROM o RIGHT JOIN cu ON o.c = cu.id AND o.amount > cu.r;
CREATE MATERIALIZED VIEW j_full AS SELECT o.id AS oid, cu.id AS cid, re.label FROM o FULL JOIN cu ON o.c = cu.id FULL JOIN re ON cu.r = re.r;
CREATE MATERIALIZED VIEW j_agg AS SELECT cu.r, count(*) AS n, sum(o.amount) AS s, min(cu.name) AS first FROM o JOIN cu ON o.c = cu.id GROUP BY cu.r;
CREATE MATERIALIZED VIEW j_self AS SELECT a.id AS a, b.id AS b FROM o a JOIN o b ON a.c = b.c AND a.amount < b.amount;
CREATE MATERIALIZED VIEW j_semi AS SELECT id, name FROM cu WHERE EXISTS (SELECT 1 FROM o WHERE o.c = cu.id AND o.amount > 10);
CREATE MATERIALIZED VIEW j_anti AS SELECT id FROM cu WHERE NOT EXISTS (SELECT 1 FROM re WHERE re.r = cu.r);
CREATE MATERIALIZED VIEW j_scalar AS SELECT id, (SELECT count(*) FROM o WHERE o.c = cu.id) AS n, (SELECT max(amount) FROM o) AS top FROM cu;
CREATE MATERIALIZED VIEW j_sets AS SELECT c FROM o INTERSECT SELECT id FROM cu;
CREATE MATERIALIZED VIEW j_except AS SELECT r FROM cu EXCEPT ALL SELECT r FROM re;
CREATE MATERIALIZED VIEW j_not_in AS SELECT id, r FROM cu WHERE r NOT IN (SELECT r FROM re);
CREATE MATERIALIZED VIEW j_on_view AS SELECT l.name, count(*) AS n FROM j_left l JOIN j_semi s ON l.c = s.id GROUP BY l.name;
",
    views: &["j_inner", "j_left", "j_right", "j_full", "j_agg", "j_self", "j_semi", "j_anti", "j_scalar", "j_sets", "j_except", "j_on_view", "j_not_in"],
    digest: "SELECT (SELECT count(*) FROM o), (SELECT sum(id + coalesce(c, 0) + coalesce(amount, 0)) FROM o), (SELECT count(*) FROM cu), (SELECT sum(id + coalesce(r, 0)) FROM cu), (SELECT count(*) FROM re)",
    expected_errors: &["23505", "21000"],
    steps: 300,
    step: joins_step,
};

/// One random statement of [`JOINS`]: small key domains, so rows match, stop matching and
/// match again; NULL keys.
fn joins_step(rng: &mut StdRng) -> Step {
    Step::Sql(match rng.gen_range(0..10) {
        0..=2 => format!(
            "INSERT INTO o VALUES ({}, {}, {}) ON CONFLICT (id) DO UPDATE SET c = excluded.c",
            rng.gen_range(0..40),
            opt_int(rng, 8),
            opt_int(rng, 30)
        ),
        3 => format!("UPDATE o SET c = {} WHERE id = {}", opt_int(rng, 8), rng.gen_range(0..40)),
        4 => format!("DELETE FROM o WHERE c = {}", rng.gen_range(0..8)),
        5 => format!("INSERT INTO cu VALUES ({}, {}, 'n{}') ON CONFLICT DO NOTHING", rng.gen_range(0..8), opt_int(rng, 4), rng.gen_range(0..3)),
        6 => format!("UPDATE cu SET r = {} WHERE id = {}", opt_int(rng, 4), rng.gen_range(0..8)),
        7 => format!("DELETE FROM cu WHERE id = {}", rng.gen_range(0..8)),
        8 => format!("INSERT INTO re VALUES ({}, 'l{}')", opt_int(rng, 4), rng.gen_range(0..3)),
        _ => format!("DELETE FROM re WHERE r = {}", rng.gen_range(0..4)),
    })
}

const WINDOWS: Scenario = Scenario {
    setup: "
CREATE TABLE w (id INT PRIMARY KEY, g INT, v INT);
CREATE MATERIALIZED VIEW w_top AS SELECT id, v FROM w ORDER BY v DESC NULLS LAST, id LIMIT 5;
CREATE MATERIALIZED VIEW w_page AS SELECT id FROM w ORDER BY v, id LIMIT 3 OFFSET 2;
CREATE MATERIALIZED VIEW w_group_top AS SELECT id, g, v FROM (SELECT id, g, v, row_number() OVER (PARTITION BY g ORDER BY v DESC, id) AS rn FROM w) x WHERE rn <= 2;
CREATE MATERIALIZED VIEW w_dedup AS SELECT id, g FROM (SELECT id, g, row_number() OVER (PARTITION BY g ORDER BY id) AS rn FROM w) x WHERE rn = 1;
CREATE MATERIALIZED VIEW w_ranks AS SELECT id, rank() OVER (PARTITION BY g ORDER BY v) AS r, dense_rank() OVER (PARTITION BY g ORDER BY v) AS dr FROM w;
CREATE MATERIALIZED VIEW w_lag AS SELECT id, lag(v) OVER (PARTITION BY g ORDER BY id) AS prev, lead(v, 2) OVER (PARTITION BY g ORDER BY id) AS next2 FROM w;
CREATE MATERIALIZED VIEW w_running AS SELECT id, sum(v) OVER (PARTITION BY g ORDER BY id) AS s, count(v) OVER (PARTITION BY g) AS n, min(v) OVER (PARTITION BY g ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS lo FROM w;
CREATE MATERIALIZED VIEW w_latest AS SELECT DISTINCT ON (g) g, id, v FROM w ORDER BY g, v DESC, id;
CREATE MATERIALIZED VIEW w_filter AS SELECT g, count(*) FILTER (WHERE v > 10) AS big, sum(v) FILTER (WHERE id % 2 = 0) AS even, first_value(id ORDER BY v, id) AS f, last_value(v ORDER BY id) AS l, stddev(v) AS sd, var_pop(v) AS vp FROM w GROUP BY g;
CREATE MATERIALIZED VIEW w_top_groups AS SELECT g, n FROM (SELECT g, count(*) AS n FROM w GROUP BY g) c ORDER BY n DESC, g NULLS FIRST LIMIT 3;
CREATE MATERIALIZED VIEW w_ordered AS SELECT g, array_agg(v ORDER BY id DESC) AS a, jsonb_agg(DISTINCT v) AS j, json_agg(id ORDER BY v, id) AS ji, percentile_cont(0.3) WITHIN GROUP (ORDER BY v) AS p, percentile_disc(ARRAY[0.5, 1]) WITHIN GROUP (ORDER BY v DESC) AS d, mode() WITHIN GROUP (ORDER BY v) AS m, jsonb_object_agg(id, v) AS o FROM w GROUP BY g;
",
    views: &["w_top", "w_page", "w_group_top", "w_dedup", "w_ranks", "w_lag", "w_running", "w_top_groups", "w_latest", "w_filter", "w_ordered"],
    digest: "SELECT (SELECT count(*) FROM w), (SELECT sum(id + coalesce(g, 0) + coalesce(v, 0)) FROM w)",
    expected_errors: &["23505", "21000"],
    steps: 250,
    step: windows_step,
};

/// One random statement of [`WINDOWS`]: rows enter, leave, change value and move between
/// partitions; values repeat (ties) and may be NULL.
fn windows_step(rng: &mut StdRng) -> Step {
    Step::Sql(match rng.gen_range(0..8) {
        0..=2 => {
            let rows: Vec<String> =
                (0..rng.gen_range(1..4)).map(|_| format!("({}, {}, {})", rng.gen_range(0..60), opt_int(rng, 5), opt_int(rng, 20))).collect();
            format!("INSERT INTO w VALUES {} ON CONFLICT DO NOTHING", rows.join(", "))
        }
        3 => format!("UPDATE w SET v = {} WHERE id = {}", opt_int(rng, 20), rng.gen_range(0..60)),
        4 => format!("UPDATE w SET g = {} WHERE id % 7 = {}", opt_int(rng, 5), rng.gen_range(0..7)),
        5 => format!("DELETE FROM w WHERE id = {}", rng.gen_range(0..60)),
        6 => format!("DELETE FROM w WHERE g = {}", rng.gen_range(0..5)),
        _ => format!("UPDATE w SET v = v + 1 WHERE g = {}", rng.gen_range(0..5)),
    })
}

const TYPED: Scenario = Scenario {
    setup: "
CREATE TABLE m (id INT PRIMARY KEY, g INT, f DOUBLE PRECISION, n NUMERIC(12,3), s TEXT);
CREATE TABLE w (k TEXT PRIMARY KEY, r REAL, n NUMERIC(10,2), tag VARCHAR(4)) ON CONFLICT OVERWRITE;
CREATE TABLE p (k INT PRIMARY KEY, a TEXT, b DOUBLE PRECISION) ON CONFLICT DO UPDATE IF NOT NULL;
CREATE TABLE ig (k INT PRIMARY KEY, s TEXT) ON CONFLICT IGNORE;
CREATE MATERIALIZED VIEW m_groups AS SELECT g, count(*) AS c, count(f) AS cf, sum(f) AS sf, avg(f) AS af, min(f) AS lo, max(f) AS hi, sum(n) AS sn, avg(n) AS an, min(n) AS ln, max(n) AS hn FROM m GROUP BY g;
CREATE MATERIALIZED VIEW m_text AS SELECT lower(s) AS ls, count(*) AS c, count(DISTINCT s) AS ds, min(s) AS lo, max(s) AS hi, sum(n) AS sn FROM m GROUP BY lower(s);
CREATE MATERIALIZED VIEW m_rows AS SELECT id, f * 2 AS f2, n + 1 AS n1, s || '!' AS s1, coalesce(s, '-') AS s2, length(s) AS len FROM m WHERE f IS NULL OR f > -20 OR s IS NULL;
CREATE MATERIALIZED VIEW m_nulls AS SELECT g IS NULL AS gnull, s IS NULL AS snull, count(*) AS c, count(n) AS cn, sum(f) AS sf FROM m GROUP BY g IS NULL, s IS NULL;
CREATE MATERIALIZED VIEW m_div AS SELECT id, n / g AS q FROM m;
CREATE MATERIALIZED VIEW m_on_view AS SELECT count(*) AS groups, sum(c) AS c, sum(sn) AS sn, max(hi) AS hi FROM m_groups;
CREATE MATERIALIZED VIEW w_tags AS SELECT tag, count(*) AS c, sum(r) AS sr, max(r) AS hr, sum(n) AS sn, min(k) AS lk FROM w GROUP BY tag;
CREATE MATERIALIZED VIEW p_rows AS SELECT k, a, b FROM p WHERE b IS NULL OR b < 50;
CREATE MATERIALIZED VIEW keys_union AS SELECT x, count(*) AS c, max(s) AS s FROM (SELECT k AS x, a AS s FROM p UNION ALL SELECT k, s FROM ig) u GROUP BY x;
",
    views: &["m_groups", "m_text", "m_rows", "m_nulls", "m_div", "m_on_view", "w_tags", "p_rows", "keys_union"],
    digest: "SELECT \
        (SELECT string_agg(CAST(id AS TEXT) || ':' || coalesce(CAST(g AS TEXT), '~') || ':' || coalesce(CAST(f AS TEXT), '~') || ':' || coalesce(CAST(n AS TEXT), '~') || ':' || coalesce(s, '~'), ',' ORDER BY id) FROM m), \
        (SELECT string_agg(k || ':' || coalesce(CAST(r AS TEXT), '~') || ':' || coalesce(CAST(n AS TEXT), '~') || ':' || coalesce(tag, '~'), ',' ORDER BY k) FROM w), \
        (SELECT string_agg(CAST(k AS TEXT) || ':' || coalesce(a, '~') || ':' || coalesce(CAST(b AS TEXT), '~'), ',' ORDER BY k) FROM p), \
        (SELECT string_agg(CAST(k AS TEXT) || ':' || coalesce(s, '~'), ',' ORDER BY k) FROM ig)",
    // Key conflicts as in BASIC; 22003 if a numeric grows past its precision.
    expected_errors: &["23505", "21000", "22003"],
    steps: 300,
    step: typed_step,
};

/// Strings worth having: empty, non-ASCII, case variants, spaces, a quote.
const WORDS: [&str; 12] = ["a", "A", "ab", "", "é", "ß", "b c", "z", "Apple", "apple", "ü1", "it's"];

/// A nullable value in SQL and in COPY text form.
struct Val {
    sql: String,
    copy: String,
}

fn null() -> Val {
    Val { sql: "NULL".into(), copy: "\\N".into() }
}

/// A double with an exact binary value (a multiple of 1/4), so every summation order agrees.
fn float(rng: &mut StdRng) -> Val {
    if rng.gen_ratio(1, 10) {
        return null();
    }
    let v = f64::from(rng.gen_range(-400..400)) * 0.25;
    Val { sql: format!("{v}"), copy: format!("{v}") }
}

/// A numeric with up to three decimals.
fn numeric(rng: &mut StdRng, scale: u32) -> Val {
    if rng.gen_ratio(1, 10) {
        return null();
    }
    let units = rng.gen_range(-99_999i64..99_999);
    let div = 10i64.pow(scale);
    let sign = if units < 0 { "-" } else { "" };
    let text = format!("{sign}{}.{:0width$}", units.abs() / div, units.abs() % div, width = scale as usize);
    Val { sql: text.clone(), copy: text }
}

fn word(rng: &mut StdRng) -> Val {
    if rng.gen_ratio(1, 10) {
        return null();
    }
    let w = WORDS[rng.gen_range(0..WORDS.len())];
    Val { sql: format!("'{}'", w.replace('\'', "''")), copy: w.to_string() }
}

fn small_int(rng: &mut StdRng, max: i32) -> Val {
    if rng.gen_ratio(1, 10) {
        return null();
    }
    let v = rng.gen_range(0..max).to_string();
    Val { sql: v.clone(), copy: v }
}

/// A row of `table`, as SQL values and as a COPY line.
fn typed_row(rng: &mut StdRng, table: &str) -> (String, String) {
    let vals: Vec<Val> = match table {
        "m" => {
            let id = rng.gen_range(0..120).to_string();
            vec![Val { sql: id.clone(), copy: id }, small_int(rng, 5), float(rng), numeric(rng, 3), word(rng)]
        }
        "w" => {
            let k = WORDS[rng.gen_range(0..WORDS.len())];
            let k = Val { sql: format!("'{}'", k.replace('\'', "''")), copy: k.to_string() };
            let tag = ["x", "y", "zz"][rng.gen_range(0..3)];
            let tag = if rng.gen_ratio(1, 8) { null() } else { Val { sql: format!("'{tag}'"), copy: tag.into() } };
            vec![k, float(rng), numeric(rng, 2), tag]
        }
        "p" => {
            let k = rng.gen_range(0..40).to_string();
            vec![Val { sql: k.clone(), copy: k }, word(rng), float(rng)]
        }
        _ => {
            let k = rng.gen_range(0..40).to_string();
            vec![Val { sql: k.clone(), copy: k }, word(rng)]
        }
    };
    let sql = format!("({})", vals.iter().map(|v| v.sql.as_str()).collect::<Vec<_>>().join(", "));
    let copy = vals.iter().map(|v| v.copy.as_str()).collect::<Vec<_>>().join("\t");
    (sql, copy)
}

fn typed_insert(rng: &mut StdRng, table: &'static str, max_rows: usize) -> Step {
    let rows: Vec<(String, String)> = (0..rng.gen_range(1..=max_rows)).map(|_| typed_row(rng, table)).collect();
    if rng.gen_ratio(1, 3) {
        return Step::Copy { table, lines: rows.into_iter().map(|r| r.1).collect() };
    }
    let values = rows.into_iter().map(|r| r.0).collect::<Vec<_>>().join(", ");
    let on_conflict = match (table, rng.gen_range(0..3)) {
        ("m", 1) => " ON CONFLICT DO NOTHING",
        ("m", 2) => " ON CONFLICT (id) DO UPDATE SET f = excluded.f, n = m.n + excluded.n, s = coalesce(excluded.s, m.s) WHERE m.g IS DISTINCT FROM 0",
        ("p", 2) => " ON CONFLICT (k) DO UPDATE SET b = p.b + 1",
        _ => "",
    };
    Step::Sql(format!("INSERT INTO {table} VALUES {values}{on_conflict}"))
}

/// One random step of [`TYPED`].
fn typed_step(rng: &mut StdRng) -> Step {
    let id = rng.gen_range(0..120);
    let g = rng.gen_range(0..5);
    match rng.gen_range(0..20) {
        0..=3 => typed_insert(rng, "m", 4),
        4 => Step::Sql(format!("UPDATE m SET f = f + 0.5, n = -n WHERE g = {g}")),
        5 => Step::Sql(format!("UPDATE m SET s = {}, n = n + 1.5 WHERE id % 7 = {}", word(rng).sql, id % 7)),
        6 => Step::Sql(format!("UPDATE m SET g = {} WHERE id = {id}", small_int(rng, 5).sql)),
        7 => Step::Sql(format!("UPDATE m SET f = NULL WHERE id % 11 = {}", id % 11)),
        8 => Step::Sql(format!("DELETE FROM m WHERE id = {id} OR s = {}", word(rng).sql)),
        9 => Step::Sql(format!("DELETE FROM m WHERE g = {g}")),
        10 | 11 => typed_insert(rng, "w", 4),
        12 => Step::Sql(format!("UPDATE w SET r = r + 0.25, n = n * 2 WHERE tag = '{}'", ["x", "y", "zz"][g as usize % 3])),
        13 => Step::Sql(format!("DELETE FROM w WHERE k = {}", word(rng).sql)),
        14 | 15 => typed_insert(rng, "p", 3),
        16 => Step::Sql(format!("DELETE FROM p WHERE k % 5 = {}", g)),
        17 => typed_insert(rng, "ig", 3),
        18 => Step::Sql(format!("DELETE FROM ig WHERE k % 4 = {}", g % 4)),
        // A transaction block over two tables: applied whole at COMMIT, or not at all.
        _ => {
            let (a, _) = typed_row(rng, "m");
            let (b, _) = typed_row(rng, "p");
            Step::Sql(format!(
                "BEGIN; INSERT INTO m VALUES {a} ON CONFLICT (id) DO UPDATE SET n = excluded.n; \
                 UPDATE m SET f = f * 2 WHERE id = {id}; INSERT INTO p VALUES {b}; DELETE FROM ig WHERE k = {id}; COMMIT"
            ))
        }
    }
}

const FLOAT_SPECIAL_SUMS: Scenario = Scenario {
    setup: "
CREATE TABLE fs (id INT PRIMARY KEY, g INT, f DOUBLE PRECISION);
CREATE MATERIALIZED VIEW fs_groups AS SELECT g, count(*) AS c, count(f) AS cf, sum(f) AS sf, avg(f) AS af FROM fs GROUP BY g;
CREATE MATERIALIZED VIEW fs_total AS SELECT sum(f) AS sf, avg(f) AS af FROM fs;
",
    views: &["fs_groups", "fs_total"],
    digest: "SELECT string_agg(CAST(id AS TEXT) || ':' || coalesce(CAST(f AS TEXT), '~'), ',' ORDER BY id) FROM fs",
    expected_errors: &["23505"],
    steps: 150,
    step: float_specials_step,
};

const FLOAT_SPECIAL_EXTREMES: Scenario = Scenario {
    setup: "
CREATE TABLE fs (id INT PRIMARY KEY, g INT, f DOUBLE PRECISION);
CREATE MATERIALIZED VIEW fs_extremes AS SELECT g, min(f) AS lo, max(f) AS hi FROM fs GROUP BY g;
",
    views: &["fs_extremes"],
    ..FLOAT_SPECIAL_SUMS
};

fn special_float(rng: &mut StdRng) -> String {
    match rng.gen_range(0..8) {
        0 => "CAST('NaN' AS DOUBLE PRECISION)".into(),
        1 => "CAST('Infinity' AS DOUBLE PRECISION)".into(),
        2 => "CAST('-Infinity' AS DOUBLE PRECISION)".into(),
        3 => "NULL".into(),
        _ => format!("{}", f64::from(rng.gen_range(-40..40)) * 0.5),
    }
}

/// One random step over `fs`: special values come and go.
fn float_specials_step(rng: &mut StdRng) -> Step {
    let id = rng.gen_range(0..30);
    Step::Sql(match rng.gen_range(0..4) {
        0 | 1 => format!("INSERT INTO fs VALUES ({id}, {}, {}) ON CONFLICT (id) DO UPDATE SET f = excluded.f", rng.gen_range(0..3), special_float(rng)),
        2 => format!("DELETE FROM fs WHERE id = {id}"),
        _ => format!("UPDATE fs SET f = {} WHERE id % 3 = {}", special_float(rng), id % 3),
    })
}

/// Runs one step.
async fn run_step(c: &Client, step: &Step) -> Result<(), tokio_postgres::Error> {
    match step {
        Step::Sql(sql) => c.batch_execute(sql).await,
        Step::Copy { table, lines } => {
            let sink = c.copy_in(&format!("COPY {table} FROM STDIN")).await?;
            futures::pin_mut!(sink);
            let mut data = lines.join("\n");
            data.push('\n');
            sink.send(bytes::Bytes::from(data)).await?;
            sink.finish().await.map(|_| ())
        }
    }
}

/// Runs `step`; an expected error must leave every table as it was (statement atomicity).
async fn execute(c: &Client, sc: &Scenario, step: &Step) -> Result<(), String> {
    let before = digest(c, sc).await;
    let Err(e) = run_step(c, step).await else { return Ok(()) };
    // A block that failed half-way stays open (and refuses statements) until it ends.
    c.batch_execute("ROLLBACK").await.map_err(|e| format!("ROLLBACK after a failed step: {e}"))?;
    let code = e.as_db_error().map(|d| d.code().code().to_string()).unwrap_or_default();
    if !sc.expected_errors.contains(&code.as_str()) {
        return Err(format!("{step}: {e:?}"));
    }
    let after = digest(c, sc).await;
    if after != before {
        return Err(format!("{step} failed with {code} but changed the tables: {before} -> {after}"));
    }
    Ok(())
}

/// A summary of every table's rows.
async fn digest(c: &Client, sc: &Scenario) -> String {
    let msgs = c.simple_query(sc.digest).await.unwrap_or_else(|e| panic!("digest: {e:?}"));
    msgs.iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_string()).collect::<Vec<_>>().join("/")),
            _ => None,
        })
        .collect()
}

/// Every view's contents, sorted, as text (or the error reading it returns).
async fn contents(c: &Client, sc: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    for v in sc.views {
        match rows(c, &format!("SELECT * FROM {v}")).await {
            Ok(r) => {
                let mut lines: Vec<String> = r.iter().map(|row| row.join(",")).collect();
                lines.sort();
                out.push(format!("{v}: {}", lines.join(" | ")));
            }
            Err(e) => out.push(format!("{v}: error {e}")),
        }
    }
    out
}

fn seed() -> u64 {
    std::env::var("EDDY_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random)
}

/// Steps of a scenario: its default, or `EDDY_DIFF_STEPS` times its share of the default 400.
fn steps(sc: &Scenario) -> usize {
    match std::env::var("EDDY_DIFF_STEPS").ok().and_then(|s| s.parse::<usize>().ok()) {
        Some(n) => (n * sc.steps).div_ceil(BASIC.steps),
        None => sc.steps,
    }
}

/// Runs `sc` from an empty in-memory database, verifying every view after every step.
async fn differential(name: &str, sc: &Scenario) {
    differential_with(name, sc, |_| {}).await;
}

/// [`differential`] on a server configured by `configure`.
async fn differential_with(name: &str, sc: &Scenario, configure: impl FnOnce(&mut eddy_server::ServerConfig)) {
    let seed = seed();
    let steps = steps(sc);
    let srv = crate::support::server_with(configure).await;
    let c = connect(srv.addr).await;
    c.batch_execute(sc.setup).await.unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut checks, mut mismatches) = (0usize, Vec::new());
    for step in 0..steps {
        let s = (sc.step)(&mut rng);
        execute(&c, sc, &s).await.unwrap_or_else(|e| panic!("{name} seed {seed} step {step}: {e}"));
        for v in sc.views {
            checks += 1;
            if let Err(diff) = verify(&c, v).await {
                mismatches.push(format!("step {step} after `{s}`: {diff}"));
            }
        }
        if !mismatches.is_empty() {
            break;
        }
    }
    println!("differential {name}: {checks} view checks, {} mismatches (seed {seed})", mismatches.len());
    assert!(mismatches.is_empty(), "{name} seed {seed}: {}", mismatches.join("\n"));
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_match_batch_recomputation_after_every_random_statement() {
    differential("basic", &BASIC).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_match_batch_recomputation_after_every_random_statement() {
    differential("joins", &JOINS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_and_top_n_match_batch_recomputation_after_every_random_statement() {
    differential("windows", &WINDOWS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_over_floats_numerics_strings_and_nulls_match_after_every_random_insert_copy_upsert_and_block() {
    differential("typed", &TYPED).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sums_and_averages_retract_nan_and_infinities_exactly() {
    differential("float special sums", &FLOAT_SPECIAL_SUMS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the batch side is wrong: DataFusion's grouped min/max over floats do not order NaN and Infinity as PostgreSQL does (min of {Infinity} is 1.797e308, NaN counts as the minimum or is skipped by max), so VERIFY reports the correct view as a mismatch"]
async fn min_and_max_follow_nan_and_infinities_as_postgres_orders_them() {
    differential("float special extremes", &FLOAT_SPECIAL_EXTREMES).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_whose_operator_caches_evict_at_every_chunk_match_batch_recomputation() {
    // An operator-cache budget of one byte: aggregations, joins and windows shed every clean,
    // committed entry before each chunk and reload what the chunk touches from the store.
    for (name, sc) in [("basic, starved caches", &BASIC), ("joins, starved caches", &JOINS), ("windows, starved caches", &WINDOWS)] {
        differential_with(name, sc, |c| c.memory_bytes = 2).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_run_ends_with_the_same_views_as_an_uninterrupted_one() {
    let seed = seed();
    for (name, sc, steps) in [("basic", &BASIC, 120), ("typed", &TYPED, 80), ("joins", &JOINS, 80), ("windows", &WINDOWS, 80)] {
        let statements: Vec<Step> = {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..steps).map(|_| (sc.step)(&mut rng)).collect()
        };
        // Uninterrupted.
        let srv = server("memory://").await;
        let c = connect(srv.addr).await;
        c.batch_execute(sc.setup).await.unwrap();
        for s in &statements {
            execute(&c, sc, s).await.unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
        }
        let expected = contents(&c, sc).await;
        srv.shutdown().await.unwrap();
        // With a restart in the middle: views resume from their committed state.
        let dir = temp_dir("restart-diff");
        let url = format!("file://{}", dir.display());
        let srv = server(&url).await;
        let c = connect(srv.addr).await;
        c.batch_execute(sc.setup).await.unwrap();
        for s in &statements[..steps / 2] {
            execute(&c, sc, s).await.unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
        }
        drop(c);
        srv.shutdown().await.unwrap();
        let srv = server(&url).await;
        let c = connect(srv.addr).await;
        for s in &statements[steps / 2..] {
            execute(&c, sc, s).await.unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
        }
        let actual = contents(&c, sc).await;
        for v in sc.views {
            verify(&c, v).await.unwrap_or_else(|d| panic!("{name} seed {seed}: after restart: {d}"));
        }
        assert_eq!(actual, expected, "{name} seed {seed}");
        srv.shutdown().await.unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }
}
