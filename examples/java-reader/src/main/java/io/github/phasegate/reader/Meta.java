package io.github.phasegate.reader;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * What a record's phasegate headers say (MARKERS.md section 2; Go's markers.Meta), and the parsers
 * of header values. Header names and values are bytes, matched byte for byte.
 */
final class Meta {
  static final String PREFIX = "phasegate.";
  static final int MAX_ID_LEN = 256;
  private static final List<String> NAMES = List.of("marker", "phase", "id", "source", "reason", "task");

  /** A phasegate header that breaks MARKERS.md section 2 (the Go sentinels). */
  static final class HeaderError extends Exception {
    HeaderError(String msg) {
      super(msg, null, false, false);
    }
  }

  boolean marker;
  boolean hasPhase;
  long phase;
  byte[] id;
  byte[] source;
  byte[] task;
  private final Set<String> seen = new HashSet<>();
  /** The first error, or null; what was read before it stays. */
  HeaderError error;

  /** Observes every header in order, then checks the record (Go's Inspect). */
  static Meta inspect(List<Rec.Header> headers) {
    Meta m = new Meta();
    try {
      for (Rec.Header h : headers) {
        m.observe(h.key(), h.value());
      }
      if (m.marker && !m.hasPhase) {
        throw new HeaderError("markers: marker without phasegate.phase");
      }
    } catch (HeaderError e) {
      m.error = e;
    }
    return m;
  }

  private void observe(byte[] key, byte[] value) throws HeaderError {
    String k = new String(key, StandardCharsets.ISO_8859_1);
    if (k.length() <= PREFIX.length() || !k.startsWith(PREFIX)) {
      return;
    }
    String name = k.substring(PREFIX.length());
    if (!NAMES.contains(name)) {
      return;
    }
    if (!seen.add(name)) {
      throw new HeaderError("markers: phasegate header repeated");
    }
    switch (name) {
      case "marker":
        if (value.length != 1 || value[0] != '1') {
          throw new HeaderError("markers: phasegate.marker is not 1");
        }
        marker = true;
        break;
      case "phase":
        phase = parsePhase(value);
        hasPhase = true;
        break;
      case "id":
        if (value.length == 0) {
          throw new HeaderError("markers: phasegate.id is empty");
        }
        if (value.length > MAX_ID_LEN) {
          throw new HeaderError("markers: phasegate.id is longer than 256 bytes");
        }
        id = value;
        break;
      case "source":
        source = value;
        break;
      case "task":
        task = value;
        break;
      default:
    }
  }

  /** A phasegate.phase value: 1 to 20 ASCII digits, at most 2^64-1 (unsigned in the long). */
  static long parsePhase(byte[] b) throws HeaderError {
    if (b.length == 0) {
      throw new HeaderError("markers: phasegate.phase is empty");
    }
    if (b.length > 20) {
      throw new HeaderError("markers: phasegate.phase has more than 20 digits");
    }
    for (byte c : b) {
      if (c < '0' || c > '9') {
        throw new HeaderError("markers: phasegate.phase is not decimal digits");
      }
    }
    try {
      return Long.parseUnsignedLong(new String(b, StandardCharsets.ISO_8859_1));
    } catch (NumberFormatException e) {
      throw new HeaderError("markers: phasegate.phase overflows uint64");
    }
  }

  /** A canonical non-negative decimal (no sign, no leading zero) no greater than max, or -1. */
  static long parseCanonical(byte[] b, int from, int to, long max) {
    if (to <= from || to - from > 1 && b[from] == '0') {
      return -1;
    }
    long n = 0;
    for (int i = from; i < to; i++) {
      int d = b[i] - '0';
      if (d < 0 || d > 9 || n > (max - d) / 10) {
        return -1;
      }
      n = n * 10 + d;
    }
    return n;
  }

  /** A phasegate.task value: a canonical decimal in [0, 2147483647]. */
  static int parseTask(byte[] b) throws HeaderError {
    long n = parseCanonical(b, 0, b.length, Integer.MAX_VALUE);
    if (n < 0) {
      throw new HeaderError("markers: phasegate.task is not a task number");
    }
    return (int) n;
  }

  /** The topic of a phasegate.source value {@code <topic>/<partition>/<offset>}, parsed from the right. */
  static String parseSource(byte[] b) throws HeaderError {
    int i = lastSlash(b, b.length);
    if (i < 0) {
      throw new HeaderError("markers: malformed phasegate.source: no '/'");
    }
    if (parseCanonical(b, i + 1, b.length, Long.MAX_VALUE) < 0) {
      throw new HeaderError("markers: malformed phasegate.source: offset is not a non-negative int64");
    }
    int j = lastSlash(b, i);
    if (j < 0) {
      throw new HeaderError("markers: malformed phasegate.source: one '/', want two");
    }
    if (parseCanonical(b, j + 1, i, Integer.MAX_VALUE) < 0) {
      throw new HeaderError("markers: malformed phasegate.source: partition is not a non-negative int32");
    }
    String topic = new String(b, 0, j, StandardCharsets.ISO_8859_1);
    String reason = checkTopic(topic);
    if (!reason.isEmpty()) {
      throw new HeaderError("markers: malformed phasegate.source: topic " + Json.quote(topic) + " " + reason);
    }
    return topic;
  }

  private static int lastSlash(byte[] b, int before) {
    for (int i = before - 1; i >= 0; i--) {
      if (b[i] == '/') {
        return i;
      }
    }
    return -1;
  }

  /** Why t is not a legal Kafka topic name, or "". Lengths count UTF-8 bytes, as Go does. */
  static String checkTopic(String t) {
    byte[] b = t.getBytes(StandardCharsets.UTF_8);
    if (b.length == 0) {
      return "is empty";
    }
    if (b.length > 249) {
      return "is longer than 249 bytes";
    }
    if (t.equals(".") || t.equals("..")) {
      return "is . or ..";
    }
    for (byte c : b) {
      if (!(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-')) {
        return "holds a byte outside [a-zA-Z0-9._-]";
      }
    }
    return "";
  }
}
