"""Unit tests of the Python reader core, without a broker:

    python3 -m unittest discover -s examples/python-reader

The shared vectors (markers/testdata/reader-vectors.json, the Go tables as
data), one subtest each, the phase line of a partition with several
writers, and the loop's idle exit and commits without a broker."""
import contextlib
import io
import json
import os
import unittest

import markers
import reader
import vectors

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "markers", "testdata", "reader-vectors.json")


def marker(phase, task, count, sources, sealed_by):
    value = json.dumps({"v": 2, "phase": phase, "partition": 0, "task": task, "writers": 2, "count": count,
                        "sources": sources, "watermark_ms": 1, "sealed_by": sealed_by, "emitter": "pg"})
    return [(b"phasegate.marker", b"1"), (b"phasegate.phase", str(phase).encode())], value.encode()


def data(phase, task, ident, topic):
    return [(b"phasegate.phase", str(phase).encode()), (b"phasegate.id", ident.encode()),
            (b"phasegate.source", f"{topic}/0/1".encode()), (b"phasegate.task", str(task).encode())]


class VectorsTest(unittest.TestCase):
    def test_vectors(self):
        with open(VECTORS, encoding="utf-8") as f:
            data_ = json.load(f)
        self.assertGreater(len(data_["vectors"]), 0)
        for v in data_["vectors"]:
            with self.subTest(v["name"]):
                self.assertEqual(vectors.compare(v, vectors.run_vector(v)), [])
        for m in data_["metadata"]:
            with self.subTest(m["metadata"]):
                done, has_done, ok = markers.parse_checkpoint_metadata(m["metadata"])
                self.assertEqual((ok, done if has_done else None), (m["ok"], m["done"]))


class PhaseLineTest(unittest.TestCase):
    def test_several_writers_sum_counts_and_take_the_weakest_sealed_by(self):
        r = markers.Reader(0)
        recs = [(data(5, 0, "a", "orders"), b"v"), marker(5, 0, 1, {"orders": 1}, "watermark"),
                (data(5, 1, "b", "payments"), b"v"), (data(5, 1, "c", "orders"), b"v"),
                marker(5, 1, 2, {"orders": 1, "payments": 1}, "idle")]
        lines = []
        for off, (hs, value) in enumerate(recs):
            key = None if hs[0][0] == b"phasegate.marker" else b"k"
            p, vs = r.feed(markers.Record(off, key, value, hs))
            self.assertEqual(vs, [])
            while p is not None:
                lines.append(reader.phase_line(0, p))
                p = r.next()
        self.assertEqual(lines, ["phase=5 partition=0 records=3 sources=orders:2,payments:1 marker_count=3 sealed_by=idle"])
        self.assertEqual(r.checkpoint(), markers.Checkpoint(5, '{"phasegate":1,"done":5}'))


class NewerVersionTest(unittest.TestCase):
    """Go's TestNewerVersion: "v" is looked at before any other field."""

    def test_an_integer_v_above_2_is_a_newer_version(self):
        for value in ['{"v":3,"phase":5,"partition":2,"count":0,"sources":{},"watermark_ms":1,"sealed_by":"watermark","emitter":"x"}',
                      '{"v":18446744073709551616,"phase":5,"partition":2}',  # above uint64: still a version number
                      '{"phase":"x","v":3,"partition":2}',  # a bad field before "v": "v" decides
                      '{"v":4}',  # nothing else
                      '{"v":1' + '0' * 5000 + '}']:  # past Python's int() digit limit
            with self.subTest(value[:60]):
                with self.assertRaises(markers.MalformedError) as cm:
                    markers.decode_output_marker(value.encode())
                self.assertTrue(cm.exception.newer)

    def test_anything_else_is_malformed_not_newer(self):
        for v in ['"v":0', '"v":"3"', '"v":-3', '"v":3.0']:
            with self.subTest(v):
                with self.assertRaises(markers.MalformedError) as cm:
                    markers.decode_output_marker(('{' + v + ',"phase":5,"partition":2,"count":0,"sources":{},'
                                                  '"watermark_ms":1,"sealed_by":"watermark","emitter":"x"}').encode())
                self.assertFalse(cm.exception.newer)


class LongIntegerTest(unittest.TestCase):
    """An integer field of thousands of digits is malformed, never a crash
    (Python's int() refuses more than 4300 digits with a ValueError)."""

    def test_a_huge_phase_is_malformed(self):
        value = '{"v":1,"phase":' + '9' * 5000 + ',"partition":2,"count":0,"sources":{},"watermark_ms":1,"sealed_by":"watermark","emitter":"x"}'
        with self.assertRaises(markers.MalformedError):
            markers.decode_output_marker(value.encode())

    def test_a_huge_done_is_no_metadata(self):
        self.assertEqual(markers.parse_checkpoint_metadata('{"phasegate":1,"done":' + '9' * 5000 + '}')[2], False)


class CleanMetadataTest(unittest.TestCase):
    def test_bytes_read_past_the_metadata_are_dropped(self):
        for got, want in [('{"phasegate":1,"done":7}', '{"phasegate":1,"done":7}'),
                          ('{"phasegate":1,"done":7}\udc8a@x', '{"phasegate":1,"done":7}'),
                          ('{"phasegate":1}zz', '{"phasegate":1}'),
                          (' { "done" : 7 , "phasegate" : 1 } ', ' { "done" : 7 , "phasegate" : 1 } '),
                          ('{"phasegate":2,"done":7}zz', '{"phasegate":2,"done":7}zz'),  # not metadata either way
                          ('hello', 'hello'), (None, ""), ("", "")]:
            with self.subTest(got):
                self.assertEqual(reader.clean_metadata(got), want)


class FakeMessage:
    """The parts of a confluent_kafka.Message that Readers.feed reads."""

    def __init__(self, partition, offset, key, value, headers):
        self._p, self._o, self._k, self._v, self._h = partition, offset, key, value, headers

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def key(self):
        return self._k

    def value(self):
        return self._v

    def headers(self):
        return self._h


class FakeConsumer:
    """commit answers with the next of errors (an exception to raise, or
    None for success) and records what it committed."""

    def __init__(self, *errors):
        self.errors, self.commits = list(errors), []

    def commit(self, offsets, asynchronous):
        if self.errors and self.errors[0] is not None:
            raise self.errors.pop(0)
        if self.errors:
            self.errors.pop(0)
        self.commits.extend((tp.partition, tp.offset, tp.metadata) for tp in offsets)
        return offsets


def feed_all(readers, partition, start, recs):
    """Feeds recs, numbered from start, to readers' partition."""
    for off, (hs, value) in enumerate(recs, start):
        key = None if hs[0][0] == b"phasegate.marker" else b"k"
        readers.feed(FakeMessage(partition, off, key, value, hs))


try:
    import confluent_kafka
except ImportError:  # pragma: no cover: scripts/install-readers.sh installs it
    confluent_kafka = None


@unittest.skipIf(confluent_kafka is None, "confluent-kafka is not installed")
class ReadersTest(unittest.TestCase):
    """The loop's Readers without a broker: the idle exit's End (the Go
    join's end) and commits refused for the group session."""

    def readers(self, consumer=None):
        out = io.StringIO()
        return reader.Readers(consumer or FakeConsumer(), "aligned", out, confluent_kafka), out

    def test_the_idle_exit_skips_what_a_reader_started_mid_log_could_never_prove(self):
        # Writer 0 wrote its last marker before the start (offset 100): no
        # phase completes; at the end phases 5 and 6 are skipped, not missing.
        rs, out = self.readers()
        rs.readers[0] = markers.Reader(0, markers.Checkpoint(100, ""))
        feed_all(rs, 0, 100, [(data(5, 1, "b5", "payments"), b"v"), marker(5, 1, 1, {"payments": 1}, "watermark"),
                              (data(6, 1, "b6", "payments"), b"v"), marker(6, 1, 1, {"payments": 1}, "watermark")])
        self.assertEqual(out.getvalue(), "")
        rs.end()
        self.assertEqual(out.getvalue(), "skipped phase=5 partition=0 records=1\nskipped phase=6 partition=0 records=1\n")
        self.assertEqual(rs.violations, 0)
        self.assertEqual(rs.consumer.commits, [])

    def test_the_idle_exit_reports_a_phase_it_could_prove_but_a_writer_never_marked(self):
        rs, out = self.readers()
        rs.readers[0] = markers.Reader(0, markers.Checkpoint(100, ""))
        feed_all(rs, 0, 100, [marker(4, 0, 0, {}, "watermark"), marker(4, 1, 0, {}, "watermark"),
                              (data(5, 0, "a5", "orders"), b"v"), marker(5, 0, 1, {"orders": 1}, "watermark")])
        rs.end()
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[0], "phase=4 partition=0 records=0 sources= marker_count=0 sealed_by=watermark")
        self.assertTrue(lines[1].startswith("VIOLATION partition=0: markers: partition 0 offset 103 phase 5: missing-marker"), lines)
        self.assertEqual(len(lines), 2)
        self.assertEqual(rs.violations, 1)
        self.assertEqual(rs.consumer.commits, [(0, 102, '{"phasegate":1,"done":4}')])  # at phase 4, none at the end

    def test_a_commit_refused_for_a_rebalance_is_tried_again_after_the_next_poll(self):
        rebalance = confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError.REBALANCE_IN_PROGRESS))
        rs, out = self.readers(FakeConsumer(rebalance, None))
        rs.readers[0] = markers.Reader(0)
        errs = io.StringIO()
        with contextlib.redirect_stderr(errs):
            feed_all(rs, 0, 0, [(data(5, 0, "a5", "orders"), b"v"), marker(5, 0, 1, {"orders": 1}, "watermark"),
                                (data(5, 1, "b5", "payments"), b"v"), marker(5, 1, 1, {"payments": 1}, "watermark")])
        self.assertIn("python-reader: commit partition 0: ", errs.getvalue())
        self.assertIn("REBALANCE_IN_PROGRESS", errs.getvalue())
        self.assertTrue(errs.getvalue().endswith("; rejoining\n"), errs.getvalue())
        self.assertEqual(out.getvalue(), "phase=5 partition=0 records=2 sources=orders:1,payments:1 marker_count=2 sealed_by=watermark\n")
        self.assertEqual(rs.uncommitted, {0})
        self.assertEqual(rs.consumer.commits, [])
        rs.retry()
        self.assertEqual(rs.uncommitted, set())
        self.assertEqual(rs.consumer.commits, [(0, 4, '{"phasegate":1,"done":5}')])

    def test_a_commit_refused_for_another_error_raises(self):
        denied = confluent_kafka.KafkaException(confluent_kafka.KafkaError(confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED))
        rs, _ = self.readers(FakeConsumer(denied))
        rs.readers[0] = markers.Reader(0)
        with self.assertRaises(confluent_kafka.KafkaException):
            feed_all(rs, 0, 0, [(data(5, 0, "a5", "orders"), b"v"), marker(5, 0, 1, {"orders": 1}, "watermark"),
                                (data(5, 1, "b5", "payments"), b"v"), marker(5, 1, 1, {"payments": 1}, "watermark")])

    def test_rejoinable(self):
        E = confluent_kafka.KafkaError
        for code, want in [(E.NOT_COORDINATOR, True), (E.REBALANCE_IN_PROGRESS, True), (E.ILLEGAL_GENERATION, True),
                           (E.COORDINATOR_NOT_AVAILABLE, True), (E._TRANSPORT, True), (E._MAX_POLL_EXCEEDED, True),
                           (E.GROUP_AUTHORIZATION_FAILED, False), (E.TOPIC_AUTHORIZATION_FAILED, False),
                           (E.UNKNOWN_TOPIC_OR_PART, False)]:
            with self.subTest(E(code).name()):
                self.assertEqual(reader.rejoinable(confluent_kafka, E(code)), want)
        self.assertFalse(reader.rejoinable(confluent_kafka, E(E.NOT_COORDINATOR, fatal=True)))
        self.assertFalse(reader.rejoinable(confluent_kafka, None))


if __name__ == "__main__":
    unittest.main()
