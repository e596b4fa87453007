"""Issue 11's full-scan measure: how long `count(*)`, `sum` and `LIMIT 10` take on a table of
narrow rows, in wall time and in server CPU time.

Usage: python3 benches/scan.py PORT PID [ROWS] (against a running eddy whose process id is PID;
default 5,000,000 rows). Loads `scan_t(id BIGINT PRIMARY KEY, a INT, b TEXT)` with COPY in
500K-row statements (unless it already holds ROWS rows), waits until the server's CPU is quiet
(the fold and compaction after a bulk load), then runs each query three times and prints the
best wall time, its server CPU seconds, and rows/s.
"""
import sys, time
import psycopg
from benchlib import copy_rows, status_mib

port, pid = int(sys.argv[1]), int(sys.argv[2])
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 5_000_000
tick = 100.0  # clock ticks per second (getconf CLK_TCK)


def cpu():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


def rss_mib():
    return status_mib(pid, "VmRSS")


conn = psycopg.connect(f"host=127.0.0.1 port={port} dbname=dev user=root", autocommit=True)
conn.execute("CREATE TABLE IF NOT EXISTS scan_t (id BIGINT PRIMARY KEY, a INT, b TEXT)")
have = conn.execute("SELECT count(*) FROM scan_t").fetchone()[0]
if have != rows:
    conn.execute("DELETE FROM scan_t")
    started = time.time()
    copy_rows(conn, "scan_t", rows, 500_000, lambda i: f"{i}\t{i % 1000}\trow {i}\n")
    print(f"loaded {rows} rows in {time.time() - started:.1f} s")
# Wait for the background fold and compaction: less than 5% of a core over 5 s.
while True:
    before = cpu()
    time.sleep(5)
    if cpu() - before < 0.25:
        break
print(f"server idle, RSS {rss_mib()} MiB")
for sql in ["SELECT count(*) FROM scan_t", "SELECT sum(a) FROM scan_t", "SELECT * FROM scan_t LIMIT 10"]:
    best = None
    for _ in range(3):
        c0, t0 = cpu(), time.time()
        out = conn.execute(sql).fetchall()
        wall, used = time.time() - t0, cpu() - c0
        if best is None or wall < best[0]:
            best = (wall, used, len(out))
    wall, used, n = best
    print(f"{sql}: {wall * 1000:.0f} ms wall, {used:.2f} CPU-s, {rows / wall / 1e6:.2f}M rows/s ({n} result rows), RSS {rss_mib()} MiB")
