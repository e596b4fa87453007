"""A Kafka client independent of Eddy's (confluent-kafka, librdkafka) for the Kafka tests.

    kafka_tool.py produce BROKER TOPIC      < lines   (each line: VALUE, or KEY<TAB>VALUE)
    kafka_tool.py consume BROKER TOPIC MIN  > lines   (each line: JSON {"partition","offset","key","value"})

`consume` reads every partition from its beginning with assign() (no consumer group) until it
has at least MIN messages and nothing more arrives for 2 s, or 120 s pass; values that are
tombstones print as null.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING


def produce(broker, topic):
    p = Producer({"bootstrap.servers": broker, "linger.ms": 5})
    n = 0
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line:
            continue
        if "\t" in line:
            key, value = line.split("\t", 1)
            p.produce(topic, key=key.encode(), value=value.encode())
        else:
            p.produce(topic, value=line.encode())
        n += 1
        if n % 1000 == 0:
            p.flush(60)
    left = p.flush(60)
    if left:
        sys.exit(f"{left} messages not delivered")
    print(n)


def consume(broker, topic, minimum):
    c = Consumer({"bootstrap.servers": broker, "group.id": "eddy-test", "enable.auto.commit": False})
    deadline = time.time() + 120
    md = None
    while time.time() < deadline:
        md = c.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and t.partitions:
            break
        time.sleep(0.2)
    parts = sorted(md.topics[topic].partitions)
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    out = []
    last = time.time()
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            if len(out) >= minimum and time.time() - last > 2:
                break
            continue
        if m.error():
            continue
        last = time.time()
        out.append({
            "partition": m.partition(),
            "offset": m.offset(),
            "key": m.key().decode() if m.key() is not None else None,
            "value": m.value().decode() if m.value() is not None else None,
        })
    c.close()
    for o in out:
        print(json.dumps(o))


if __name__ == "__main__":
    cmd, broker, topic = sys.argv[1:4]
    if cmd == "produce":
        produce(broker, topic)
    else:
        consume(broker, topic, int(sys.argv[4]))
