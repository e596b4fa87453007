use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::*;

fn rw(sql: &str) -> String {
    let mut s = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
    rewrite(&mut s).unwrap();
    s.to_string()
}

#[test]
fn psql_operator_collate_and_casts_become_plain_sql() {
    let out = rw("SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(t1)$' COLLATE pg_catalog.default AND c.oid = '16384'::pg_catalog.oid");
    assert!(out.contains("c.relname ~ '^(t1)$'"), "{out}");
    assert!(out.contains("'16384'::INT"), "{out}");
}

#[test]
fn regclass_casts_become_lookups_and_names() {
    assert!(rw("SELECT 'pg_class'::regclass").contains("eddy_regclass('pg_class')"));
    assert!(rw("SELECT c.oid::pg_catalog.regclass::pg_catalog.text FROM t c").contains("eddy_regclass_name(c.oid)"));
    assert!(rw("SELECT x::regtype::text FROM t").contains("eddy_regtype_name(x)"));
}

#[test]
fn array_subqueries_become_array_agg() {
    let out = rw("SELECT ARRAY(SELECT b.rolname FROM pg_roles b WHERE b.oid = r.oid ORDER BY 1) FROM pg_roles r");
    assert!(out.contains("(SELECT coalesce(array_agg(b.rolname ORDER BY b.rolname), make_array()) FROM pg_roles b"), "{out}");
}

#[test]
fn array_subqueries_over_one_unnest_become_array_transform() {
    let out = rw("SELECT array(SELECT 'toast.' || x FROM pg_catalog.unnest(tc.reloptions) x WHERE x <> '') FROM pg_class tc");
    assert!(
        out.contains("coalesce(array_transform(array_filter(tc.reloptions, x -> x <> ''), x -> 'toast.' || x), make_array())"),
        "{out}"
    );
    // Anything else keeps the array_agg form.
    let out = rw("SELECT array(SELECT x FROM unnest(a) x ORDER BY x) FROM t");
    assert!(out.contains("array_agg(x ORDER BY x)"), "{out}");
}

#[test]
fn recursive_cte_column_lists_name_the_anchor_columns() {
    let out = rw("WITH RECURSIVE t(n, depth) AS (SELECT 1, 0 UNION ALL SELECT n + 1, t.depth + 1 FROM t WHERE n < 3) SELECT * FROM t");
    assert!(out.contains("WITH RECURSIVE t AS (SELECT 1 AS n, 0 AS depth UNION ALL"), "{out}");
}

#[test]
fn set_returning_calls_and_aliases_follow_postgres() {
    let out = rw("SELECT (information_schema._pg_expandarray(i.indkey)).n FROM pg_index i");
    assert!(out.contains("get_field((unnest(_pg_expandarray(i.indkey))), 'n')"), "{out}");
    assert!(rw("SELECT x FROM unnest(a) x").contains("x (x)"), "{}", rw("SELECT x FROM unnest(a) x"));
    assert!(rw("SELECT 1 WHERE 'r' = ANY('{r,p}')").contains("make_array('r', 'p')"));
}
