package io.github.phasegate.reader;

import static java.lang.Long.compareUnsigned;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Checks one output partition and hands back whole phases: a port of the Go markers.Reader
 * (markers/reader.go, lane.go, several.go, checkpoint.go), branch for branch, so that the shared
 * vectors (markers/testdata) hold for both. MARKERS.md sections 2 to 3.3 (rules M1 to M8) and
 * section 6 (checkpoints, C1 to C5).
 *
 * <p>Feed every record of the partition in offset order, read with read_committed; after each
 * {@link #feed}, call {@link #next} until it returns null (one record can complete several
 * phases); {@link #end} after the last record of a finite input. {@link #checkpoint} is what to
 * commit once the phases taken were processed; {@link #skipped} the phases a reader started
 * without metadata could not prove whole. Phases are unsigned 64-bit integers in a long. Not safe
 * for concurrent use: one reader per partition, on one thread.
 */
final class PhaseReader {
  private static final long MAX = -1L; // 2^64-1 unsigned
  private static final int ONE = 1;
  private static final int SEVERAL = 2;

  final int partition;
  private int kind; // what the first placeable record said: 0, ONE or SEVERAL
  private int writers; // W, once a "v":2 marker fixed it
  private final Lane solo = new Lane(-1);
  private final Map<Integer, Lane> lanes = new HashMap<>();
  private final List<Phase> ready = new ArrayList<>();
  private List<Violation> vs = new ArrayList<>();
  // Section 6: done is the highest phase handed over; a reader started at a checkpoint with
  // metadata drops every record of a phase at or below floor; proving is rule C4.
  private long done;
  private long floor;
  private boolean hasDone;
  private boolean hasFloor;
  private final boolean proving;
  private long next;
  private List<Phase.Skip> skips = new ArrayList<>();

  /** A reader of partition that starts at {@code from} (Go's NewReaderAt). */
  PhaseReader(int partition, Phase.Checkpoint from) {
    this.partition = partition;
    this.next = from.offset();
    Marker.Metadata md = Marker.parseCheckpointMetadata(from.metadata());
    if (md.ok()) {
      floor = md.done();
      hasFloor = md.hasDone();
      done = md.done();
      hasDone = md.hasDone();
      proving = false;
    } else {
      proving = from.offset() != 0;
    }
  }

  /** The result of one {@link #feed}: the first phase the record completed, or null, and its violations. */
  record Fed(Phase phase, List<Violation> violations) {}

  Fed feed(Rec rec) {
    next = Math.max(next, rec.offset() + 1);
    Meta meta = Meta.inspect(rec.headers());
    if (meta.error != null) {
      report(null, Violation.MALFORMED, rec.offset(), meta.phase, "headers", meta.error);
    } else if (meta.marker) {
      marker(rec, meta.phase);
    } else {
      data(rec, meta);
    }
    List<Violation> out = vs;
    vs = new ArrayList<>();
    return new Fed(next(), out);
  }

  /** The next complete phase that feed did not return, or null. */
  Phase next() {
    if (ready.isEmpty()) {
      return null;
    }
    Phase p = ready.remove(0);
    done = p.id; // handed over (section 6)
    hasDone = true;
    return p;
  }

  /**
   * After the last record: every phase not complete is a missing marker and is discarded; but a
   * reader started without metadata away from offset 0 (rule C4) reports a phase it could never
   * prove whole as skipped ({@link #skipped}) instead.
   */
  List<Violation> end() {
    if (kind == SEVERAL) {
      endSeveral();
    } else if (solo.pending) {
      Violation v = new Violation(Violation.MISSING_MARKER, partition, solo.records.get(solo.records.size() - 1).offset(),
          solo.cur, "no marker before the end", null, -1);
      v.got = solo.records.size();
      vs.add(v);
      solo.drop();
    }
    List<Violation> out = vs;
    vs = new ArrayList<>();
    return out;
  }

  /** The phases skipped since the last call (rule C4), in increasing order. */
  List<Phase.Skip> skipped() {
    List<Phase.Skip> s = skips;
    skips = new ArrayList<>();
    return s;
  }

  /**
   * What to commit (rules C1, C2), or null while a reader started without metadata has proven
   * nothing (C5). Phases still queued for next() are not handed over: the offset stays ahead of
   * them.
   */
  Phase.Checkpoint checkpoint() {
    if (proving) {
      long p = wholeFrom();
      if (p == MAX || p != 0 && (!hasDone || compareUnsigned(done, p - 1) < 0)) {
        return null;
      }
    }
    long off = next;
    for (Phase p : ready) {
      off = Math.min(off, phaseLow(p));
    }
    off = Math.min(off, kept(solo, off));
    for (Lane l : lanes.values()) {
      off = Math.min(off, kept(l, off));
    }
    return new Phase.Checkpoint(off, Marker.checkpointMetadata(done, hasDone));
  }

  private static long kept(Lane l, long off) {
    if (!l.done.isEmpty()) {
      return phaseLow(l.done.get(0)); // a lane's records are in offset order
    }
    return l.pending ? l.records.get(0).offset() : off;
  }

  private static long phaseLow(Phase p) {
    long low = p.markerOffset;
    if (!p.records.isEmpty()) {
      low = Math.min(low, p.records.get(0).offset());
    }
    if (p.markers != null) {
      for (Phase.TaskMarker m : p.markers) {
        low = Math.min(low, m.offset());
      }
    }
    return low;
  }

  private void data(Rec rec, Meta meta) {
    if (!meta.hasPhase) {
      report(null, Violation.MALFORMED, rec.offset(), 0, "data record without phasegate.phase", null);
      return;
    }
    Lane l = dataLane(rec.offset(), meta);
    if (l == null || hasFloor && compareUnsigned(meta.phase, floor) <= 0) { // C3: handed over before
      return;
    }
    l.data(rec, meta);
  }

  private void marker(Rec rec, long hdrPhase) {
    Marker m;
    try {
      m = Marker.decodeOutput(rec.value());
    } catch (Malformed e) {
      report(null, Violation.MALFORMED, rec.offset(), hdrPhase, "marker value", e);
      return;
    }
    if (m.phase != hdrPhase) {
      report(null, Violation.MALFORMED, rec.offset(), hdrPhase,
          "marker JSON phase " + Long.toUnsignedString(m.phase) + " differs from phasegate.phase", null);
      return;
    }
    Lane l = markerLane(rec.offset(), m);
    if (l == null) {
      return;
    }
    if (hasFloor && compareUnsigned(m.phase, floor) <= 0) { // C3: handed over before
      l.markerBelowFloor(rec.offset(), m.phase);
      return;
    }
    Phase p = l.marker(rec, m);
    if (p == null) {
      return;
    }
    if (kind == ONE) {
      deliver(p);
    } else {
      l.done.add(p);
      complete();
    }
  }

  /** Places a data record in its lane (M2), or reports why it cannot and returns null. */
  private Lane dataLane(long off, Meta meta) {
    if (meta.task == null) {
      if (kind == SEVERAL) {
        report(null, Violation.MALFORMED, off, meta.phase, "data record without phasegate.task on a partition with several writers", null);
        return null;
      }
      kind = ONE;
      return solo;
    }
    int task;
    try {
      task = Meta.parseTask(meta.task);
    } catch (Meta.HeaderError e) {
      report(null, Violation.MALFORMED, off, meta.phase, "", e);
      return null;
    }
    if (kind == ONE) {
      report(null, Violation.MALFORMED, off, meta.phase, "phasegate.task on a one-writer partition", null);
      return null;
    }
    if (writers > 0 && task >= writers) {
      report(null, Violation.MALFORMED, off, meta.phase, "phasegate.task " + task + " is not below writers " + writers, null);
      return null;
    }
    kind = SEVERAL;
    return lane(task);
  }

  /** Places a decoded marker in its lane (M1, M2), or reports why it cannot and returns null. */
  private Lane markerLane(long off, Marker m) {
    if (m.writers == 0) {
      if (kind == SEVERAL) {
        report(null, Violation.MALFORMED, off, m.phase, "\"v\":1 marker on a partition with several writers", null);
        return null;
      }
      kind = ONE;
      return solo;
    }
    if (kind == ONE) {
      report(null, Violation.MALFORMED, off, m.phase, "\"v\":2 marker on a one-writer partition", null);
      return null;
    }
    if (writers > 0 && m.writers != writers) {
      report(null, Violation.MALFORMED, off, m.phase, "marker says writers " + m.writers + ", the partition has " + writers, null);
      return null;
    }
    if (writers == 0) {
      fixWriters(off, m.writers);
    }
    kind = SEVERAL;
    return lane(m.task);
  }

  private Lane lane(int task) {
    return lanes.computeIfAbsent(task, t -> new Lane(t));
  }

  private Violation report(Lane l, String k, long off, long ph, String detail, Exception err) {
    Violation v = new Violation(k, partition, off, ph, detail, err, l != null && l.task >= 0 ? l.task : -1);
    vs.add(v);
    return v;
  }

  private void reportPrior(Lane l, String k, long off, long ph, long prior, String detail) {
    report(l, k, off, ph, detail, null).prior = prior;
  }

  // Several writers (M1, M2, M7, M8).

  /** Records W from the first "v":2 marker and drops the lanes of tasks not below it (M2). */
  private void fixWriters(long off, int w) {
    writers = w;
    for (int task : new TreeMap<>(lanes).keySet()) {
      if (task < w) {
        continue;
      }
      Lane l = lanes.remove(task);
      report(null, Violation.MALFORMED, off, l.cur,
          l.records.size() + " records of phasegate.task " + task + ", not below writers " + w + ", discarded", null);
    }
  }

  /** Queues, in increasing order, every phase that rule M8 makes complete. */
  private void complete() {
    if (writers == 0) {
      return;
    }
    long frontier = 0;
    for (int task = 0; task < writers; task++) {
      Lane l = lanes.get(task);
      if (l == null || !l.lastOk) {
        return;
      }
      if (task == 0 || compareUnsigned(l.last, frontier) < 0) {
        frontier = l.last;
      }
    }
    TreeMap<Long, List<Phase>> parts = new TreeMap<>(Long::compareUnsigned);
    for (int task = 0; task < writers; task++) {
      Lane l = lanes.get(task);
      while (!l.done.isEmpty() && compareUnsigned(l.done.get(0).id, frontier) <= 0) {
        Phase p = l.done.remove(0);
        parts.computeIfAbsent(p.id, k -> new ArrayList<>()).add(p);
      }
    }
    for (Map.Entry<Long, List<Phase>> e : parts.entrySet()) {
      crossDuplicates(e.getValue());
      deliver(summary(e.getKey(), e.getValue()));
    }
  }

  /** Reports a phasegate.id that two writers both wrote in one phase (M7), on the higher task's record. */
  private void crossDuplicates(List<Phase> parts) {
    for (int i = 1; i < parts.size(); i++) {
      Phase p = parts.get(i);
      for (Rec rec : p.records) {
        Meta meta = Meta.inspect(rec.headers());
        if (meta.id == null) {
          continue;
        }
        String id = new String(meta.id, StandardCharsets.ISO_8859_1);
        for (Phase q : parts.subList(0, i)) {
          if (q.ids != null && q.ids.contains(id)) {
            vs.add(new Violation(Violation.DUPLICATE_ID, partition, rec.offset(), p.id,
                "phasegate.id " + Json.quote(id) + " also written by task " + q.marker.task, null, p.marker.task));
            break;
          }
        }
      }
    }
  }

  /** The phase of a complete phase with several writers, from each writer's part. */
  private Phase summary(long id, List<Phase> parts) {
    Marker first = parts.get(0).marker;
    Marker sum = new Marker();
    sum.phase = id;
    sum.partition = partition;
    sum.sources = new TreeMap<>();
    sum.writers = writers;
    sum.task = -1;
    sum.emitter = first.emitter;
    sum.watermarkMs = first.watermarkMs;
    Phase p = new Phase(id, sum, 0);
    p.markers = new ArrayList<>();
    for (Phase part : parts) {
      p.records.addAll(part.records);
      p.markers.add(new Phase.TaskMarker(part.marker, part.markerOffset));
      Marker m = part.marker;
      sum.count += m.count;
      m.sources.forEach((topic, n) -> sum.sources.merge(topic, n, Long::sum));
      sum.watermarkMs = Math.max(sum.watermarkMs, m.watermarkMs);
      if (weakness(m.sealedBy) > weakness(sum.sealedBy)) {
        sum.sealedBy = m.sealedBy;
      }
      p.markerOffset = Math.max(p.markerOffset, part.markerOffset);
    }
    p.records.sort(Comparator.comparingLong(Rec::offset));
    return p;
  }

  /** sealed_by from the strongest guarantee to the weakest. */
  private static int weakness(String s) {
    return Marker.SEALED_BY.indexOf(s) + 1;
  }

  /**
   * End on a partition with several writers: every phase not complete is discarded (M5, M8), a
   * missing marker, except that a proving reader (C4) skips the phases it could not prove whole.
   */
  private void endSeveral() {
    TreeMap<Integer, Lane> sorted = new TreeMap<>(lanes);
    for (Lane l : sorted.values()) {
      if (l.pending) {
        report(l, Violation.MISSING_MARKER, l.records.get(l.records.size() - 1).offset(), l.cur, "no marker before the end", null)
            .got = l.records.size();
        l.drop();
      }
    }
    TreeMap<Long, long[]> incomplete = new TreeMap<>(Long::compareUnsigned); // phase -> {got, offset}
    Map<Long, List<Integer>> marked = new HashMap<>();
    for (Map.Entry<Integer, Lane> e : sorted.entrySet()) {
      for (Phase p : e.getValue().done) {
        long[] o = incomplete.computeIfAbsent(p.id, k -> new long[2]);
        o[0] += p.records.size();
        o[1] = Math.max(o[1], p.markerOffset);
        marked.computeIfAbsent(p.id, k -> new ArrayList<>()).add(e.getKey());
      }
      e.getValue().done.clear();
    }
    long wholeFrom = wholeFrom();
    for (Map.Entry<Long, long[]> e : incomplete.entrySet()) {
      long id = e.getKey();
      if (proving && compareUnsigned(id, wholeFrom) < 0) {
        // C4: a phase this reader could never prove whole (a writer has no marker since the start,
        // or its first one is later): skipped, not missing.
        done = id;
        hasDone = true;
        skips.add(new Phase.Skip(id, (int) e.getValue()[0]));
        continue;
      }
      List<Integer> missing = new ArrayList<>();
      for (int task = 0; task < writers; task++) {
        Lane l = lanes.get(task);
        if ((l == null || !l.lastOk || compareUnsigned(l.last, id) < 0) && !marked.get(id).contains(task)) {
          missing.add(task);
        }
      }
      Violation v = new Violation(Violation.MISSING_MARKER, partition, e.getValue()[1], id,
          "phase not complete at the end: no marker for phase >= " + Long.toUnsignedString(id) + " from tasks " + missing, null, -1);
      v.got = e.getValue()[0];
      vs.add(v);
    }
  }

  // Section 6.

  /** Hands over a complete phase: queued when provably whole, else skipped with its records (C4). */
  private void deliver(Phase p) {
    if (!proving || compareUnsigned(p.id, wholeFrom()) >= 0) {
      ready.add(p);
      return;
    }
    done = p.id;
    hasDone = true;
    skips.add(new Phase.Skip(p.id, p.records.size()));
    p.records = new ArrayList<>();
  }

  /** For a proving reader, the lowest phase from which every lane is known whole (P of C5); MAX while a lane has no marker. */
  private long wholeFrom() {
    if (kind == ONE) {
      if (solo.anchored) {
        return solo.whole;
      }
    } else if (kind == SEVERAL && writers != 0) {
      long p = 0;
      for (int task = 0; task < writers; task++) {
        Lane l = lanes.get(task);
        if (l == null || !l.anchored) {
          return MAX;
        }
        if (compareUnsigned(l.whole, p) > 0) {
          p = l.whole;
        }
      }
      return p;
    }
    return MAX;
  }

  /** One writer's records on the partition (Go's lane): M3 to M6. */
  private final class Lane {
    final int task; // -1 for the lane of a one-writer partition
    boolean lastOk;
    long last;
    boolean pending;
    long cur;
    List<Rec> records = new ArrayList<>();
    Set<String> ids = new HashSet<>();
    final List<Phase> done = new ArrayList<>(); // marked phases not complete yet (several writers)
    boolean anchored; // rule C4
    long whole;

    Lane(int task) {
      this.task = task;
    }

    void data(Rec rec, Meta meta) {
      long ph = meta.phase;
      if (lastOk && compareUnsigned(ph, last) <= 0) {
        reportPrior(this, Violation.DATA_AFTER_MARKER, rec.offset(), ph, last, "after the marker for phase " + Long.toUnsignedString(last));
        return;
      }
      if (pending && compareUnsigned(ph, cur) < 0) {
        reportPrior(this, Violation.PHASE_BACKWARDS, rec.offset(), ph, cur, "data after data of phase " + Long.toUnsignedString(cur));
        return;
      }
      if (pending && compareUnsigned(ph, cur) > 0) {
        missing(rec.offset(), "data of phase " + Long.toUnsignedString(ph) + " came first");
      }
      checkOutputData(rec.offset(), ph, meta);
      if (meta.id != null) {
        String id = new String(meta.id, StandardCharsets.ISO_8859_1);
        if (!ids.add(id)) {
          report(this, Violation.DUPLICATE_ID, rec.offset(), ph, "phasegate.id " + Json.quote(id) + " seen twice", null);
        }
      }
      pending = true;
      cur = ph;
      records.add(rec);
    }

    /** MARKERS.md section 2: output data records carry phasegate.phase, .id and .source. */
    private void checkOutputData(long off, long ph, Meta meta) {
      if (meta.id == null && meta.source == null) {
        report(this, Violation.MALFORMED, off, ph, "data record without phasegate.id and phasegate.source", null);
      } else if (meta.id == null) {
        report(this, Violation.MALFORMED, off, ph, "data record without phasegate.id", null);
      } else if (meta.source == null) {
        report(this, Violation.MALFORMED, off, ph, "data record without phasegate.source", null);
      }
      if (meta.source != null) {
        try {
          Meta.parseSource(meta.source);
        } catch (Meta.HeaderError e) {
          report(this, Violation.MALFORMED, off, ph, "", e);
        }
      }
    }

    /** Applies an accepted marker; returns the lane's phase it closes, or null when it is dropped. */
    Phase marker(Rec rec, Marker m) {
      long ph = m.phase;
      if (lastOk && compareUnsigned(ph, last) <= 0) {
        reportPrior(this, Violation.PHASE_BACKWARDS, rec.offset(), ph, last, "marker after the marker for phase " + Long.toUnsignedString(last));
        return null;
      }
      if (rec.key() != null) {
        report(this, Violation.MALFORMED, rec.offset(), ph, "marker with a non-null key", null);
      }
      if (m.partition != partition) {
        report(this, Violation.MALFORMED, rec.offset(), ph, "marker names partition " + m.partition, null);
      }
      Phase p = new Phase(ph, m, rec.offset());
      if (pending && compareUnsigned(ph, cur) < 0) {
        reportPrior(this, Violation.PHASE_BACKWARDS, rec.offset(), ph, cur, "marker after data of phase " + Long.toUnsignedString(cur));
      } else if (pending && compareUnsigned(ph, cur) > 0) {
        missing(rec.offset(), "marker for phase " + Long.toUnsignedString(ph) + " came first");
      } else if (pending) { // ph == cur: the marker closes the pending data
        p.records = records;
        records = new ArrayList<>();
        pending = false;
        if (task >= 0 && !ids.isEmpty()) { // kept for the check across writers (M7)
          p.ids = ids;
          ids = new HashSet<>();
        } else {
          ids.clear();
        }
      }
      long got = p.records.size();
      if (proving && !anchored) { // C4: the lane's first marker read
        anchored = true;
        whole = ph;
        if (got != m.count && ph != MAX) {
          whole = ph + 1;
        }
      }
      if (m.count != got && (m.count < got || !proving || lastOk)) {
        Violation v = report(this, Violation.COUNT_MISMATCH, rec.offset(), ph, "", null);
        v.want = m.count;
        v.got = got;
      }
      lastOk = true;
      last = ph;
      return p;
    }

    /** Rule C3: a marker of a phase handed over before closes nothing but is the lane's last marker. */
    void markerBelowFloor(long off, long ph) {
      if (lastOk && compareUnsigned(ph, last) <= 0) {
        reportPrior(this, Violation.PHASE_BACKWARDS, off, ph, last, "marker after the marker for phase " + Long.toUnsignedString(last));
      } else if (pending) { // its data is above the floor, so above ph
        reportPrior(this, Violation.PHASE_BACKWARDS, off, ph, cur, "marker after data of phase " + Long.toUnsignedString(cur));
      } else {
        lastOk = true;
        last = ph;
      }
    }

    /** Reports and discards the pending phase. */
    private void missing(long off, String detail) {
      report(this, Violation.MISSING_MARKER, off, cur, detail, null).got = records.size();
      drop();
    }

    void drop() {
      records = new ArrayList<>();
      pending = false;
      ids.clear();
    }
  }
}
