"""The write cost of a change to a big group's multiset (`min`/`max`/`count(DISTINCT)` over an
updatable input), against a running eddy started with `--http`.

Usage: python3 benches/multisets.py PORT HTTP_PORT [ROWS] [INSERTS] (default 200,000 rows, 30
INSERTs). Loads `ms_t(id BIGINT PRIMARY KEY, g INT, v BIGINT)` with ROWS rows in one group,
creates `ms_v AS SELECT g, max(v), min(v), count(DISTINCT v) FROM ms_t GROUP BY g`, then runs
INSERTS single-row INSERTs into that group and prints the time per INSERT and the object-store
bytes written per INSERT (`/api/storage`).
"""
import json, sys, time, urllib.request
import psycopg
from benchlib import copy_rows

port, http_port = int(sys.argv[1]), int(sys.argv[2])
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
inserts = int(sys.argv[4]) if len(sys.argv) > 4 else 30


def written():
    storage = json.load(urllib.request.urlopen(f"http://127.0.0.1:{http_port}/api/storage"))
    return storage["object_store"]["bytes_written"]


conn = psycopg.connect(f"host=127.0.0.1 port={port} dbname=dev user=root", autocommit=True)
conn.execute("CREATE TABLE ms_t (id BIGINT PRIMARY KEY, g INT, v BIGINT)")
copy_rows(conn, "ms_t", rows, 1_000_000, lambda i: f"{i}\t1\t{i}\n")
started = time.time()
conn.execute("CREATE MATERIALIZED VIEW ms_v AS SELECT g, max(v) AS hi, min(v) AS lo, count(DISTINCT v) AS d FROM ms_t GROUP BY g")
print(f"created the view over {rows} rows in {time.time() - started:.1f} s", flush=True)
before, started = written(), time.time()
for i in range(inserts):
    conn.execute("INSERT INTO ms_t VALUES (%s, 1, %s)", (rows + i, -i))
took, bytes_written = time.time() - started, written() - before
print(f"{inserts} single-row INSERTs: {took / inserts * 1000:.1f} ms each, {bytes_written / inserts / 1e6:.2f} MB written each")
print("view:", conn.execute("SELECT g, lo, hi, d FROM ms_v").fetchall())
