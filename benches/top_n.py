"""Memory of a top-N view (`ORDER BY ... LIMIT`) over a big table: the TopN operator's cached rows
and bytes after the view is created, after deletes through the head of the order, and after a
restart (when only the head is read back). Starts its own eddy.

Usage: python3 benches/top_n.py EDDY_BINARY PORT HTTP_PORT [ROWS] (default 1,000,000 rows).
Prints the times, the operator's cache (`/api/views`), and the process's peak and current RSS.
"""
import psycopg, subprocess, time, json, urllib.request, sys, os, signal, shutil
binary, port, http = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = int(sys.argv[4]) if len(sys.argv) > 4 else 1000000
d = f"/tmp/topn_bench_{port}"
shutil.rmtree(d, ignore_errors=True)
def start():
    p = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}", "--http", f"127.0.0.1:{http}", "--state-store", f"file://{d}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            return p, psycopg.connect(host="127.0.0.1", port=port, user="root", dbname="dev", autocommit=True)
        except Exception:
            time.sleep(0.2)
def rss(p):
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS") or l.startswith("VmHWM"):
            print("  ", l.strip())
def topn_bytes():
    v = json.load(urllib.request.urlopen(f"http://127.0.0.1:{http}/api/views/public.top10"))
    for n in v["nodes"]:
        if n["label"].startswith("TopN"):
            return n["state"]
p, c = start()
c.execute("CREATE TABLE big (id BIGINT PRIMARY KEY, v BIGINT)")
t = time.time()
for lo in range(0, rows, 250000):
    c.execute(f"INSERT INTO big SELECT i, (i * 7919) % 1000003 FROM generate_series({lo + 1}, {min(rows, lo + 250000)}) AS t(i)")
print(f"insert {rows} rows: {time.time()-t:.1f}s")
t = time.time()
c.execute("CREATE MATERIALIZED VIEW top10 AS SELECT id, v FROM big ORDER BY v DESC, id LIMIT 10")
print(f"create top-10 view: {time.time()-t:.1f}s; TopN cache: {topn_bytes()}"); rss(p)
t = time.time()
for i in range(20):
    c.execute("DELETE FROM big WHERE id IN (SELECT id FROM top10 ORDER BY v DESC, id LIMIT 5)")
print(f"20 deletes of the head (5 rows each): {time.time()-t:.1f}s; TopN cache: {topn_bytes()}")
print("  top now:", c.execute("SELECT * FROM top10 ORDER BY v DESC, id LIMIT 3").fetchall())
p.send_signal(signal.SIGINT); p.wait(60)
t = time.time()
p, c = start()
print("  after restart:", c.execute("SELECT * FROM top10 ORDER BY v DESC, id LIMIT 3").fetchall(), f"{time.time()-t:.1f}s")
c.execute("DELETE FROM big WHERE id IN (SELECT id FROM top10 ORDER BY v DESC, id LIMIT 5)")
print(f"  after restart and a delete: TopN cache: {topn_bytes()}"); rss(p)
p.send_signal(signal.SIGINT); p.wait(60)
