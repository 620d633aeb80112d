"""The reader core of phasegate's output, a port of the Go package markers
(markers/reader.go, lane.go, several.go, checkpoint.go, decode.go,
headers.go) to Python, with no Kafka client: docs/MARKERS.md sections 2,
3, 3.2, 3.3 (rules M1 to M8) and 6 (checkpoints, C1 to C5).

    r = Reader(partition, Checkpoint(offset, metadata))  # markers.NewReaderAt
    phase, violations = r.feed(Record(offset, key, value, headers))
    while phase: ...; phase = r.next()                     # one record can complete several
    r.skipped(); r.checkpoint(); r.end()

Every rule, every recovery and every checkpoint is the Go code's, branch
for branch, so that the shared vectors (markers/testdata) hold for both;
where this file and the Go code differ, the Go code is right and this file
has a bug. Phases are Python ints in [0, 2**64).

A Reader belongs to one thread: it is not safe for concurrent use.
"""
import json

HEADER_MARKER = b"phasegate.marker"
HEADER_PHASE = b"phasegate.phase"
HEADER_ID = b"phasegate.id"
HEADER_SOURCE = b"phasegate.source"
HEADER_TASK = b"phasegate.task"
VERSION = 1  # "v" of a one-writer marker
VERSION_WRITERS = 2  # "v" of a marker on a partition with several writers
MAX_ID_LEN = 256
MAX_UINT64 = (1 << 64) - 1
_PREFIX = b"phasegate."

# Violation kinds (markers.ViolationKind), as they print.
COUNT_MISMATCH = "count-mismatch"
PHASE_BACKWARDS = "phase-backwards"
DATA_AFTER_MARKER = "data-after-marker"
MISSING_MARKER = "missing-marker"
MALFORMED = "malformed"
DUPLICATE_ID = "duplicate-id"

SEALED_BY = ("markers", "watermark", "idle", "timeout")


class HeaderError(Exception):
    """A phasegate header that breaks MARKERS.md section 2 (the Go sentinels)."""


class MalformedError(Exception):
    """A marker value that breaks MARKERS.md section 3 (markers.MalformedError).
    newer is True for a "v" above 2: a reader must stop there."""

    def __init__(self, field, reason, newer=False):
        super().__init__(field, reason)
        self.field, self.reason, self.newer = field, reason, newer

    def __str__(self):
        if not self.field:
            return "markers: malformed marker value: " + self.reason
        return "markers: malformed marker value: " + json.dumps(self.field) + ": " + self.reason


class Violation:
    """One broken rule found by a Reader (markers.Violation)."""

    def __init__(self, kind, partition, offset, phase, detail="", err=None, task=None):
        self.kind, self.partition, self.offset, self.phase = kind, partition, offset, phase
        self.detail, self.err, self.task = detail, err, task
        self.prior = 0
        self.want = self.got = 0

    @property
    def newer_version(self):
        """True for a marker of a newer version: the reader must stop."""
        return isinstance(self.err, MalformedError) and self.err.newer

    def __str__(self):
        s = f"markers: partition {self.partition} offset {self.offset} phase {self.phase}"
        if self.task is not None:
            s += f" task {self.task}"
        s += ": " + self.kind
        if self.kind == COUNT_MISMATCH:
            s += f": marker count {self.want}, read {self.got}"
        elif self.kind == MISSING_MARKER:
            s += f": {self.got} records discarded"
        if self.detail:
            s += ": " + self.detail
        if self.err is not None:
            s += ": " + str(self.err)
        return s


class Record:
    """One record of an output partition: key and value are bytes or None
    (a null key is None, an empty key b""), headers a list of (name, value)
    pairs of bytes (str names are encoded as UTF-8, a None value is b"")."""

    __slots__ = ("offset", "key", "value", "headers")

    def __init__(self, offset, key, value, headers):
        self.offset, self.key, self.value = offset, key, value
        self.headers = [(_bytes(k), _bytes(v)) for k, v in headers or ()]


def _bytes(s):
    if s is None:
        return b""
    return s.encode("utf-8") if isinstance(s, str) else s


class Marker:
    """The JSON value of a marker (markers.Marker). In the summary of a
    phase with several writers, count and sources add up the writers',
    sealed_by is the weakest and task is -1."""

    def __init__(self):
        self.phase = 0
        self.partition = 0
        self.count = 0
        self.has_count = False
        self.sources = None
        self.watermark_ms = 0
        self.sealed_by = ""
        self.emitter = ""
        self.writers = 0
        self.task = 0


class Phase:
    """One whole phase of one partition: its data records in offset order,
    the marker that closed it (a summary with several writers), and with
    several writers each writer's (marker, offset) in task order."""

    def __init__(self, phase_id, marker, marker_offset):
        self.id = phase_id
        self.records = []
        self.marker = marker
        self.marker_offset = marker_offset
        self.markers = None
        self.ids = None  # a writer's phasegate.id values of the phase, until it is complete


class Checkpoint:
    """Where a reader commits and starts again (MARKERS.md section 6)."""

    __slots__ = ("offset", "metadata")

    def __init__(self, offset, metadata=""):
        self.offset, self.metadata = offset, metadata or ""

    def __eq__(self, other):
        return isinstance(other, Checkpoint) and (self.offset, self.metadata) == (other.offset, other.metadata)

    def __repr__(self):
        return f"Checkpoint({self.offset}, {self.metadata!r})"


class Skip:
    """A phase handed over without being returned (rule C4)."""

    __slots__ = ("phase", "records")

    def __init__(self, phase, records):
        self.phase, self.records = phase, records


# ---------------------------------------------------------------- headers

def parse_phase(b):
    """A phasegate.phase value: 1 to 20 ASCII digits, at most 2**64-1."""
    if len(b) == 0:
        raise HeaderError("markers: phasegate.phase is empty")
    if len(b) > 20:
        raise HeaderError("markers: phasegate.phase has more than 20 digits")
    if any(c < 0x30 or c > 0x39 for c in b):
        raise HeaderError("markers: phasegate.phase is not decimal digits")
    n = int(b)
    if n > MAX_UINT64:
        raise HeaderError("markers: phasegate.phase overflows uint64")
    return n


def _parse_canonical(b, maximum):
    if len(b) == 0 or len(b) > 1 and b[0] == 0x30 or any(c < 0x30 or c > 0x39 for c in b):
        return None
    n = int(b)
    return n if n <= maximum else None


def parse_task(b):
    """A phasegate.task value: a canonical decimal in [0, 2147483647]."""
    n = _parse_canonical(b, (1 << 31) - 1)
    if n is None:
        raise HeaderError("markers: phasegate.task is not a task number")
    return n


def check_topic(t):
    """Why t (str or bytes) is not a legal Kafka topic name, or ""."""
    if len(t) == 0:
        return "is empty"
    if len(t) > 249:
        return "is longer than 249 bytes"
    if t in (".", "..", b".", b".."):
        return "is . or .."
    for c in (t.encode("utf-8", "surrogateescape") if isinstance(t, str) else t):
        if not (0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A or 0x30 <= c <= 0x39 or c in (0x2E, 0x5F, 0x2D)):
            return "holds a byte outside [a-zA-Z0-9._-]"
    return ""


def parse_source(b):
    """<topic>/<partition>/<offset>, parsed from the right; raises ValueError."""
    i = b.rfind(b"/")
    if i < 0:
        raise ValueError(f"markers: malformed phasegate.source: {b!r} has no '/'")
    off = _parse_canonical(b[i + 1:], (1 << 63) - 1)
    if off is None:
        raise ValueError(f"markers: malformed phasegate.source: offset {b[i + 1:]!r} is not a non-negative int64")
    j = b.rfind(b"/", 0, i)
    if j < 0:
        raise ValueError(f"markers: malformed phasegate.source: {b!r} has one '/', want two")
    part = _parse_canonical(b[j + 1:i], (1 << 31) - 1)
    if part is None:
        raise ValueError(f"markers: malformed phasegate.source: partition {b[j + 1:i]!r} is not a non-negative int32")
    reason = check_topic(b[:j])
    if reason:
        raise ValueError(f"markers: malformed phasegate.source: topic {b[:j]!r} {reason}")
    return b[:j].decode("utf-8"), part, off


class Meta:
    """What a record's phasegate headers say (markers.Meta)."""

    __slots__ = ("marker", "has_phase", "phase", "id", "source", "task", "_seen")

    def __init__(self):
        self.marker = self.has_phase = False
        self.phase = 0
        self.id = self.source = self.task = None
        self._seen = set()

    def observe(self, key, value):
        if len(key) <= len(_PREFIX) or not key.startswith(_PREFIX):
            return
        name = key[len(_PREFIX):]
        if name not in (b"marker", b"phase", b"id", b"source", b"reason", b"task"):
            return
        if name in self._seen:
            raise HeaderError("markers: phasegate header repeated")
        self._seen.add(name)
        if name == b"marker":
            if value != b"1":
                raise HeaderError("markers: phasegate.marker is not 1")
            self.marker = True
        elif name == b"phase":
            self.phase, self.has_phase = parse_phase(value), True
        elif name == b"id":
            if len(value) == 0:
                raise HeaderError("markers: phasegate.id is empty")
            if len(value) > MAX_ID_LEN:
                raise HeaderError("markers: phasegate.id is longer than 256 bytes")
            self.id = value
        elif name == b"source":
            self.source = value
        elif name == b"task":
            self.task = value


def inspect(headers):
    """Observes every header in order, then checks the record; returns
    (meta, error or None), meta holding what was read before an error."""
    m = Meta()
    try:
        for k, v in headers:
            m.observe(k, v)
    except HeaderError as e:
        return m, e
    if m.marker and not m.has_phase:
        return m, HeaderError("markers: marker without phasegate.phase")
    return m, None


# ------------------------------------------------------------------- JSON

class _Num(str):
    """A JSON number, kept as written."""


class _Obj(list):
    """A JSON object: its (name, value) members in order, repeats kept."""


def _reject_constant(name):
    raise ValueError("not JSON: " + name)


def _parse_json(b):
    """The JSON value of b (bytes or None), or raises ValueError. Numbers
    stay as written and objects keep every member in order, so that the
    field rules are Go's. Invalid UTF-8 becomes U+FFFD, as Go's decoder
    makes it."""
    if b is None:
        raise ValueError("null")
    s = b.decode("utf-8", "replace") if isinstance(b, (bytes, bytearray)) else b
    try:
        return json.loads(s, object_pairs_hook=_Obj, parse_int=_Num, parse_float=_Num, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        raise ValueError(str(e)) from None


def _kind_of(v):
    if isinstance(v, _Num):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, _Obj):
        return "an object"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, bool):
        return "a boolean"
    return "null"


def _json_uint(key, v, bits):
    _check_integer(key, v)
    if v.startswith("-"):
        raise MalformedError(key, "must not be negative")
    if len(v) > 20:  # int() refuses over 4300 digits; 2**64 has 20
        raise MalformedError(key, v[:24] + "... is out of range")
    n = int(v)
    if n >= 1 << bits:
        raise MalformedError(key, v + " is out of range")
    return n


def _json_int(key, v):
    _check_integer(key, v)
    if len(v.lstrip("-")) > 19:  # int() refuses over 4300 digits; 2**63 has 19
        raise MalformedError(key, v[:24] + "... is out of range")
    n = int(v)
    if not -(1 << 63) <= n < 1 << 63:
        raise MalformedError(key, v + " is out of range")
    return n


def _check_integer(key, v):
    k = _kind_of(v)
    if k != "a number":
        raise MalformedError(key, "must be an integer, not " + k)
    if any(c in v for c in ".eE"):
        raise MalformedError(key, "must be an integer, not " + v)


def _json_string(key, v):
    if not isinstance(v, str) or isinstance(v, _Num):
        raise MalformedError(key, "must be a string, not " + _kind_of(v))
    return v


def _members(field, v):
    if not isinstance(v, _Obj):
        raise MalformedError(field, "must be a JSON object, not " + _kind_of(v))
    return v


# Fields of a marker value, in the order Go checks "is required".
_FIELDS = ("v", "phase", "partition", "count", "sources", "watermark_ms", "sealed_by", "emitter", "task", "writers")
_OUTPUT = {"v", "phase", "partition", "count", "sources", "watermark_ms", "sealed_by", "emitter"}


def decode_output_marker(value):
    """The marker phasegate wrote (markers.DecodeOutputMarker): raises
    MalformedError, with newer set for a "v" above 2."""
    try:
        tree = _parse_json(value)
    except ValueError:
        raise MalformedError("", "not valid JSON") from None
    newer = _newer_version(tree)
    if newer is not None:
        raise newer
    m = Marker()
    seen = set()
    version = 0
    raw = {}
    twice = set()
    for key, v in _members("", tree):
        if key not in _FIELDS:
            continue  # MARKERS.md section 3: unknown fields are ignored
        if key in ("task", "writers"):
            if key in seen:
                twice.add(key)
            seen.add(key)
            raw[key] = v
            continue
        if key in seen:
            raise MalformedError(key, "given twice")
        seen.add(key)
        if key == "v":
            version = _check_version(key, v)
        else:
            _set_field(m, key, v)
    required = set(_OUTPUT)
    if version == VERSION_WRITERS:
        required |= {"task", "writers"}
    for f in _FIELDS:
        if f in required and f not in seen:
            raise MalformedError(f, "is required")
    if version == VERSION_WRITERS:
        for f in ("task", "writers"):
            if f in twice:
                raise MalformedError(f, "given twice")
        m.task = _json_uint("task", raw["task"], 31)
        m.writers = _json_uint("writers", raw["writers"], 31)
    _validate(m)
    return m


def _newer_version(tree):
    """markers.newerVersion: "v" is looked at before any other field
    (MARKERS.md 3.3: a reader stops at a marker whose "v" is an integer
    above 2, whatever else the value holds, 2^64 and more included); the
    MalformedError, newer set, of the first such "v", or None."""
    if not isinstance(tree, _Obj):
        return None
    for key, v in tree:
        if key != "v" or not isinstance(v, _Num) or any(c in v for c in ".eE") or v.startswith("-"):
            continue
        # A JSON integer has no leading zeros: above 2 is more than one
        # digit, or one digit above "2" (no int(): it would refuse 4300 digits).
        if len(v) > 1 or v > "2":
            return MalformedError(key, f"version {v} is newer than this reader (1 and 2): upgrade the reader", newer=True)
    return None


def _check_version(key, v):
    n = _json_uint(key, v, 64)
    if n in (VERSION, VERSION_WRITERS):
        return n
    raise MalformedError(key, f"version {v} is not 1 or 2")


def _set_field(m, key, v):
    if key == "phase":
        m.phase = _json_uint(key, v, 64)
    elif key == "partition":
        m.partition = _json_uint(key, v, 31)
    elif key == "count":
        m.count, m.has_count = _json_uint(key, v, 63), True
    elif key == "watermark_ms":
        m.watermark_ms = _json_int(key, v)
    elif key == "sealed_by":
        m.sealed_by = _json_string(key, v)
    elif key == "emitter":
        m.emitter = _json_string(key, v)
    elif key == "sources":
        m.sources = {}
        for topic, n in _members(key, v):
            if topic in m.sources:
                raise MalformedError(key, f"topic {json.dumps(topic)} given twice")
            try:
                m.sources[topic] = _json_uint(key, n, 63)
            except MalformedError as e:
                e.reason = f"count of {json.dumps(topic)}: {e.reason}"
                raise


def _validate(m):
    total = 0
    for topic, n in m.sources.items():
        reason = check_topic(topic)
        if reason:
            raise MalformedError("sources", f"topic {json.dumps(topic)} {reason}")
        total += n
        if total >= 1 << 63:
            raise MalformedError("sources", "counts overflow int64")
    if total != m.count:
        raise MalformedError("sources", f"add up to {total}, count is {m.count}")
    if m.sealed_by not in SEALED_BY:
        raise MalformedError("sealed_by", f"{json.dumps(m.sealed_by)} is not markers, watermark, idle or timeout")
    if m.emitter == "":
        raise MalformedError("emitter", "is empty")
    if m.writers == 1:
        raise MalformedError("writers", "1 is not 2 or more (a one-writer marker is \"v\":1)")
    if m.writers > 0 and m.task >= m.writers:
        raise MalformedError("task", f"{m.task} is not below writers {m.writers}")


def append_checkpoint_metadata(done, has_done):
    """Rule C2's metadata, exactly these bytes."""
    return '{"phasegate":1,"done":%d}' % done if has_done else '{"phasegate":1}'


def parse_checkpoint_metadata(s):
    """Rule C2: (done, has_done, ok); ok is False for anything that is not
    checkpoint metadata ("" included). One trailing NUL byte is ignored
    (confluent-kafka 2.16.1 commits one); two are not metadata."""
    if s is None:
        return 0, False, False
    b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)
    if b.endswith(b"\x00"):
        b = b[:-1]  # markers.ParseCheckpointMetadata: strings.TrimSuffix(s, "\x00")
    try:
        tree = _parse_json(b)
    except ValueError:
        return 0, False, False
    if not isinstance(tree, _Obj):
        return 0, False, False
    version = has_done = False
    done = 0
    try:
        for key, v in tree:
            if key == "phasegate":
                if version:
                    return 0, False, False
                if _json_uint(key, v, 64) != 1:
                    return 0, False, False
                version = True
            elif key == "done":
                if has_done:
                    return 0, False, False
                done, has_done = _json_uint(key, v, 64), True
    except MalformedError:
        return 0, False, False
    if not version:
        return 0, False, False
    return done, has_done, True


# ----------------------------------------------------------------- reader

_ONE, _SEVERAL = 1, 2  # what the first placeable record said about the partition

_WEAKNESS = {"markers": 1, "watermark": 2, "idle": 3, "timeout": 4}


class _Lane:
    """One writer's records on a partition (markers.lane): M3 to M6."""

    def __init__(self, task):
        self.task = task  # -1 for the lane of a one-writer partition
        self.last_ok = False
        self.last = 0
        self.pending = False
        self.cur = 0
        self.records = []
        self.ids = set()
        self.done = []  # marked phases not complete yet (several writers)
        self.anchored = False  # rule C4
        self.whole = 0

    def data(self, r, rec, meta):
        ph = meta.phase
        if self.last_ok and ph <= self.last:
            r._report_prior(self, DATA_AFTER_MARKER, rec.offset, ph, self.last, f"after the marker for phase {self.last}")
            return
        if self.pending and ph < self.cur:
            r._report_prior(self, PHASE_BACKWARDS, rec.offset, ph, self.cur, f"data after data of phase {self.cur}")
            return
        if self.pending and ph > self.cur:
            self.missing(r, rec.offset, f"data of phase {ph} came first")
        self.check_output_data(r, rec.offset, ph, meta)
        if meta.id is not None:
            if meta.id in self.ids:
                r._report(self, DUPLICATE_ID, rec.offset, ph, f"phasegate.id {meta.id!r} seen twice")
            else:
                self.ids.add(meta.id)
        self.pending, self.cur = True, ph
        self.records.append(rec)

    def check_output_data(self, r, off, ph, meta):
        if meta.id is None and meta.source is None:
            r._report(self, MALFORMED, off, ph, "data record without phasegate.id and phasegate.source")
        elif meta.id is None:
            r._report(self, MALFORMED, off, ph, "data record without phasegate.id")
        elif meta.source is None:
            r._report(self, MALFORMED, off, ph, "data record without phasegate.source")
        if meta.source is not None:
            try:
                parse_source(meta.source)
            except ValueError as e:
                r._report(self, MALFORMED, off, ph, "", e)

    def marker(self, r, rec, m):
        ph = m.phase
        if self.last_ok and ph <= self.last:
            r._report_prior(self, PHASE_BACKWARDS, rec.offset, ph, self.last, f"marker after the marker for phase {self.last}")
            return None
        if rec.key is not None:
            r._report(self, MALFORMED, rec.offset, ph, "marker with a non-null key")
        if m.partition != r.partition:
            r._report(self, MALFORMED, rec.offset, ph, f"marker names partition {m.partition}")
        p = Phase(ph, m, rec.offset)
        if self.pending and ph < self.cur:
            r._report_prior(self, PHASE_BACKWARDS, rec.offset, ph, self.cur, f"marker after data of phase {self.cur}")
        elif self.pending and ph > self.cur:
            self.missing(r, rec.offset, f"marker for phase {ph} came first")
        elif self.pending:  # ph == cur: the marker closes the pending data
            p.records = self.records
            self.records = []
            self.pending = False
            if self.task >= 0 and self.ids:  # kept for the check across writers (M7)
                p.ids, self.ids = self.ids, set()
            else:
                self.ids.clear()
        got = len(p.records)
        if r._proving and not self.anchored:  # C4: the lane's first marker read
            self.anchored, self.whole = True, ph
            if got != m.count and ph < MAX_UINT64:
                self.whole = ph + 1
        if m.count != got and (m.count < got or not r._proving or self.last_ok):
            v = r._report(self, COUNT_MISMATCH, rec.offset, ph)
            v.want, v.got = m.count, got
        self.last_ok, self.last = True, ph
        return p

    def marker_below_floor(self, r, off, ph):
        """Rule C3: a marker of a phase handed over before closes nothing
        but is the lane's last marker for M3 and M4."""
        if self.last_ok and ph <= self.last:
            r._report_prior(self, PHASE_BACKWARDS, off, ph, self.last, f"marker after the marker for phase {self.last}")
        elif self.pending:
            r._report_prior(self, PHASE_BACKWARDS, off, ph, self.cur, f"marker after data of phase {self.cur}")
        else:
            self.last_ok, self.last = True, ph

    def missing(self, r, off, detail):
        v = r._report(self, MISSING_MARKER, off, self.cur, detail)
        v.got = len(self.records)
        self.drop()

    def drop(self):
        self.records = []
        self.pending = False
        self.ids.clear()


class Reader:
    """Checks one output partition and hands back whole phases
    (markers.Reader; markers.NewReaderAt when start is given). Feed every
    record in offset order; after each feed, call next() until None; end()
    after the last record of a finite input. checkpoint() is what to
    commit once the phases taken were processed; skipped() the phases a
    reader started without metadata could not prove whole."""

    def __init__(self, partition, start=None):
        self.partition = partition
        self._kind = 0
        self._writers = 0
        self._solo = _Lane(-1)
        self._lanes = {}
        self._ready = []
        self._vs = []
        self._done = self._floor = 0
        self._has_done = self._has_floor = False
        self._proving = False
        self._next = 0
        self._skips = []
        if start is not None:
            self._next = start.offset
            done, has_done, ok = parse_checkpoint_metadata(start.metadata)
            if ok:
                self._floor, self._has_floor = done, has_done
                self._done, self._has_done = done, has_done
            else:
                self._proving = start.offset != 0

    def feed(self, rec):
        """Takes the next record; returns (first phase it completed or None,
        list of violations)."""
        self._next = max(self._next, rec.offset + 1)
        meta, err = inspect(rec.headers)
        if err is not None:
            self._report(None, MALFORMED, rec.offset, meta.phase, "headers", err)
        elif meta.marker:
            self._marker(rec, meta.phase)
        else:
            self._data(rec, meta)
        vs, self._vs = self._vs, []
        return self.next(), vs

    def next(self):
        """The next complete phase feed did not return, or None."""
        if not self._ready:
            return None
        p = self._ready.pop(0)
        self._done, self._has_done = p.id, True  # handed over (section 6)
        return p

    def end(self):
        """After the partition's last record: returns the violations of
        every phase not complete, whose data is discarded; but a reader
        started without metadata away from offset 0 (rule C4) reports a
        phase it could never prove whole as skipped (skipped()) instead."""
        if self._kind == _SEVERAL:
            self._end_several()
        elif self._solo.pending:
            recs = self._solo.records
            v = Violation(MISSING_MARKER, self.partition, recs[-1].offset, self._solo.cur, "no marker before the end")
            v.got = len(recs)
            self._vs.append(v)
            self._solo.drop()
        vs, self._vs = self._vs, []
        return vs

    def skipped(self):
        """The phases skipped since the last call (rule C4), in order."""
        s, self._skips = self._skips, []
        return s

    def checkpoint(self):
        """What to commit (rules C1, C2), or None while a reader started
        without metadata has proven nothing (C5). Phases still queued for
        next() are not handed over: the offset stays ahead of them."""
        done, has_done = self._done, self._has_done
        if self._proving:
            p = self._whole_from()
            if p == MAX_UINT64 or p > 0 and (not has_done or done < p - 1):
                return None
        off = self._next
        for o in self._each_kept():
            off = min(off, o)
        return Checkpoint(off, append_checkpoint_metadata(done, has_done))

    # -- placing records

    def _data(self, rec, meta):
        if not meta.has_phase:
            self._report(None, MALFORMED, rec.offset, 0, "data record without phasegate.phase")
            return
        lane = self._data_lane(rec.offset, meta)
        if lane is None or self._has_floor and meta.phase <= self._floor:  # C3: handed over before
            return
        lane.data(self, rec, meta)

    def _marker(self, rec, hdr_phase):
        try:
            m = decode_output_marker(rec.value)
        except MalformedError as e:
            self._report(None, MALFORMED, rec.offset, hdr_phase, "marker value", e)
            return
        if m.phase != hdr_phase:
            self._report(None, MALFORMED, rec.offset, hdr_phase, f"marker JSON phase {m.phase} differs from phasegate.phase")
            return
        lane = self._marker_lane(rec.offset, m)
        if lane is None:
            return
        if self._has_floor and m.phase <= self._floor:  # C3: handed over before
            lane.marker_below_floor(self, rec.offset, m.phase)
            return
        p = lane.marker(self, rec, m)
        if p is None:
            pass
        elif self._kind == _ONE:
            self._deliver(p)
        else:
            lane.done.append(p)
            self._complete()

    def _data_lane(self, off, meta):
        if meta.task is None:
            if self._kind == _SEVERAL:
                self._report(None, MALFORMED, off, meta.phase, "data record without phasegate.task on a partition with several writers")
                return None
            self._kind = _ONE
            return self._solo
        try:
            task = parse_task(meta.task)
        except HeaderError as e:
            self._report(None, MALFORMED, off, meta.phase, "", e)
            return None
        if self._kind == _ONE:
            self._report(None, MALFORMED, off, meta.phase, "phasegate.task on a one-writer partition")
            return None
        if self._writers > 0 and task >= self._writers:
            self._report(None, MALFORMED, off, meta.phase, f"phasegate.task {task} is not below writers {self._writers}")
            return None
        self._kind = _SEVERAL
        return self._lane(task)

    def _marker_lane(self, off, m):
        if m.writers == 0:
            if self._kind == _SEVERAL:
                self._report(None, MALFORMED, off, m.phase, '"v":1 marker on a partition with several writers')
                return None
            self._kind = _ONE
            return self._solo
        if self._kind == _ONE:
            self._report(None, MALFORMED, off, m.phase, '"v":2 marker on a one-writer partition')
            return None
        if self._writers > 0 and m.writers != self._writers:
            self._report(None, MALFORMED, off, m.phase, f"marker says writers {m.writers}, the partition has {self._writers}")
            return None
        if self._writers == 0:
            self._fix_writers(off, m.writers)
        self._kind = _SEVERAL
        return self._lane(m.task)

    def _lane(self, task):
        lane = self._lanes.get(task)
        if lane is None:
            lane = self._lanes[task] = _Lane(task)
        return lane

    def _report(self, lane, kind, off, ph, detail="", err=None):
        v = Violation(kind, self.partition, off, ph, detail, err, lane.task if lane is not None and lane.task >= 0 else None)
        self._vs.append(v)
        return v

    def _report_prior(self, lane, kind, off, ph, prior, detail):
        self._report(lane, kind, off, ph, detail).prior = prior

    # -- several writers (M1, M2, M7, M8)

    def _fix_writers(self, off, w):
        self._writers = w
        for task in sorted(self._lanes):
            if task < w:
                continue
            lane = self._lanes.pop(task)
            self._report(None, MALFORMED, off, lane.cur,
                         f"{len(lane.records)} records of phasegate.task {task}, not below writers {w}, discarded")

    def _complete(self):
        if self._writers == 0:
            return
        frontier = 0
        for task in range(self._writers):
            lane = self._lanes.get(task)
            if lane is None or not lane.last_ok:
                return
            if task == 0 or lane.last < frontier:
                frontier = lane.last
        parts = {}
        for task in range(self._writers):
            lane = self._lanes[task]
            n = 0
            while n < len(lane.done) and lane.done[n].id <= frontier:
                parts.setdefault(lane.done[n].id, []).append(lane.done[n])
                n += 1
            lane.done = lane.done[n:]
        for pid in sorted(parts):
            self._cross_duplicates(parts[pid])
            self._deliver(self._summary(pid, parts[pid]))

    def _cross_duplicates(self, parts):
        for i, p in enumerate(parts[1:]):
            for rec in p.records:
                meta, _ = inspect(rec.headers)
                if meta.id is None:
                    continue
                for q in parts[:i + 1]:
                    if q.ids and meta.id in q.ids:
                        self._vs.append(Violation(DUPLICATE_ID, self.partition, rec.offset, p.id,
                                                  f"phasegate.id {meta.id!r} also written by task {q.marker.task}",
                                                  task=p.marker.task))
                        break

    def _summary(self, pid, parts):
        first = parts[0].marker
        s = Marker()
        s.phase, s.partition, s.has_count, s.sources = pid, self.partition, True, {}
        s.writers, s.task, s.emitter, s.watermark_ms = self._writers, -1, first.emitter, first.watermark_ms
        p = Phase(pid, s, 0)
        p.markers = []
        for part in parts:
            p.records.extend(part.records)
            p.markers.append((part.marker, part.marker_offset))
            m = part.marker
            s.count += m.count
            for topic, n in m.sources.items():
                s.sources[topic] = s.sources.get(topic, 0) + n
            s.watermark_ms = max(s.watermark_ms, m.watermark_ms)
            if _WEAKNESS.get(m.sealed_by, 0) > _WEAKNESS.get(s.sealed_by, 0):
                s.sealed_by = m.sealed_by
            p.marker_offset = max(p.marker_offset, part.marker_offset)
        p.records.sort(key=lambda rec: rec.offset)
        return p

    def _end_several(self):
        tasks = sorted(self._lanes)
        for task in tasks:
            lane = self._lanes[task]
            if lane.pending:
                v = self._report(lane, MISSING_MARKER, lane.records[-1].offset, lane.cur, "no marker before the end")
                v.got = len(lane.records)
                lane.drop()
        incomplete = {}  # phase -> [got, offset, tasks that marked it]
        for task in tasks:
            lane = self._lanes[task]
            for p in lane.done:
                o = incomplete.setdefault(p.id, [0, 0, []])
                o[0] += len(p.records)
                o[1] = max(o[1], p.marker_offset)
                o[2].append(task)
            lane.done = []
        whole_from = self._whole_from()
        for pid in sorted(incomplete):
            got, off, marked = incomplete[pid]
            if self._proving and pid < whole_from:
                # C4: a phase this reader could never prove whole (a writer
                # has no marker since the start, or its first one is
                # later): skipped, not missing.
                self._done, self._has_done = pid, True
                self._skips.append(Skip(pid, got))
                continue
            missing = [t for t in range(self._writers)
                       if (t not in self._lanes or not self._lanes[t].last_ok or self._lanes[t].last < pid) and t not in marked]
            v = Violation(MISSING_MARKER, self.partition, off, pid,
                          f"phase not complete at the end: no marker for phase >= {pid} from tasks {missing}")
            v.got = got
            self._vs.append(v)

    # -- section 6

    def _deliver(self, p):
        if not self._proving or p.id >= self._whole_from():
            self._ready.append(p)
            return
        self._done, self._has_done = p.id, True
        self._skips.append(Skip(p.id, len(p.records)))
        p.records = []

    def _whole_from(self):
        if self._kind == _ONE:
            if self._solo.anchored:
                return self._solo.whole
        elif self._kind == _SEVERAL and self._writers != 0:
            p = 0
            for task in range(self._writers):
                lane = self._lanes.get(task)
                if lane is None or not lane.anchored:
                    return MAX_UINT64
                p = max(p, lane.whole)
            return p
        return MAX_UINT64

    def _each_kept(self):
        for p in self._ready:
            yield _phase_low(p)
        for lane in [self._solo, *self._lanes.values()]:
            if lane.done:
                yield _phase_low(lane.done[0])
            elif lane.pending:
                yield lane.records[0].offset


def _phase_low(p):
    low = p.marker_offset
    if p.records:
        low = min(low, p.records[0].offset)
    for _, off in p.markers or ():
        low = min(low, off)
    return low
