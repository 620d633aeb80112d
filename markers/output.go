package markers

// HeaderLike is a Kafka client's record header type laid out as Header:
// sarama.RecordHeader, or Header itself. The Append*Headers functions
// write into a slice of the caller's type, so a producer appends
// phasegate's headers to the record it sends without converting or
// copying them (franz-go's kgo.RecordHeader, whose key is a string, does
// not fit: convert from Header).
type HeaderLike interface {
	~struct{ Key, Value []byte }
}

// MaxAddedHeaders is how many headers AppendDataHeaders adds at most:
// phasegate.phase, phasegate.id, phasegate.source and phasegate.task.
const MaxAddedHeaders = 4

// DataHeaders is what an output data record keeps of its input record's
// headers (MARKERS.md section 2): every header unchanged, in order, except
// phasegate.source and phasegate.task, which are phasegate's own and
// replaced by AppendDataHeaders. Feed it every input header's key with
// Keep; the zero value is ready, one per record. It never allocates. Not
// safe for concurrent use.
type DataHeaders struct{ hasPhase, hasID bool }

// Keep reports whether the input header with this key goes to the output
// record unchanged, and notes a phasegate.phase or phasegate.id it keeps.
func (d *DataHeaders) Keep(key []byte) bool {
	switch string(key) {
	case HeaderSource, HeaderTask:
		// An upstream phasegate's source and task are replaced by ours.
		return false
	case HeaderPhase:
		d.hasPhase = true
	case HeaderID:
		d.hasID = true
	}
	return true
}

// AppendDataHeaders appends to dst, after the input headers d kept, the
// headers phasegate adds to an output data record (MARKERS.md section 2):
// phasegate.phase (phase, AppendPhase's bytes) and phasegate.id (the
// source: the input's identity) when the input had none, phasegate.source
// (AppendSource's bytes), and phasegate.task (ParseTask's syntax) when task
// is not nil, on a partition with several writers only (section 3.3). The
// values are not copied, and the keys are shared by every call: never
// write into a header's bytes. It allocates only what dst's growth needs
// (nothing when dst has room for MaxAddedHeaders more). Safe for
// concurrent use.
func AppendDataHeaders[H HeaderLike](dst []H, d DataHeaders, phase, source, task []byte) []H {
	if !d.hasPhase {
		dst = append(dst, H(Header{Key: keyPhase, Value: phase}))
	}
	if !d.hasID {
		dst = append(dst, H(Header{Key: keyID, Value: source}))
	}
	dst = append(dst, H(Header{Key: keySource, Value: source}))
	if task != nil {
		dst = append(dst, H(Header{Key: keyTask, Value: task}))
	}
	return dst
}

// The keys AppendDataHeaders writes, shared by every record it builds (a
// producer only reads them): one allocation per header and record was a
// third of an output record's allocations.
var keyPhase, keyID, keySource, keyTask = []byte(HeaderPhase), []byte(HeaderID), []byte(HeaderSource), []byte(HeaderTask)

// AppendMarkerHeaders appends the headers of a marker record of the phase
// whose phasegate.phase value is phase (AppendPhase's bytes), in this order:
// phasegate.marker: 1, phasegate.phase (MARKERS.md section 3). They are
// the same for versions 1 and 2 and for input and output markers; the
// version is in the value (Marker.AppendOutput, Marker.AppendInput). Safe
// for concurrent use.
func AppendMarkerHeaders[H HeaderLike](dst []H, phase []byte) []H {
	return append(dst, H(Header{Key: []byte(HeaderMarker), Value: []byte("1")}), H(Header{Key: []byte(HeaderPhase), Value: phase}))
}

// AppendQuarantineHeaders appends the headers phasegate adds to a record it
// quarantines, after all of the record's own (MARKERS.md section 5):
// phasegate.reason, then phasegate.source (AppendSource's bytes). Safe for
// concurrent use.
func AppendQuarantineHeaders[H HeaderLike](dst []H, reason Reason, source []byte) []H {
	return append(dst, H(Header{Key: []byte(HeaderReason), Value: []byte(reason)}), H(Header{Key: []byte(HeaderSource), Value: source}))
}
