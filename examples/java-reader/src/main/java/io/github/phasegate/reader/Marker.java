package io.github.phasegate.reader;

import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The JSON value of a marker record (MARKERS.md section 3; Go's markers.Marker) and its decoder.
 * Phases are unsigned 64-bit integers held in a long: compare them with Long.compareUnsigned. In
 * the summary of a phase with several writers, count and sources add up the writers', sealedBy is
 * the weakest and task is -1.
 */
final class Marker {
  static final int VERSION = 1;
  static final int VERSION_WRITERS = 2;
  static final List<String> SEALED_BY = List.of("markers", "watermark", "idle", "timeout");
  /** The fields of a marker, in the order Go checks "is required". */
  private static final List<String> FIELDS = List.of(
      "v", "phase", "partition", "count", "sources", "watermark_ms", "sealed_by", "emitter", "task", "writers");
  private static final Set<String> OUTPUT = Set.of(
      "v", "phase", "partition", "count", "sources", "watermark_ms", "sealed_by", "emitter");

  long phase;
  int partition;
  long count;
  Map<String, Long> sources;
  long watermarkMs;
  String sealedBy = "";
  String emitter = "";
  int writers;
  int task;

  /** Decodes a marker phasegate wrote (Go's DecodeOutputMarker). */
  static Marker decodeOutput(byte[] value) throws Malformed {
    Object tree;
    try {
      tree = Json.parse(value);
    } catch (Json.Invalid e) {
      throw new Malformed("", "not valid JSON");
    }
    Malformed newer = newerVersion(tree);
    if (newer != null) {
      throw newer;
    }
    Marker m = new Marker();
    Set<String> seen = new HashSet<>();
    Set<String> twice = new HashSet<>();
    Map<String, Object> raw = new HashMap<>();
    long version = 0;
    for (Map.Entry<String, Object> e : members("", tree)) {
      String key = e.getKey();
      Object v = e.getValue();
      if (!FIELDS.contains(key)) {
        continue; // MARKERS.md section 3: unknown fields are ignored
      }
      if (key.equals("task") || key.equals("writers")) {
        if (!seen.add(key)) {
          twice.add(key);
        }
        raw.put(key, v);
        continue;
      }
      if (!seen.add(key)) {
        throw new Malformed(key, "given twice");
      }
      if (key.equals("v")) {
        version = checkVersion(key, v);
      } else {
        m.setField(key, v);
      }
    }
    Set<String> required = new HashSet<>(OUTPUT);
    if (version == VERSION_WRITERS) {
      required.add("task");
      required.add("writers");
    }
    for (String f : FIELDS) {
      if (required.contains(f) && !seen.contains(f)) {
        throw new Malformed(f, "is required");
      }
    }
    if (version == VERSION_WRITERS) {
      for (String f : List.of("task", "writers")) {
        if (twice.contains(f)) {
          throw new Malformed(f, "given twice");
        }
      }
      m.task = (int) jsonUint("task", raw.get("task"), 31);
      m.writers = (int) jsonUint("writers", raw.get("writers"), 31);
    }
    m.validate();
    return m;
  }

  /**
   * Go's newerVersion: "v" is looked at before any other field (MARKERS.md 3.3: a reader stops at a
   * marker whose "v" is an integer above 2, whatever else the value holds, 2^64 and more included).
   * Returns the newer-version error of the first such "v", or null.
   */
  private static Malformed newerVersion(Object tree) {
    if (!(tree instanceof Json.Obj)) {
      return null;
    }
    for (Map.Entry<String, Object> e : (Json.Obj) tree) {
      if (!e.getKey().equals("v") || !(e.getValue() instanceof Json.Num)) {
        continue;
      }
      String text = ((Json.Num) e.getValue()).text();
      if (text.contains(".") || text.contains("e") || text.contains("E") || text.startsWith("-")) {
        continue;
      }
      // A JSON integer has no leading zeros: above 2 is more than one digit, or one digit above 2.
      if (text.length() > 1 || text.charAt(0) > '2') {
        return new Malformed("v", "version " + text + " is newer than this reader (1 and 2): upgrade the reader", true);
      }
    }
    return null;
  }

  private static long checkVersion(String key, Object v) throws Malformed {
    long n = jsonUint(key, v, 64);
    if (n == VERSION || n == VERSION_WRITERS) {
      return n;
    }
    throw new Malformed(key, "version " + ((Json.Num) v).text() + " is not 1 or 2");
  }

  private void setField(String key, Object v) throws Malformed {
    switch (key) {
      case "phase":
        phase = jsonUint(key, v, 64);
        break;
      case "partition":
        partition = (int) jsonUint(key, v, 31);
        break;
      case "count":
        count = jsonUint(key, v, 63);
        break;
      case "watermark_ms":
        watermarkMs = jsonInt(key, v);
        break;
      case "sealed_by":
        sealedBy = jsonString(key, v);
        break;
      case "emitter":
        emitter = jsonString(key, v);
        break;
      case "sources":
        sources = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : members(key, v)) {
          String topic = e.getKey();
          if (sources.containsKey(topic)) {
            throw new Malformed(key, "topic " + Json.quote(topic) + " given twice");
          }
          try {
            sources.put(topic, jsonUint(key, e.getValue(), 63));
          } catch (Malformed err) {
            err.reason = "count of " + Json.quote(topic) + ": " + err.reason;
            throw err;
          }
        }
        break;
      default:
        throw new IllegalArgumentException(key);
    }
  }

  private void validate() throws Malformed {
    long sum = 0;
    for (Map.Entry<String, Long> e : sources.entrySet()) {
      String reason = Meta.checkTopic(e.getKey());
      if (!reason.isEmpty()) {
        throw new Malformed("sources", "topic " + Json.quote(e.getKey()) + " " + reason);
      }
      sum += e.getValue();
      if (sum < 0) {
        throw new Malformed("sources", "counts overflow int64");
      }
    }
    if (sum != count) {
      throw new Malformed("sources", "add up to " + sum + ", count is " + count);
    }
    if (!SEALED_BY.contains(sealedBy)) {
      throw new Malformed("sealed_by", Json.quote(sealedBy) + " is not markers, watermark, idle or timeout");
    }
    if (emitter.isEmpty()) {
      throw new Malformed("emitter", "is empty");
    }
    if (writers == 1) {
      throw new Malformed("writers", "1 is not 2 or more (a one-writer marker is \"v\":1)");
    }
    if (writers > 0 && task >= writers) {
      throw new Malformed("task", task + " is not below writers " + writers);
    }
  }

  static Json.Obj members(String field, Object v) throws Malformed {
    if (!(v instanceof Json.Obj)) {
      throw new Malformed(field, "must be a JSON object, not " + Json.kindOf(v));
    }
    return (Json.Obj) v;
  }

  /** A JSON integer in [0, 2^bits), returned in a long (unsigned for 64 bits). */
  static long jsonUint(String key, Object v, int bits) throws Malformed {
    String text = checkInteger(key, v);
    if (text.startsWith("-")) {
      throw new Malformed(key, "must not be negative");
    }
    long n;
    try {
      n = Long.parseUnsignedLong(text);
    } catch (NumberFormatException e) {
      throw new Malformed(key, text + " is out of range");
    }
    if (bits < 64 && Long.compareUnsigned(n, 1L << bits) >= 0) {
      throw new Malformed(key, text + " is out of range");
    }
    return n;
  }

  private static long jsonInt(String key, Object v) throws Malformed {
    String text = checkInteger(key, v);
    try {
      return Long.parseLong(text);
    } catch (NumberFormatException e) {
      throw new Malformed(key, text + " is out of range");
    }
  }

  private static String checkInteger(String key, Object v) throws Malformed {
    if (!(v instanceof Json.Num)) {
      throw new Malformed(key, "must be an integer, not " + Json.kindOf(v));
    }
    String text = ((Json.Num) v).text();
    if (text.contains(".") || text.contains("e") || text.contains("E")) {
      throw new Malformed(key, "must be an integer, not " + text);
    }
    return text;
  }

  private static String jsonString(String key, Object v) throws Malformed {
    if (!(v instanceof String)) {
      throw new Malformed(key, "must be a string, not " + Json.kindOf(v));
    }
    return (String) v;
  }

  /** Rule C2's metadata, exactly these bytes. */
  static String checkpointMetadata(long done, boolean hasDone) {
    return hasDone ? "{\"phasegate\":1,\"done\":" + Long.toUnsignedString(done) + "}" : "{\"phasegate\":1}";
  }

  /** What checkpoint metadata says (rule C2); ok is false for any other string. */
  record Metadata(long done, boolean hasDone, boolean ok) {
    static final Metadata NONE = new Metadata(0, false, false);
  }

  /**
   * Reads checkpoint metadata (Go's ParseCheckpointMetadata). One trailing NUL is ignored
   * (confluent-kafka 2.16.1, the Python reader's client, commits one); two are not metadata.
   */
  static Metadata parseCheckpointMetadata(String s) {
    if (s != null && s.endsWith("\u0000")) {
      s = s.substring(0, s.length() - 1); // Go: strings.TrimSuffix(s, "\x00")
    }
    Object tree;
    try {
      tree = Json.parse(s == null ? null : s.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    } catch (Json.Invalid e) {
      return Metadata.NONE;
    }
    if (!(tree instanceof Json.Obj)) {
      return Metadata.NONE;
    }
    boolean version = false;
    boolean hasDone = false;
    long done = 0;
    try {
      for (Map.Entry<String, Object> e : (Json.Obj) tree) {
        switch (e.getKey()) {
          case "phasegate":
            if (version || jsonUint("phasegate", e.getValue(), 64) != 1) {
              return Metadata.NONE;
            }
            version = true;
            break;
          case "done":
            if (hasDone) {
              return Metadata.NONE;
            }
            done = jsonUint("done", e.getValue(), 64);
            hasDone = true;
            break;
          default:
        }
      }
    } catch (Malformed e) {
      return Metadata.NONE;
    }
    return version ? new Metadata(done, hasDone, true) : Metadata.NONE;
  }
}
