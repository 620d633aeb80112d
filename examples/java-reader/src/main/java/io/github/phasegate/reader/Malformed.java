package io.github.phasegate.reader;

/**
 * A marker value that breaks MARKERS.md section 3 (Go's markers.MalformedError). {@link #newer}
 * is set for a "v" above 2, a version this reader does not know: a reader must stop there.
 */
final class Malformed extends Exception {
  final String field;
  String reason;
  final boolean newer;

  Malformed(String field, String reason) {
    this(field, reason, false);
  }

  Malformed(String field, String reason, boolean newer) {
    super(null, null, false, false);
    this.field = field;
    this.reason = reason;
    this.newer = newer;
  }

  @Override
  public String getMessage() {
    return "markers: malformed marker value: " + (field.isEmpty() ? "" : Json.quote(field) + ": ") + reason;
  }
}
