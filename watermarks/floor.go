package watermarks

// Mark is a watermark: the first phase not passed and the time watermark
// in ms. Idle says it comes from partitions that are all idle.
type Mark struct {
	Phase uint64
	Ms    int64
	Idle  bool
}

// Floor caps the global watermark from outside: from the next Advance on,
// Global and GlobalMs do not pass m.Phase and m.Ms, so no phase >= m.Phase
// seals (except by a seal timeout under PolicySeal) and backpressure pauses
// the partitions ahead of the capped Global. Several trackers that share one
// global watermark (the tasks of several instances) give each other their
// Local marks this way. Floor(m, false) removes the cap. The cap never
// lowers Global or GlobalMs, which never decrease.
func (t *Tracker) Floor(m Mark, set bool) {
	t.floor, t.floorSet = m, set
}

// Local returns what the last Advance found over this tracker's own
// partitions before the Floor: the minimum over live partitions (of Low and
// time watermark), or, when every partition is idle (Idle true), the
// maximum over all and past every open phase. It is what the tracker tells
// the trackers it shares the global watermark with. Before the first
// Advance it is the zero Mark.
func (t *Tracker) Local() Mark { return t.local }
