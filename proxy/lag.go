package proxy

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
)

// lagReport carries the last stable offsets of the assigned partitions, or
// the error that kept them from being measured.
type lagReport struct {
	lso map[align.TP]int64
	err error
}

// pollLag measures, every LagInterval and at once when partitions are
// assigned (lagNow), the last stable offset of every assigned partition
// (ListOffsets with read_committed: lag against the high watermark
// misleads under transactions) and reports it to the loop. A partition
// that was idle at its committed position is idle again at its first
// measurement (align commitMeta i): measuring at once saves up to a
// LagInterval after every rebalance and restart. A measurement that has
// taken lagOverdue is reported as failed meanwhile.
func (p *Pipeline) pollLag(ctx context.Context) {
	t := time.NewTicker(p.cfg.LagInterval)
	defer t.Stop()
	send := func(r lagReport) bool { // false when ctx ended first
		select {
		case p.lags <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.lagNow:
		}
		parts := p.assigned.Load()
		if parts == nil {
			continue
		}
		res := make(chan lagReport, 1)
		go func() {
			lso, err := lastStableOffsets(p.deps.Client, *parts)
			res <- lagReport{lso: lso, err: err}
		}()
		var r lagReport
		select {
		case r = <-res:
		case <-time.After(lagOverdue):
			// The lag measured before is stale now: the loop treats it
			// as unknown until this measurement ends.
			if !send(lagReport{err: errLagOverdue}) {
				return
			}
			select {
			case r = <-res:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
		if r.err != nil {
			p.log.Debug("lag measurement failed; no partition can be idle until one succeeds", "err", r.err)
			refreshLeaders(p.deps.Client, *parts)
		}
		if !send(r) {
			return
		}
	}
}

// lagOverdue is how long a lag measurement may take before the lag
// measured before it counts as unknown. A ListOffsets is answered at once,
// but one to a broker that stopped answering (paused, cut off) waits out
// the request timeout (10 s), and meanwhile the lag of zero measured
// before the fault let a partition led by that broker go idle at the idle
// timeout: e2e/cluster (c), orders/1 idle 5.3 s after its leader was
// paused, the measurement failing 5.3 s later; records its producer still
// held then belong to phases that may seal without them.
const lagOverdue = 3 * time.Second

// errLagOverdue: a lag measurement took longer than lagOverdue.
var errLagOverdue = errors.New("the lag measurement has taken more than " + lagOverdue.String())

// refreshLeaders asks for the partitions' leaders again after a failed
// measurement. This client does not fetch (the group has its own), so
// nothing else would learn that a leader moved: after a broker restart its
// metadata named the old leader until sarama's 10-minute refresh, every
// measurement failed with NOT_LEADER_OR_FOLLOWER, no partition could go
// idle, and the fleet waited on them (e2e/cluster (a)).
func refreshLeaders(c sarama.Client, parts []align.TP) {
	topics := map[string]bool{}
	for _, k := range parts {
		topics[k.Topic] = true
	}
	_ = c.RefreshMetadata(slices.Collect(maps.Keys(topics))...) // the next measurement says whether it helped
}

// lastStableOffsets asks each partition's leader for its last stable offset.
func lastStableOffsets(c sarama.Client, parts []align.TP) (map[align.TP]int64, error) {
	reqs := map[*sarama.Broker]*sarama.OffsetRequest{}
	for _, k := range parts {
		b, err := c.Leader(k.Topic, k.Partition)
		if err != nil {
			return nil, err
		}
		r := reqs[b]
		if r == nil {
			r = sarama.NewOffsetRequest(c.Config().Version)
			r.IsolationLevel = sarama.ReadCommitted
			reqs[b] = r
		}
		r.AddBlock(k.Topic, k.Partition, sarama.OffsetNewest, 1)
	}
	out := make(map[align.TP]int64, len(parts))
	for b, r := range reqs {
		resp, err := b.GetAvailableOffsets(r)
		if err != nil {
			return nil, err
		}
		for _, k := range parts {
			blk := resp.GetBlock(k.Topic, k.Partition)
			if blk == nil {
				continue
			}
			if blk.Err != sarama.ErrNoError {
				return nil, blk.Err
			}
			if blk.Offset >= 0 {
				out[k] = blk.Offset
			} else if len(blk.Offsets) > 0 {
				out[k] = blk.Offsets[0]
			}
		}
	}
	return out, nil
}

// lag hands a measurement to the session, telling it first which
// partitions have records on their way (a gap to the last stable offset
// that is not control records), and sets the lag gauges.
func (p *Pipeline) lag(r lagReport) {
	if p.gen == nil {
		return
	}
	for k, g := range p.gen.gates {
		if g.delivering() {
			p.gen.s.Delivering(k)
		}
	}
	for k, n := range p.gen.s.Lag(r.lso, r.err) {
		p.metrics.consumerLag.WithLabelValues(k.Topic, partLabel(k.Partition)).Set(float64(n))
	}
}
