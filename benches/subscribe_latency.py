"""SUBSCRIBE latency: time from an INSERT returning (and from it being sent) to its change arriving at a
subscriber. Usage: python3 benches/subscribe_latency.py HOST PORT N  (needs psycopg 3; creates table `lat`)."""
import sys, threading, time

import psycopg
HOST, PORT, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
DSN = f"host={HOST} port={PORT} user=root dbname=dev"
w = psycopg.connect(DSN, autocommit=True)
w.execute("CREATE TABLE lat (id INT PRIMARY KEY)")
s = psycopg.connect(DSN, autocommit=True)
arrived = {}
ready = threading.Event()
def follow():
    cur = s.cursor()
    for ts, diff, ident in cur.stream("SUBSCRIBE lat"):
        arrived[ident] = time.perf_counter()
        ready.set()
        if ident == N:
            return
t = threading.Thread(target=follow, daemon=True); t.start()
time.sleep(1)
done = {}
sent = {}
for i in range(1, N + 1):
    sent[i] = time.perf_counter()
    w.execute("INSERT INTO lat VALUES (%s)", (i,))
    done[i] = time.perf_counter()
    while i not in arrived:
        time.sleep(0.0002)
lat = sorted((arrived[i] - done[i]) * 1000 for i in range(1, N + 1))
full = sorted((arrived[i] - sent[i]) * 1000 for i in range(1, N + 1))
ins = sorted((done[i] - sent[i]) * 1000 for i in range(1, N + 1))
print(f"{N} inserts: INSERT sent -> change arrives: p50 {full[len(full)//2]:.2f} ms, p99 {full[int(len(full)*0.99)]:.2f} ms; INSERT round trip p50 {ins[len(ins)//2]:.2f} ms")
print(f"{N} inserts: insert-return -> change arrives: p50 {lat[len(lat)//2]:.2f} ms, p99 {lat[int(len(lat)*0.99)]:.2f} ms, max {lat[-1]:.2f} ms")
