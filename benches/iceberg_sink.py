"""Iceberg sink throughput: rows/s from COPY into a table to the rows committed in its lake.

    python3 benches/iceberg_sink.py EDDY_PORT WAREHOUSE_DIR N [EDDY_PID] [upsert|append-only]

Creates table `ib(id BIGINT PRIMARY KEY, k INT, v TEXT, x DOUBLE PRECISION)` and a sink of it
(`type` as given, default append-only with force_append_only) into `WAREHOUSE_DIR` (storage
catalog, commit_checkpoint_interval 4); COPYs N rows in 10 statements; polls the table's
metadata (the `eddy.next-seq` of the newest snapshot, from version-hint.text) until all N
changes are committed. Prints rows/s from the start of the COPY to the last commit, the COPY's
own rate, snapshot count and, given EDDY_PID, Eddy's peak RSS (VmHWM). The table is read by
file, not through Eddy, so the figure is what a lake reader sees.
"""
import io
import json
import os
import sys
import time

import psycopg


def newest_seq(location):
    meta = os.path.join(location, "metadata")
    try:
        with open(os.path.join(meta, "version-hint.text")) as f:
            version = int(f.read().strip())
    except FileNotFoundError:
        return 0, 0
    while os.path.exists(os.path.join(meta, f"v{version + 1}.metadata.json")):
        version += 1
    with open(os.path.join(meta, f"v{version}.metadata.json")) as f:
        m = json.load(f)
    snaps = sorted(m.get("snapshots", []), key=lambda s: s["sequence-number"])
    if not snaps:
        return 0, 0
    return int(snaps[-1]["summary"].get("eddy.next-seq", 0)), len(snaps)


def peak_rss(pid):
    if not pid:
        return None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) // 1024


def main():
    port, warehouse, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    pid = sys.argv[4] if len(sys.argv) > 4 else None
    kind = sys.argv[5] if len(sys.argv) > 5 else "append-only"
    db = psycopg.connect(f"host=127.0.0.1 port={port} user=root dbname=dev", autocommit=True)
    db.execute("CREATE TABLE ib (id BIGINT PRIMARY KEY, k INT, v TEXT, x DOUBLE PRECISION)")
    extra = "force_append_only = 'true'," if kind == "append-only" else "primary_key = 'id',"
    db.execute(
        f"CREATE SINK ib_lake FROM ib WITH (connector = 'iceberg', type = '{kind}', {extra} "
        f"warehouse.path = 'file://{warehouse}', database.name = 'db', table.name = 'ib', "
        "create_table_if_not_exists = 'true', commit_checkpoint_interval = '4')"
    )
    location = os.path.join(warehouse, "db", "ib")
    start = time.time()
    per = n // 10
    for b in range(10):
        buf = io.StringIO()
        for i in range(b * per, n if b == 9 else (b + 1) * per):
            buf.write(f"{i}\t{i % 1000}\tvalue-{i % 97}\t{i * 0.5}\n")
        with db.cursor().copy("COPY ib FROM STDIN") as cp:
            cp.write(buf.getvalue())
    copied = time.time()
    while True:
        seq, snaps = newest_seq(location)
        if seq >= n:
            break
        time.sleep(0.05)
    end = time.time()
    print(f"RESULT iceberg sink ({kind}): {n} rows, COPY {n / (copied - start):,.0f} rows/s, "
          f"committed to the lake {n / (end - start):,.0f} rows/s ({end - start:.1f} s), "
          f"{snaps} snapshots, peak RSS {peak_rss(pid)} MiB")


if __name__ == "__main__":
    main()
