"""Issue 10's measure: the server's RSS while 32 clients each send 20 MB queries.

Usage: python3 benches/big_queries.py PORT PID [CLIENTS] [ROUNDS] (against a running eddy whose
process id is PID). Each client sends ROUNDS (default 5) queries `SELECT length('<20 MB>')` over
the simple protocol; the script samples the server's VmRSS/VmHWM every 100 ms and prints the
baseline, the peak and the RSS after the clients are done, with queries/s.
"""
import sys, threading, time
import psycopg

port, pid = int(sys.argv[1]), int(sys.argv[2])
clients = int(sys.argv[3]) if len(sys.argv) > 3 else 32
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
text = "x" * (20 * 1000 * 1000)
sql = f"SELECT length('{text}')"


def rss():
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                fields[k] = int(v.split()[0]) // 1024
    return fields["VmRSS"], fields["VmHWM"]


done, errors, samples = [0], [], []
stop = threading.Event()


def client():
    try:
        with psycopg.connect(f"host=127.0.0.1 port={port} user=root dbname=dev", autocommit=True) as c:
            for _ in range(rounds):
                (n,) = c.execute(sql, prepare=False).fetchone()
                assert n == len(text), n
                done[0] += 1
    except Exception as e:  # noqa: BLE001 - reported below
        errors.append(repr(e)[:200])


def sampler():
    while not stop.is_set():
        samples.append(rss()[0])
        time.sleep(0.1)


base = rss()[0]
s = threading.Thread(target=sampler)
s.start()
t0 = time.time()
threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.time() - t0
stop.set()
s.join()
time.sleep(2)
after, hwm = rss()
print(
    f"{clients} clients x {rounds} queries of 20 MB: {done[0]} answered in {wall:.1f} s ({done[0] / wall:.1f} queries/s, "
    f"{done[0] * 20 / wall:.0f} MB/s); server RSS {base} MiB before, peak {max(samples)} MiB (VmHWM {hwm}), {after} MiB 2 s after; "
    f"errors {len(errors)} {errors[:3]}"
)
