package io.github.phasegate.reader;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * One whole phase of one partition: its data records in offset order and the marker that closed
 * it, a summary on a partition with several writers (count and sources summed, sealed_by the
 * weakest), whose own markers and offsets are then in {@link #markers}, in task order.
 */
final class Phase {
  final long id;
  List<Rec> records = new ArrayList<>();
  Marker marker;
  long markerOffset;
  List<TaskMarker> markers;
  /** A writer's phasegate.id values of the phase, until it is complete; null when none. */
  Set<String> ids;

  Phase(long id, Marker marker, long markerOffset) {
    this.id = id;
    this.marker = marker;
    this.markerOffset = markerOffset;
  }

  /** One writer's marker of a phase and its offset. */
  record TaskMarker(Marker marker, long offset) {}

  /** Where a reader commits and starts again (MARKERS.md section 6). */
  record Checkpoint(long offset, String metadata) {}

  /** A phase handed over without being returned (rule C4), with the records it discarded. */
  record Skip(long phase, int records) {}
}
