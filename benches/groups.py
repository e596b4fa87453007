"""Issue 11's state-at-scale measure: N distinct keys into a GROUP BY view with count/sum/max,
against a running eddy (start it with the budget to test, e.g. `--memory-mb 256`).

Usage: python3 benches/groups.py PORT PID [ROWS] [STATE_DIR] [ROWS_PER_COPY] (default 20,000,000
rows, 1,000,000 per COPY statement). Creates
`g_t(id BIGINT PRIMARY KEY, v INT)` and `g_v AS SELECT id AS k, count(*) AS n, sum(v) AS s,
max(v) AS m FROM g_t GROUP BY id` (one group per row), COPYs the rows and
prints rows/s through the view, the server's peak RSS (VmHWM) and the state directory's size.
"""
import subprocess, sys, time
import psycopg
from benchlib import copy_rows, status_mib

port, pid = int(sys.argv[1]), int(sys.argv[2])
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 20_000_000
state_dir = sys.argv[4] if len(sys.argv) > 4 else None
step = int(sys.argv[5]) if len(sys.argv) > 5 else 1_000_000


def status(field):
    return status_mib(pid, field)


conn = psycopg.connect(f"host=127.0.0.1 port={port} dbname=dev user=root", autocommit=True)
conn.execute("CREATE TABLE g_t (id BIGINT PRIMARY KEY, v INT)")
conn.execute("CREATE MATERIALIZED VIEW g_v AS SELECT id AS k, count(*) AS n, sum(v) AS s, max(v) AS m FROM g_t GROUP BY id")
started = time.time()


def progress(done):
    if done % 1_000_000 == 0 or done == rows:
        print(f"{done} rows, {time.time() - started:.0f} s, RSS {status('VmRSS')} MiB, peak {status('VmHWM')} MiB", flush=True)


copy_rows(conn, "g_t", rows, step, lambda i: f"{i}\t{i % 997}\n", progress)
elapsed = time.time() - started
n = conn.execute("SELECT count(*) FROM g_v").fetchone()[0]
size = subprocess.run(["du", "-sm", state_dir], capture_output=True, text=True).stdout.split()[0] if state_dir else "?"
print(f"{rows} rows through the view in {elapsed:.0f} s ({rows / elapsed:.0f} rows/s); groups {n}; peak RSS {status('VmHWM')} MiB; state {size} MB")
