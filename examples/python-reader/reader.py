#!/usr/bin/env python3
"""Reads phasegate's aligned output as docs/CONSUMING.md says, with
confluent-kafka (librdkafka, bundled in its wheel).

Per partition it buffers data records until the marker of their phase,
checks the marker's count against what it buffered, prints one line for the
phase, and only then commits the offset after the marker. A partition taken
away by a rebalance loses its buffer: the next owner reads the half phase
again from the last committed boundary.

    python3 examples/python-reader/reader.py --brokers localhost:9092 --topic aligned --group py-reader

One line per phase and partition:

    phase=42 partition=0 records=17 sources=orders:12,payments:5 marker_count=17 sealed_by=watermark

Exit status 0 when every phase checked out, 3 after a violation, 1 on an error.
"""
import argparse
import json
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def header(msg, name):
    for k, v in msg.headers() or []:
        if k == name:
            return v
    return None


class Partition:
    """The buffered data of the open phase of one output partition."""

    def __init__(self):
        self.phase = None
        self.sources = {}
        self.records = 0


class Reader:
    def __init__(self, out):
        self.out = out
        self.parts = {}
        self.phases = 0
        self.violations = 0

    def revoked(self, consumer, partitions):
        # Half-read phases are dropped: the next owner starts at the last
        # committed offset, which is always just after a marker.
        for tp in partitions:
            self.parts.pop(tp.partition, None)

    def violation(self, partition, text):
        self.violations += 1
        print(f"VIOLATION partition={partition}: {text}", file=self.out, flush=True)

    def feed(self, consumer, msg):
        """Takes one record; commits after a marker whose phase checked out."""
        p = msg.partition()
        st = self.parts.setdefault(p, Partition())
        phase_hdr = header(msg, "phasegate.phase")
        if phase_hdr is None:
            self.violation(p, f"offset {msg.offset()}: no phasegate.phase header")
            return
        phase = int(phase_hdr)
        if header(msg, "phasegate.marker") != b"1":
            # A data record: buffered until its phase's marker.
            if st.phase is not None and st.phase != phase:
                self.violation(p, f"offset {msg.offset()}: data of phase {phase} while phase {st.phase} is open")
                st.__init__()
            st.phase = phase
            source = header(msg, "phasegate.source") or b""
            topic = source.decode().rsplit("/", 2)[0]
            st.sources[topic] = st.sources.get(topic, 0) + 1
            st.records += 1
            return
        # A marker: null key, JSON value. Never hand it to the join as data.
        marker = json.loads(msg.value())
        if msg.key() is not None or marker["phase"] != phase or marker["partition"] != p:
            self.violation(p, f"offset {msg.offset()}: malformed marker")
        if st.phase is not None and st.phase != phase:
            self.violation(p, f"offset {msg.offset()}: marker of phase {phase} after data of phase {st.phase}")
            st.__init__()
        if marker["count"] != st.records:
            self.violation(p, f"phase {phase}: marker count {marker['count']}, {st.records} records read")
        srcs = ",".join(f"{t}:{n}" for t, n in sorted(st.sources.items()))
        print(f"phase={phase} partition={p} records={st.records} sources={srcs} "
              f"marker_count={marker['count']} sealed_by={marker['sealed_by']}", file=self.out, flush=True)
        self.phases += 1
        self.parts[p] = Partition()
        consumer.commit(offsets=[TopicPartition(msg.topic(), p, msg.offset() + 1)], asynchronous=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="localhost:9092")
    ap.add_argument("--topic", default="aligned")
    ap.add_argument("--group", default="phasegate-py-reader")
    ap.add_argument("--idle", type=float, default=0, help="exit after this many seconds without a record (0: never)")
    args = ap.parse_args()
    consumer = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": args.group,
        "isolation.level": "read_committed",  # librdkafka's default too; said explicitly
        "enable.auto.commit": False,           # commit phase boundaries only
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
    })
    reader = Reader(sys.stdout)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    consumer.subscribe([args.topic], on_revoke=reader.revoked, on_lost=reader.revoked)
    last = time.monotonic()
    try:
        while not stop:
            msg = consumer.poll(0.2)
            if msg is None:
                if args.idle and time.monotonic() - last > args.idle:
                    break
                continue
            if msg.error():
                raise KafkaException(msg.error())
            last = time.monotonic()
            reader.feed(consumer, msg)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    return 3 if reader.violations else 0


if __name__ == "__main__":
    sys.exit(main())
