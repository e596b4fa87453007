"""Issue 11's backfill measure: a new view over a big table, against a running eddy.

Usage: python3 benches/backfill.py PORT PID [ROWS] [GROUPS] (default 10,000,000 rows,
100,000 groups). Loads `bf_t(id BIGINT PRIMARY KEY, g INT, v INT)` by COPY in statements of
1M rows (`INSERT ... SELECT ... FROM generate_series` of 1M rows is far slower), then times
`CREATE MATERIALIZED VIEW bf_v AS SELECT g, count(*), sum(v), max(v) FROM bf_t GROUP BY g`
(foreground: it returns once the view is complete) and prints backfill rows/s and the
server's peak RSS (VmHWM) before and after. With `--background`, the view is created with
`SET background_ddl = true` and the time is until `WAIT` returns.
"""
import sys, time
import psycopg
from benchlib import copy_rows, status_mib

args = [a for a in sys.argv[1:] if not a.startswith("--")]
background = "--background" in sys.argv
port, pid = int(args[0]), int(args[1])
rows = int(args[2]) if len(args) > 2 else 10_000_000
groups = int(args[3]) if len(args) > 3 else 100_000
step = 1_000_000

conn = psycopg.connect(f"host=127.0.0.1 port={port} dbname=dev user=root", autocommit=True)
conn.execute("CREATE TABLE bf_t (id BIGINT PRIMARY KEY, g INT, v INT)")
started = time.time()
copy_rows(conn, "bf_t", rows, step, lambda i: f"{i}\t{i % groups}\t{i % 1000}\n")
loaded = time.time() - started
print(f"loaded {rows} rows in {loaded:.0f} s ({rows / loaded:.0f} rows/s); peak RSS {status_mib(pid, 'VmHWM')} MiB", flush=True)
if background:
    conn.execute("SET background_ddl = true")
started = time.time()
conn.execute("CREATE MATERIALIZED VIEW bf_v AS SELECT g, count(*) AS n, sum(v) AS s, max(v) AS m FROM bf_t GROUP BY g")
if background:
    print(f"CREATE returned after {time.time() - started:.2f} s", flush=True)
    conn.execute("WAIT")
took = time.time() - started
n, total = conn.execute("SELECT count(*), sum(n) FROM bf_v").fetchone()
print(f"backfilled {rows} rows in {took:.1f} s ({rows / took:.0f} rows/s); {n} groups, sum(n) {total}; peak RSS {status_mib(pid, 'VmHWM')} MiB, RSS {status_mib(pid, 'VmRSS')} MiB")
