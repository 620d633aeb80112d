package io.github.phasegate.reader;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Runs the shared reader vectors (markers/testdata/reader-vectors.json) on {@link PhaseReader}, by
 * the procedure of markers/testdata/README.md, and compares every field a vector gives: phases
 * (data offsets, and counts where given), skips, stopped_at and the checkpoint exactly, violations
 * as (offset, kind) sorted by offset, then kind; metadata rows through the checkpoint metadata
 * parser. {@code Reader --vectors FILE} runs it; exit status 1 when any differs.
 */
final class Vectors {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  private Vectors() {}

  /** Runs every vector and metadata row of path; returns the names of those that differ. */
  static List<String> runFile(String path, PrintStream out) throws IOException {
    JsonNode file = JSON.readTree(new File(path));
    List<String> failed = new ArrayList<>();
    for (JsonNode v : file.get("vectors")) {
      List<String> diffs = compare(v, run(v));
      if (!diffs.isEmpty()) {
        failed.add(v.get("name").asText());
        out.println("FAIL " + v.get("name").asText());
        diffs.forEach(d -> out.println("    " + d));
      }
    }
    for (JsonNode m : file.get("metadata")) {
      Marker.Metadata md = Marker.parseCheckpointMetadata(m.get("metadata").asText());
      JsonNode want = m.get("done");
      boolean agree = md.ok() == m.get("ok").asBoolean() && md.hasDone() == !want.isNull()
          && (want.isNull() || new BigInteger(Long.toUnsignedString(md.done())).equals(want.bigIntegerValue()));
      if (!agree) {
        String name = "metadata " + m.get("metadata");
        failed.add(name);
        out.println("FAIL " + name + ": got done=" + Long.toUnsignedString(md.done()) + " hasDone=" + md.hasDone() + " ok=" + md.ok());
      }
    }
    int n = file.get("vectors").size() + file.get("metadata").size();
    out.println("java reader, " + path + ": " + file.get("vectors").size() + " vectors, "
        + file.get("metadata").size() + " metadata rows");
    out.println("java: " + (n - failed.size()) + " passed, " + failed.size() + " failed");
    return failed;
  }

  private static byte[] bytes(JsonNode s) {
    return s.isNull() ? null : s.asText().getBytes(StandardCharsets.UTF_8);
  }

  /** The vector's result in the vector's own form (its "want"). */
  static ObjectNode run(JsonNode v) {
    JsonNode start = v.get("start");
    PhaseReader r = new PhaseReader(v.get("partition").asInt(),
        new Phase.Checkpoint(start.get("offset").asLong(), start.get("metadata").asText()));
    ArrayNode phases = NODES.arrayNode();
    ArrayNode skipped = NODES.arrayNode();
    List<long[]> viols = new ArrayList<>();
    List<String> kinds = new ArrayList<>();
    ObjectNode got = NODES.objectNode();
    got.putNull("stopped_at");
    boolean stopped = false;
    for (JsonNode vr : v.get("records")) {
      List<Rec.Header> hs = new ArrayList<>();
      for (JsonNode h : vr.get("headers")) {
        hs.add(new Rec.Header(bytes(h.get(0)), bytes(h.get(1))));
      }
      PhaseReader.Fed fed = r.feed(new Rec(vr.get("offset").asLong(), bytes(vr.get("key")), bytes(vr.get("value")), hs));
      take(r, fed.phase(), fed.violations(), phases, skipped, viols, kinds);
      if (fed.violations().stream().anyMatch(Violation::newerVersion)) {
        got.put("stopped_at", vr.get("offset").asLong());
        stopped = true;
        break;
      }
    }
    got.putNull("checkpoint");
    if (!stopped) {
      if (v.get("end").asBoolean()) {
        take(r, null, r.end(), phases, skipped, viols, kinds);
      }
      Phase.Checkpoint c = r.checkpoint();
      if (c != null) {
        got.putObject("checkpoint").put("offset", c.offset()).put("metadata", c.metadata());
      }
    }
    List<Integer> order = new ArrayList<>();
    for (int i = 0; i < viols.size(); i++) {
      order.add(i);
    }
    order.sort(Comparator.<Integer>comparingLong(i -> viols.get(i)[0]).thenComparing(kinds::get));
    ArrayNode vs = NODES.arrayNode();
    for (int i : order) {
      vs.addObject().put("kind", kinds.get(i)).put("offset", viols.get(i)[0]);
    }
    got.set("phases", phases.isEmpty() ? NODES.nullNode() : phases);
    got.set("skipped", skipped.isEmpty() ? NODES.nullNode() : skipped);
    got.set("violations", vs.isEmpty() ? NODES.nullNode() : vs);
    return got;
  }

  private static void take(PhaseReader r, Phase p, List<Violation> vs, ArrayNode phases, ArrayNode skipped,
      List<long[]> viols, List<String> kinds) {
    for (; p != null; p = r.next()) {
      ObjectNode o = phases.addObject();
      o.put("phase", new BigInteger(Long.toUnsignedString(p.id)));
      if (p.records.isEmpty()) {
        o.putNull("offsets");
      } else {
        ArrayNode offs = o.putArray("offsets");
        p.records.forEach(rec -> offs.add(rec.offset()));
      }
      o.put("count", p.marker.count);
    }
    for (Phase.Skip s : r.skipped()) {
      skipped.addObject().put("phase", new BigInteger(Long.toUnsignedString(s.phase()))).put("records", s.records());
    }
    for (Violation vl : vs) {
      viols.add(new long[] {vl.offset});
      kinds.add(vl.kind);
    }
  }

  /** The differences between got and the vector's want, as text. */
  static List<String> compare(JsonNode v, ObjectNode got) {
    JsonNode want = v.get("want");
    if (got.get("phases").isArray()) {
      for (int i = 0; i < got.get("phases").size() && i < want.get("phases").size(); i++) {
        if (want.get("phases").get(i).get("count").isNull()) {
          ((ObjectNode) got.get("phases").get(i)).putNull("count"); // not checked
        }
      }
    }
    List<String> diffs = new ArrayList<>();
    for (String k : List.of("phases", "skipped", "violations", "stopped_at", "checkpoint")) {
      if (!same(got.get(k), want.get(k))) {
        diffs.add(k + ": got " + got.get(k) + ", want " + want.get(k));
      }
    }
    return diffs;
  }

  /** JSON equality, numbers by value (the file's 5 and our 5L are one number). */
  private static boolean same(JsonNode a, JsonNode b) {
    if (a.isNumber() && b.isNumber()) {
      return a.bigIntegerValue().equals(b.bigIntegerValue());
    }
    if (a.isArray() && b.isArray() || a.isObject() && b.isObject()) {
      if (a.size() != b.size()) {
        return false;
      }
      if (a.isArray()) {
        for (int i = 0; i < a.size(); i++) {
          if (!same(a.get(i), b.get(i))) {
            return false;
          }
        }
        return true;
      }
      for (var it = a.fieldNames(); it.hasNext();) {
        String f = it.next();
        if (!b.has(f) || !same(a.get(f), b.get(f))) {
          return false;
        }
      }
      return true;
    }
    return a.equals(b);
  }
}
