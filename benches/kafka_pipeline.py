"""Kafka source -> Eddy -> Kafka sink, end to end: events/s and produce-to-sink latency.

    python3 benches/kafka_pipeline.py EDDY_PORT BROKER N [EDDY_PID]

Creates topic `bench_in` (2 partitions), a source on it and `CREATE SINK ... AS SELECT * FROM
source` (FORMAT PLAIN) into `bench_out`; produces N JSON messages, each carrying its produce
time, as fast as confluent-kafka can; reads `bench_out` from the beginning and reports the rate
from the first produce to the last sink message, the latency percentiles (sink message
received minus produce time), and, given EDDY_PID, Eddy's peak RSS (VmHWM).
"""
import json
import sys
import threading
import time

import psycopg
from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, NewTopic


def main():
    port, broker, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    pid = sys.argv[4] if len(sys.argv) > 4 else None
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic("bench_in", 2, 1)])["bench_in"].result(30)
    db = psycopg.connect(f"host=127.0.0.1 port={port} user=root dbname=dev", autocommit=True)
    db.execute(
        "CREATE SOURCE bench_src (id BIGINT, ts_us BIGINT, payload VARCHAR) WITH (connector = 'kafka', "
        f"topic = 'bench_in', properties.bootstrap.server = '{broker}') FORMAT PLAIN ENCODE JSON"
    )
    db.execute(
        "CREATE SINK bench_out AS SELECT id, ts_us, payload FROM bench_src WITH (connector = 'kafka', "
        f"topic = 'bench_out', properties.bootstrap.server = '{broker}') FORMAT PLAIN ENCODE JSON"
    )
    received = {}
    done = threading.Event()

    def consume():
        c = Consumer({"bootstrap.servers": broker, "group.id": "bench", "enable.auto.commit": False})
        while "bench_out" not in c.list_topics(timeout=10).topics:
            time.sleep(0.1)
        parts = c.list_topics("bench_out", timeout=10).topics["bench_out"].partitions
        c.assign([TopicPartition("bench_out", p, OFFSET_BEGINNING) for p in parts])
        while len(received) < n:
            for m in c.consume(10000, 0.5):
                if m.error():
                    continue
                v = json.loads(m.value())
                received.setdefault(v["id"], (time.time() * 1e6) - v["ts_us"])
        c.close()
        done.set()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    p = Producer({"bootstrap.servers": broker, "linger.ms": 5, "queue.buffering.max.messages": 1000000})
    start = time.time()
    pad = "x" * 40
    for i in range(n):
        while True:
            try:
                p.produce("bench_in", value=json.dumps({"id": i, "ts_us": int(time.time() * 1e6), "payload": pad}).encode())
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(120)
    produced = time.time()
    done.wait(600)
    end = time.time()
    lat = sorted(received.values())
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] / 1000.0
    print(f"messages: {len(received)} of {n}")
    print(f"produce: {n / (produced - start):,.0f} msg/s; end to end: {len(received) / (end - start):,.0f} events/s over {end - start:.2f} s")
    print(f"latency produce -> sink message: p50 {q(0.5):.1f} ms, p99 {q(0.99):.1f} ms, max {q(1.0):.1f} ms")
    if pid:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM"):
                print("eddy peak RSS:", line.split(":", 1)[1].strip())
    db.execute("DROP SINK bench_out")
    db.execute("DROP SOURCE bench_src")


if __name__ == "__main__":
    main()
