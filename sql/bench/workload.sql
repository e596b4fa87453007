-- Schema used by src/server/benches/workload.rs (kept here for running the same workload by hand
-- with psql). Data: id = 0..N-1, a = id % 100000, b = 'g' || (id % 10), c = a double.
CREATE TABLE t (id BIGINT PRIMARY KEY, a INT, b TEXT, c DOUBLE PRECISION);

-- copy-mv (issue 3): a 100K-group view and a 10-group view over t.
CREATE MATERIALIZED VIEW g100k AS SELECT id % 100000 AS k, count(*) AS n, sum(c) AS s FROM t GROUP BY id % 100000;
CREATE MATERIALIZED VIEW g10 AS SELECT b, count(*) AS n, sum(c) AS s, avg(c) AS av FROM t GROUP BY b;

-- point-query (issue 4): the view queried with SELECT * FROM mv WHERE k = $1.
CREATE MATERIALIZED VIEW mv AS SELECT a AS k, count(*) AS n, sum(c) AS s FROM t GROUP BY a;

-- Single-row insert (issue 2 latency / concurrency, issue 3 epoch commit latency):
-- INSERT INTO t (id, a, b, c) VALUES ($1, $2, $3, $4);
