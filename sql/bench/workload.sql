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

-- join: two tables of N rows each (k = id % 100000), a 1:1 join on id and a 100K-group aggregate.
CREATE TABLE l (id BIGINT PRIMARY KEY, k INT, v INT);
CREATE TABLE r (id BIGINT PRIMARY KEY, k INT, w INT);
CREATE MATERIALIZED VIEW jv AS SELECT l.k, count(*) AS n, sum(r.w) AS s FROM l JOIN r ON l.id = r.id GROUP BY l.k;

-- hop: auction = id % 1000, ts = 2024-01-01 00:00:00 + id milliseconds.
CREATE TABLE e (id BIGINT PRIMARY KEY, auction INT, price INT, ts TIMESTAMP);
CREATE MATERIALIZED VIEW hv AS SELECT auction, window_start, count(*) AS n, max(price) AS top
  FROM HOP(e, ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND) GROUP BY auction, window_start;

-- topn: g = id % 1000, v distinct pseudo-random; the top 10 of each group.
CREATE TABLE t2 (id BIGINT PRIMARY KEY, g INT, v INT);
CREATE MATERIALIZED VIEW tv AS SELECT * FROM (SELECT id, g, v,
  row_number() OVER (PARTITION BY g ORDER BY v DESC, id) AS rn FROM t2) x WHERE rn <= 10;
