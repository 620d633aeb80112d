package align

// item is one buffered data record: the caller's message, the tracker
// handle of its input partition and its output partition, decided when it
// is buffered.
type item[M any] struct {
	msg M
	p   int32
	out int32
}

// phase holds the records of one phase that no committed Batch has
// written yet, in the order they were read.
type phase[M any] struct {
	items []item[M]
	// first holds, per partition handle, the offset of the partition's
	// first record in this phase (-1: none). The committed offset of a
	// partition is the minimum over the phases not being committed.
	first []int64
	// bytes is what the records weigh against the memory bound.
	bytes int64
}

// buffer adds a record to its phase.
func (s *Session[M]) buffer(id uint64, ps *part, msg M, offset int64, out int32, bytes int64) {
	ph := s.phases[id]
	if ph == nil {
		ph = &phase[M]{first: make([]int64, len(s.byP))}
		for i := range ph.first {
			ph.first[i] = -1
		}
		s.phases[id] = ph
	}
	if ph.first[ps.p] < 0 {
		ph.first[ps.p] = offset
	}
	ph.items = append(ph.items, item[M]{msg: msg, p: int32(ps.p), out: out})
	ph.bytes += bytes
}

// commitOffset is the offset to commit for ps: its first buffered record
// in a phase not in skip, else its consumed position.
func (s *Session[M]) commitOffset(ps *part, skip map[uint64]bool) int64 {
	off := ps.next
	for id, ph := range s.phases {
		if skip[id] {
			continue
		}
		if f := ph.first[ps.p]; f >= 0 && f < off {
			off = f
		}
	}
	return off
}
