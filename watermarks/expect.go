package watermarks

// Expect opens phase without a record of this tracker's partitions, when it
// is neither sealed nor open: another tracker sharing the global watermark
// holds data of it (docs/FLEET.md, rule F7). Advance then returns it as a
// Seal with no records once Global passes it, so the caller writes its
// markers, in phase order with its own phases.
func (t *Tracker) Expect(phase uint64) {
	if phase < t.global || t.phases[phase] != nil {
		return
	}
	t.openPhase(phase, t.cfg.Now())
}

// DataPhases appends to dst, ascending, the open phases that hold records
// of this tracker's partitions (not those only Expected), at most max: what
// the tracker tells the trackers it shares the global watermark with.
func (t *Tracker) DataPhases(dst []uint64, max int) []uint64 {
	for _, ph := range t.open {
		if len(dst) >= max {
			break
		}
		if ph.records > 0 {
			dst = append(dst, ph.id)
		}
	}
	return dst
}
