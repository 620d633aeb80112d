"""Runs the shared reader vectors (markers/testdata/reader-vectors.json) on
the Python reader core, by the procedure of markers/testdata/README.md,
and compares every field the vector gives: phases (with their data
offsets, and counts where given), skips, stopped_at and the checkpoint
exactly, violations as a list of (offset, kind) sorted by offset, then
kind; metadata rows through parse_checkpoint_metadata.

    python3 examples/python-reader/vectors.py markers/testdata/reader-vectors.json

(reader.py --vectors FILE does the same.) Exit status 0 when every vector
agrees, 1 otherwise, with the names of those that differ.
"""
import json
import sys

import markers


def _enc(s):
    return None if s is None else s.encode("utf-8")


def run_vector(v):
    """The vector's result in the vector's own form (want)."""
    start = v["start"]
    r = markers.Reader(v["partition"], markers.Checkpoint(start["offset"], start["metadata"]))
    got = {"phases": [], "skipped": [], "violations": [], "stopped_at": None, "checkpoint": None}

    def take(p, vs):
        while p is not None:
            got["phases"].append({"phase": p.id, "offsets": [rec.offset for rec in p.records] or None,
                                  "count": p.marker.count})
            p = r.next()
        for s in r.skipped():
            got["skipped"].append({"phase": s.phase, "records": s.records})
        for vl in vs:
            got["violations"].append({"kind": vl.kind, "offset": vl.offset})

    for vr in v["records"]:
        rec = markers.Record(vr["offset"], _enc(vr["key"]), _enc(vr["value"]),
                             [(_enc(k), _enc(val)) for k, val in vr["headers"]])
        p, vs = r.feed(rec)
        take(p, vs)
        if any(vl.newer_version for vl in vs):
            got["stopped_at"] = vr["offset"]
            break
    if got["stopped_at"] is None:
        if v["end"]:
            take(None, r.end())
        c = r.checkpoint()
        if c is not None:
            got["checkpoint"] = {"offset": c.offset, "metadata": c.metadata}
    got["violations"].sort(key=lambda x: (x["offset"], x["kind"]))
    for k in ("phases", "skipped", "violations"):
        got[k] = got[k] or None
    return got


def compare(v, got):
    """The differences between got and the vector's want, as text, or []."""
    want = v["want"]
    got = dict(got)
    if got["phases"]:
        got["phases"] = [dict(p) for p in got["phases"]]
        for i, p in enumerate(got["phases"]):
            if i < len(want["phases"] or []) and want["phases"][i]["count"] is None:
                p["count"] = None  # not checked
    return [f"{k}: got {json.dumps(got[k])}, want {json.dumps(want[k])}"
            for k in ("phases", "skipped", "violations", "stopped_at", "checkpoint") if got[k] != want[k]]


def run_file(path, out=sys.stdout):
    """Runs every vector and metadata row of path; returns the names of
    those that differ."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    failed = []
    for v in data["vectors"]:
        diffs = compare(v, run_vector(v))
        if diffs:
            failed.append(v["name"])
            print(f"FAIL {v['name']}", file=out)
            for d in diffs:
                print("    " + d, file=out)
    for m in data["metadata"]:
        done, has_done, ok = markers.parse_checkpoint_metadata(m["metadata"])
        if ok != m["ok"] or has_done != (m["done"] is not None) or m["done"] is not None and done != m["done"]:
            name = "metadata " + json.dumps(m["metadata"])
            failed.append(name)
            print(f"FAIL {name}: got done={done} has_done={has_done} ok={ok}, want {json.dumps(m)}", file=out)
    n = len(data["vectors"]) + len(data["metadata"])
    print(f"python reader, {path}: {len(data['vectors'])} vectors, {len(data['metadata'])} metadata rows", file=out)
    print(f"python: {n - len(failed)} passed, {len(failed)} failed", file=out)
    return failed


if __name__ == "__main__":
    sys.exit(1 if run_file(sys.argv[1] if len(sys.argv) > 1 else "markers/testdata/reader-vectors.json") else 0)
