"""Connection setup to first row with psycopg 3 (ms). Usage: python3 benches/bench_connect.py PORT (against a running eddy)."""
import time, statistics, sys
import psycopg
port = int(sys.argv[1])
times = []
for _ in range(20):
    t0 = time.perf_counter()
    with psycopg.connect(f"host=127.0.0.1 port={port} user=root dbname=dev") as c:
        c.execute("SELECT 1").fetchone()
    times.append((time.perf_counter() - t0) * 1000)
print(f"psycopg connect-to-first-row: median {statistics.median(times):.2f} ms, min {min(times):.2f} ms over {len(times)}")
