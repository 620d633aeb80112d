package proxy

import (
	"context"
	"strconv"
	"time"

	"github.com/IBM/sarama"
)

// lagReport carries the last stable offsets of the assigned partitions, or
// the error that kept them from being measured.
type lagReport struct {
	lso map[tp]int64
	err error
}

// lagState remembers the last measurement of a partition, to tell a gap of
// control records from records still to be delivered.
type lagState struct {
	lso, next int64
	since     time.Time
}

// pollLag measures, every LagInterval, the last stable offset of every
// assigned partition (ListOffsets with read_committed: lag against the high
// watermark misleads under transactions) and reports it to the loop.
func (p *Pipeline) pollLag(ctx context.Context) {
	t := time.NewTicker(p.cfg.LagInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		parts := p.assigned.Load()
		if parts == nil {
			continue
		}
		lso, err := lastStableOffsets(p.deps.Client, *parts)
		if err != nil {
			p.log.Debug("lag measurement failed; no partition can be idle until one succeeds", "err", err)
		}
		select {
		case p.events <- lagReport{lso: lso, err: err}:
		case <-ctx.Done():
			return
		}
	}
}

// lastStableOffsets asks each partition's leader for its last stable offset.
func lastStableOffsets(c sarama.Client, parts []tp) (map[tp]int64, error) {
	reqs := map[*sarama.Broker]*sarama.OffsetRequest{}
	for _, k := range parts {
		b, err := c.Leader(k.topic, k.partition)
		if err != nil {
			return nil, err
		}
		r := reqs[b]
		if r == nil {
			r = sarama.NewOffsetRequest(c.Config().Version)
			r.IsolationLevel = sarama.ReadCommitted
			reqs[b] = r
		}
		r.AddBlock(k.topic, k.partition, sarama.OffsetNewest, 1)
	}
	out := make(map[tp]int64, len(parts))
	for b, r := range reqs {
		resp, err := b.GetAvailableOffsets(r)
		if err != nil {
			return nil, err
		}
		for _, k := range parts {
			blk := resp.GetBlock(k.topic, k.partition)
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

// gapSettle is how long a gap between the consumed position and the last
// stable offset must stay unchanged, on an unpaused partition whose lag is
// measured all along, before it counts as no lag. It is longer than sarama
// takes to resume fetching after a broker comes back (a retry backoff of
// 2 s plus a metadata refresh): a shorter one let partitions go idle right
// after a broker restart while their records were still to be fetched.
const gapSettle = 10 * time.Second

// lag turns a report into the tracker's lag: records between the consumed
// position and the last stable offset. Control records (transaction
// markers) and aborted records also occupy offsets and are never delivered,
// so a gap that a running, unpaused consumer has not closed for gapSettle
// counts as no lag (with transactional inputs a partition is idle up to
// gapSettle later than PHASEGATE_IDLE_TIMEOUT).
func (p *Pipeline) lag(r lagReport) {
	g := p.gen
	if g == nil {
		return
	}
	if r.err != nil {
		// While the brokers cannot be asked, nothing proves a partition has
		// no record to give: its lag is unknown, so it is not idle, and a
		// gap is measured afresh once they answer.
		for _, ps := range g.byP {
			ps.lag = lagState{}
			g.tracker.Lag(ps.p, -1)
		}
		return
	}
	now := p.now()
	for k, lso := range r.lso {
		ps := g.parts[k]
		if ps == nil {
			continue
		}
		lag := max(0, lso-ps.next)
		st := &ps.lag
		if st.lso != lso || st.next != ps.next || ps.paused {
			*st = lagState{lso: lso, next: ps.next, since: now}
		} else if lag > 0 && now.Sub(st.since) >= gapSettle {
			lag = 0
		}
		g.tracker.Lag(ps.p, lag)
		p.metrics.consumerLag.WithLabelValues(ps.topic, strconv.Itoa(int(ps.partition))).Set(float64(max(0, lso-ps.next)))
	}
}
