package align

import "time"

// gapSettle is how long a gap between the consumed position and the last
// stable offset must stay unchanged, on an unpaused partition whose lag is
// measured all along, before it counts as no lag. It is longer than a
// consumer takes to resume fetching after a broker comes back (sarama: a
// retry backoff of 2 s plus a metadata refresh): a shorter one let
// partitions go idle right after a broker restart while their records were
// still to be fetched.
const gapSettle = 10 * time.Second

// lagState remembers the last measurement of a partition, to tell a gap of
// control records from records still to be delivered.
type lagState struct {
	lso, next int64
	since     time.Time
}

// Lag takes a measurement of the last stable offsets (lso, by partition),
// or the error that kept them from being measured, and returns each
// measured partition's records still to read (lso - consumed position), for
// the consumer lag gauge.
//
// The tracker's lag is that gap, except that control records (transaction
// markers) and aborted records also occupy offsets and are never delivered:
// a gap that an unpaused consumer has not closed for gapSettle counts as no
// lag (with transactional inputs a partition is idle up to gapSettle later
// than the idle timeout). While the brokers cannot be asked (err != nil),
// nothing proves a partition has no record to give: every lag is unknown,
// so no partition is idle, and gaps are measured afresh.
func (s *Session[M]) Lag(lso map[TP]int64, err error) map[TP]int64 {
	if err != nil {
		for _, ps := range s.byP {
			ps.lag = lagState{}
			s.tracker.Lag(ps.p, -1)
		}
		return nil
	}
	now := s.now()
	raw := make(map[TP]int64, len(lso))
	for k, end := range lso {
		ps := s.parts[k]
		if ps == nil {
			continue
		}
		lag := max(0, end-ps.next)
		raw[k] = lag
		if ps.replaying && lag == 0 {
			s.replayed(ps) // the log ends before the old position (truncated)
		}
		st := &ps.lag
		if st.lso != end || st.next != ps.next || ps.paused {
			*st = lagState{lso: end, next: ps.next, since: now}
		} else if lag > 0 && now.Sub(st.since) >= gapSettle {
			lag = 0
		}
		if ps.idleLSO > 0 {
			if end == ps.idleLSO && ps.next == ps.replayBelow {
				lag = 0 // the gap it was idle with at its commit: control records
			}
			ps.idleLSO = 0 // the first measurement only
		}
		s.tracker.Lag(ps.p, lag)
	}
	return raw
}

// Delivering tells the session that records of k are on their way to it
// (the caller holds them upstream, as a claim's queue does): k's gap to its
// last stable offset is records, not control records, so its gap clock
// starts again (gapSettle). A partition starved of the loop's time then
// holds the watermark instead of going idle with lag, which quarantined
// its records as late (e2e P1 under load: 178,535 of 300,000).
func (s *Session[M]) Delivering(k TP) {
	if ps := s.parts[k]; ps != nil {
		ps.lag.since = s.now()
	}
}
