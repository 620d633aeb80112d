"""Unit tests of the Python reader core, without a broker:

    python3 -m unittest discover -s examples/python-reader

The shared vectors (markers/testdata/reader-vectors.json, the Go tables as
data), one subtest each, and the phase line of a partition with several
writers."""
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


if __name__ == "__main__":
    unittest.main()
