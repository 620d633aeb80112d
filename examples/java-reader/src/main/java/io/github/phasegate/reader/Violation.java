package io.github.phasegate.reader;

/** One broken rule of MARKERS.md sections 2 to 3.3 found by a reader (Go's markers.Violation). */
final class Violation {
  static final String COUNT_MISMATCH = "count-mismatch";
  static final String PHASE_BACKWARDS = "phase-backwards";
  static final String DATA_AFTER_MARKER = "data-after-marker";
  static final String MISSING_MARKER = "missing-marker";
  static final String MALFORMED = "malformed";
  static final String DUPLICATE_ID = "duplicate-id";

  final String kind;
  final int partition;
  final long offset;
  final long phase;
  long prior;
  long want;
  long got;
  /** The writer (lane) concerned, or -1. */
  final int task;
  final String detail;
  /** The underlying error of a malformed record, or null. */
  final Exception err;

  Violation(String kind, int partition, long offset, long phase, String detail, Exception err, int task) {
    this.kind = kind;
    this.partition = partition;
    this.offset = offset;
    this.phase = phase;
    this.detail = detail;
    this.err = err;
    this.task = task;
  }

  /** A marker of a version this reader does not know ("v" above 2): the reader must stop. */
  boolean newerVersion() {
    return err instanceof Malformed && ((Malformed) err).newer;
  }

  @Override
  public String toString() {
    StringBuilder b = new StringBuilder("markers: partition ").append(partition).append(" offset ").append(offset)
        .append(" phase ").append(Long.toUnsignedString(phase));
    if (task >= 0) {
      b.append(" task ").append(task);
    }
    b.append(": ").append(kind);
    if (kind.equals(COUNT_MISMATCH)) {
      b.append(": marker count ").append(want).append(", read ").append(got);
    } else if (kind.equals(MISSING_MARKER)) {
      b.append(": ").append(got).append(" records discarded");
    }
    if (!detail.isEmpty()) {
      b.append(": ").append(detail);
    }
    if (err != null) {
      b.append(": ").append(err.getMessage());
    }
    return b.toString();
  }
}
