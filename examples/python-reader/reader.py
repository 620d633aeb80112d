#!/usr/bin/env python3
"""Reads phasegate's aligned output as docs/CONSUMING.md says, with
confluent-kafka (librdkafka, bundled in its wheel).

Each assigned partition gets a reader (markers.py, a port of the Go
markers.Reader: MARKERS.md sections 2 to 3.3 and section 6) that starts
from the group's committed offset and its metadata: with metadata it drops
the phases handed over before; with no commit it starts at the log's first
offset; anywhere else without metadata it returns only the phases it can
prove whole and reports the others as skipped. After the phases a record
completed are printed, the reader's checkpoint (offset and metadata) is
committed; nothing is committed while the reader has none. A partition
taken away by a rebalance loses its reader; the next owner starts from the
last checkpoint.

    python3 examples/python-reader/reader.py --brokers localhost:9092 --topic aligned --group py-reader
    python3 examples/python-reader/reader.py --vectors markers/testdata/reader-vectors.json

At an idle exit (--idle) every reader is ended, as the Go join does: a
reader started without metadata reports the phases it could never prove
whole as skipped (MARKERS.md rule C4, at the end of the input), and what
no writer completed is a VIOLATION; nothing is committed then. An error
of the group session or of a connection (NOT_COORDINATOR, a rebalance, a
broker gone) is logged and the loop polls on, librdkafka rejoining by
itself; a commit it failed is tried again after the next poll.

Lines:

    phase=42 partition=0 records=17 sources=orders:12,payments:5 marker_count=17 sealed_by=watermark
    skipped phase=41 partition=0 records=3
    VIOLATION partition=0: <what>

Exit status 0 when every phase checked out, 3 after a violation, 1 on an
error, and 1 at once at a marker of a newer version ("v" above 2).
"""
import argparse
import signal
import sys
import time

import markers


def phase_line(partition, p):
    """The phase's line: records and sources as read, the marker's count and
    sealed_by (with several writers the sum and the weakest)."""
    sources = {}
    for rec in p.records:
        topic = ""
        for k, v in rec.headers:
            if k == markers.HEADER_SOURCE:
                try:
                    topic = markers.parse_source(v)[0]
                except ValueError:
                    pass
                break
        sources[topic] = sources.get(topic, 0) + 1
    srcs = ",".join(f"{t}:{n}" for t, n in sorted(sources.items()))
    return (f"phase={p.id} partition={partition} records={len(p.records)} sources={srcs} "
            f"marker_count={p.marker.count} sealed_by={p.marker.sealed_by}")


def retried(kafka, what, fn, attempts=5):
    """fn(), called again (at most attempts times in all) while it raises
    a KafkaException of an error librdkafka recovers from (rejoinable);
    with kafka None, just fn()."""
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as e:
            if kafka is None or not isinstance(e, kafka.KafkaException) or attempt == attempts - 1 \
                    or not rejoinable(kafka, e.args[0] if e.args else None):
                raise
            print(f"python-reader: {what}: {e}; retrying", file=sys.stderr, flush=True)


# The errors of a group session or of a connection that librdkafka
# recovers from by itself (it finds the coordinator again, rejoins the
# group, reconnects): the loop logs them and polls on, as the Go join does
# ("join: ...; rejoining"). Any other error ends the reader (status 1).
REJOIN = ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS",
          "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID",
          "FENCED_MEMBER_EPOCH", "STALE_MEMBER_EPOCH", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION",
          "_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_WAIT_COORD", "_MAX_POLL_EXCEEDED",
          "_ASSIGNMENT_LOST")


def rejoinable(kafka, err):
    """Whether err (a KafkaError, or None) is one the loop polls on after:
    not fatal, and retriable or one of REJOIN."""
    if err is None or not hasattr(err, "code") or err.fatal():
        return False
    return err.retriable() or err.code() in {getattr(kafka.KafkaError, n, None) for n in REJOIN}


# confluent-kafka 2.16.1 (src/confluent_kafka/src/confluent_kafka.c) commits
# TopicPartition.metadata with its C string terminator (metadata_size =
# strlen + 1: the broker stores '{"phasegate":1,"done":N}\0') and reads it
# back with strdup, as a C string, although librdkafka's copy is not
# terminated: metadata this reader wrote comes back whole (its own NUL ends
# it), but metadata a Java or Go reader wrote comes back followed by
# whatever lies after it in memory, or raises UnicodeDecodeError. The two
# helpers below undo the read side. The NUL written is beyond this reader;
# every reader's metadata parser ignores one trailing NUL (rule C2).

def committed_offsets(consumer, partitions, attempts=5, kafka=None):
    """consumer.committed, asked again when the bytes read past the
    metadata were not UTF-8, or (with kafka, the confluent_kafka module)
    after an error librdkafka recovers from (rejoinable)."""
    for attempt in range(attempts):
        try:
            return retried(kafka, "committed offsets", lambda: consumer.committed(partitions, timeout=30))
        except UnicodeDecodeError:
            if attempt == attempts - 1:
                raise


def clean_metadata(s):
    """The checkpoint metadata of s as committed (rule C2): s itself, or,
    when s is not metadata but begins with metadata exactly as a reader
    writes it, that beginning (the rest was read past its end)."""
    if not s:
        return ""
    if markers.parse_checkpoint_metadata(s)[2]:
        return s
    head = s[:s.find("}") + 1]
    done, has_done, ok = markers.parse_checkpoint_metadata(head)
    if ok and head == markers.append_checkpoint_metadata(done, has_done):
        return head
    return s


class NewerVersion(Exception):
    """A marker of a version this reader does not know: it must stop."""


class Readers:
    """One markers.Reader per assigned partition, and the group's commits."""

    def __init__(self, consumer, topic, out, kafka):
        self.consumer, self.topic, self.out = consumer, topic, out
        self.kafka = kafka  # the confluent_kafka module, imported only to read Kafka
        self.readers = {}
        self.committed = {}  # partition -> the last Checkpoint committed or started from
        self.violations = 0
        self.uncommitted = set()  # partitions whose last commit failed (rejoinable): tried again after a poll
        self.assigned_at = 0.0  # time.monotonic() of the last assignment: --idle counts from here too

    def assigned(self, consumer, partitions):
        """on_assign: each partition starts at its committed offset and
        metadata; with no commit, or one below the log's start (deleted by
        retention), at the log's start without metadata (rule C4)."""
        self.assigned_at = time.monotonic()
        committed = committed_offsets(consumer, partitions, kafka=self.kafka)
        starts = []
        for tp in committed:
            if tp.error is not None:
                raise self.kafka.KafkaException(f"committed offset of partition {tp.partition}: {tp.error}")
            low, _ = retried(self.kafka, f"start offset of partition {tp.partition}",
                             lambda: consumer.get_watermark_offsets(tp, timeout=30))
            if tp.offset < 0 or tp.offset < low:  # OFFSET_INVALID: no commit
                start = markers.Checkpoint(low, "")
            else:
                start = markers.Checkpoint(tp.offset, clean_metadata(tp.metadata))
            self.readers[tp.partition] = markers.Reader(tp.partition, start)
            self.committed[tp.partition] = start
            print(f"start partition={tp.partition} offset={start.offset} metadata={start.metadata or '-'}",
                  file=sys.stderr, flush=True)
            starts.append(self.kafka.TopicPartition(tp.topic, tp.partition, start.offset))
        consumer.assign(starts)

    def revoked(self, consumer, partitions):
        """on_revoke and on_lost: what a reader keeps belongs to phases the
        next owner reads whole from the last checkpoint."""
        for tp in partitions:
            self.readers.pop(tp.partition, None)
            self.committed.pop(tp.partition, None)
            self.uncommitted.discard(tp.partition)
        if partitions:
            consumer.unassign()

    def feed(self, msg):
        """Gives one record to its partition's reader, prints what it
        handed over, then commits the reader's checkpoint."""
        p = msg.partition()
        r = self.readers.get(p)
        if r is None:
            return  # not ours (any more): the owner reads it
        rec = markers.Record(msg.offset(), msg.key(), msg.value(), msg.headers())
        phase, vs = r.feed(rec)
        for v in vs:
            if v.newer_version:
                raise NewerVersion(f"partition {p} offset {msg.offset()}: {v}")
        for v in vs:
            self.violations += 1
            print(f"VIOLATION partition={p}: {v}", file=self.out)
        handed = False
        while phase is not None:
            print(phase_line(p, phase), file=self.out)
            handed = True
            phase = r.next()
        for s in r.skipped():
            print(f"skipped phase={s.phase} partition={p} records={s.records}", file=self.out)
            handed = True
        self.out.flush()
        if handed:
            self.commit(p, r)

    def commit(self, p, r):
        """Commits the reader's checkpoint. A commit refused for an error of
        the group session (a rebalance, the coordinator moved) is logged
        and tried again after the next poll (retry); any other error
        raises."""
        # Printed, then committed: a crash between the two repeats the
        # phases since the last commit (at least once, rule C6).
        c = r.checkpoint()
        if c is None or c == self.committed.get(p):
            self.uncommitted.discard(p)
            return  # rule C5: nothing proven yet
        tp = self.kafka.TopicPartition(self.topic, p, c.offset, metadata=c.metadata)
        try:
            errs = [res.error for res in self.consumer.commit(offsets=[tp], asynchronous=False) or ()
                    if res.error is not None]
        except self.kafka.KafkaException as e:
            errs = [e.args[0] if e.args else e]
        for err in errs:
            if not rejoinable(self.kafka, err):
                raise self.kafka.KafkaException(f"commit partition {p}: {err}")
        if errs:
            print(f"python-reader: commit partition {p}: {errs[0]}; rejoining", file=sys.stderr, flush=True)
            self.uncommitted.add(p)
            return
        self.committed[p] = c
        self.uncommitted.discard(p)

    def retry(self):
        """Commits again what a rejoinable error refused, for the
        partitions still assigned."""
        for p in sorted(self.uncommitted):
            r = self.readers.get(p)
            if r is None:
                self.uncommitted.discard(p)
            else:
                self.commit(p, r)

    def end(self):
        """At the idle exit, the end of the input as far as this run goes:
        ends every partition's reader (markers.Reader.end). A reader that
        started without metadata reports the phases it could never prove
        whole as skipped (MARKERS.md rule C4); what no writer completed is
        a violation. Nothing is committed."""
        for p in sorted(self.readers):
            r = self.readers[p]
            for v in r.end():
                self.violations += 1
                print(f"VIOLATION partition={p}: {v}", file=self.out)
            for s in r.skipped():
                print(f"skipped phase={s.phase} partition={p} records={s.records}", file=self.out)
        self.out.flush()


def run(args):
    import confluent_kafka as kafka
    consumer = kafka.Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": args.group,
        "isolation.level": "read_committed",  # librdkafka's default too; said explicitly
        "enable.auto.commit": False,           # commit checkpoints only
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
    })
    readers = Readers(consumer, args.topic, sys.stdout, kafka)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    consumer.subscribe([args.topic], on_assign=readers.assigned, on_revoke=readers.revoked, on_lost=readers.revoked)
    last = time.monotonic()
    try:
        while not stop:
            msg = consumer.poll(0.2)
            if readers.uncommitted:
                readers.retry()
            if msg is None:
                if args.idle and time.monotonic() - max(last, readers.assigned_at) > args.idle:
                    readers.end()
                    break
                continue
            if msg.error():
                if not rejoinable(kafka, msg.error()):
                    raise kafka.KafkaException(msg.error())
                print(f"python-reader: {msg.error()}; rejoining", file=sys.stderr, flush=True)
                continue
            last = time.monotonic()
            readers.feed(msg)
    except NewerVersion as e:
        # At once: nothing more is read or committed (MARKERS.md 3.3).
        print(f"python-reader: stopped at a marker of a newer version, upgrade the reader: {e}", file=sys.stderr)
        consumer.close()
        return 1
    except KeyboardInterrupt:
        pass
    except kafka.KafkaException as e:
        print(f"python-reader: {e}", file=sys.stderr)
        consumer.close()
        return 1
    consumer.close()
    return 3 if readers.violations else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="localhost:9092")
    ap.add_argument("--topic", default="aligned")
    ap.add_argument("--group", default="phasegate-py-reader")
    ap.add_argument("--idle", type=float, default=0, help="exit after this many seconds without a record (0: never)")
    ap.add_argument("--vectors", metavar="FILE",
                    help="run the shared reader vectors (markers/testdata/reader-vectors.json) instead of reading Kafka")
    args = ap.parse_args()
    if args.vectors:
        import vectors
        return 1 if vectors.run_file(args.vectors) else 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
