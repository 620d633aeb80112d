package markers

// InputVerdict is what phasegate does with a marker it reads on an input
// partition (MARKERS.md section 3.1).
type InputVerdict int

// The outcomes of JudgeInput.
const (
	// InputSeal: a new marker; seal the phase (and every lower one) for the
	// partition now. The marker is not republished.
	InputSeal InputVerdict = iota + 1
	// InputSealQuarantine: as InputSeal, and the marker record goes to the
	// quarantine topic with ReasonCountMismatch.
	InputSealQuarantine
	// InputRetry: a repeat of the partition's last marker; drop it.
	InputRetry
	// InputStale: a marker below the partition's last one; quarantine it
	// with ReasonStaleMarker.
	InputStale
)

var inputVerdictNames = [...]string{"", "seal", "seal+quarantine", "retry", "stale"}

func (v InputVerdict) String() string {
	if v > 0 && int(v) < len(inputVerdictNames) {
		return inputVerdictNames[v]
	}
	return "InputVerdict(" + itoa(int64(v)) + ")"
}

// Reason is the phasegate.reason the marker record is quarantined with, ""
// when it is not quarantined.
func (v InputVerdict) Reason() Reason {
	switch v {
	case InputSealQuarantine:
		return ReasonCountMismatch
	case InputStale:
		return ReasonStaleMarker
	}
	return ""
}

// JudgeInput applies MARKERS.md section 3.1 to a decoded input marker m read
// from a partition whose highest marker so far is for phase last (marked
// false if the partition has sent none), after phasegate read `read` data
// records of phase m.Phase from that partition, proven duplicates not
// counted. The caller owns that per-partition state; JudgeInput is pure.
func JudgeInput(m Marker, last uint64, marked bool, read int64) InputVerdict {
	switch {
	case marked && m.Phase == last:
		return InputRetry
	case marked && m.Phase < last:
		return InputStale
	case m.HasCount && m.Count != read:
		return InputSealQuarantine
	}
	return InputSeal
}
