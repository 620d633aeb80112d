package proxy

import (
	"fmt"
	"time"

	"github.com/phasegate/phasegate/align"
)

// step runs after every event of the loop, those of records and watermark
// reports at most once per stepGap, and on every tick: the session
// decides (seals, pauses, idleness); the pipeline commits the Batch,
// applies the pauses to the consumers and turns each transition into its
// metric and log line, then publishes the status. The Batch goes to the
// committer; step does not wait for it.
func (p *Pipeline) step() {
	g := p.gen
	if g == nil {
		p.publish(nil)
		return
	}
	p.peakBuffered = max(p.peakBuffered, g.s.BufferedBytes())
	p.stepSession(g)
	// The session's new watermark, shared with the fleet, may raise the
	// cap: seal what it allows now rather than one tick later.
	if p.share(g) {
		p.stepSession(g)
	}
	p.transitions.flush(p.log, p.now(), false)
	p.publish(g)
}

// stepSession runs one Step of the session and acts on it.
func (p *Pipeline) stepSession(g *generation) {
	st := g.s.Step()
	if st.Batch != nil {
		p.startCommit(g, st.Batch)
	}
	if f := st.Fallback; f != nil {
		p.fellBack(f)
	}
	p.apply(g, st.Actions, st.Holds)
	for _, c := range st.Idle {
		p.metrics.idle.WithLabelValues(c.Topic, partLabel(c.Partition)).Set(b2f(c.Idle))
		if c.Idle {
			p.transitions.add(p.log, tIdle, c.TP, "watermark_phase", c.Watermark)
		} else {
			p.transitions.add(p.log, tLive, c.TP)
		}
	}
	if st.Timeouts > 0 {
		p.sealTimedOut(g, st.Timeouts)
	}
}

// apply hands the session's pause decisions and the partitions holding
// the watermark to the claims' gates (a claim pauses and resumes its own
// fetches: ConsumeClaim).
func (p *Pipeline) apply(g *generation, acts []align.Action, holds []align.HoldChange) {
	for _, c := range holds {
		g.gates[c.TP].setHot(c.Holds)
	}
	for _, a := range acts {
		part := partLabel(a.Partition)
		g.gates[a.TP].set(a.Pause)
		if a.Pause {
			for _, r := range a.Reasons {
				p.metrics.paused.WithLabelValues(a.Topic, part, r).Set(1)
			}
			p.transitions.add(p.log, tPaused, a.TP, "reasons", a.Reasons)
		} else {
			p.metrics.initPaused(a.TP)
			p.metrics.pausedSeconds.WithLabelValues(a.Topic, part).Add(a.Paused.Seconds())
			p.transitions.add(p.log, tResumed, a.TP, "paused_for", a.Paused)
		}
	}
}

// sealTimedOut counts phases that outlived the seal timeout and says which
// partition holds them.
func (p *Pipeline) sealTimedOut(g *generation, n int64) {
	p.metrics.sealTimeouts.Add(float64(n))
	v := g.s.View()
	var held []string
	for _, i := range align.Holders(v.Partitions) {
		h := v.Partitions[i]
		held = append(held, fmt.Sprintf("%s/%d (lag %d)", h.Topic, h.Partition, h.Lag))
	}
	args := []any{"seal_timeout", v.SealTimeout, "policy", p.cfg.Watermarks.SealPolicy, "held_by", held}
	p.log.Warn("a phase stayed open longer than the seal timeout: the partition holding the global watermark has not passed it; check that partition's producer, or set PHASEGATE_SEAL_POLICY=seal to seal such phases anyway (sealed_by timeout)", args...)
}

// fellBack counts a phase that stopped streaming and says which
// partitions held it (at most one line per 10 s).
func (p *Pipeline) fellBack(f *align.Fallback) {
	p.metrics.streamFallbacks.Inc()
	if !p.limiter.allow("stream-fallback", p.now()) {
		return
	}
	held := make([]string, 0, min(len(f.Holders), transitionNames))
	for _, k := range f.Holders[:min(len(f.Holders), transitionNames)] {
		held = append(held, k.String())
	}
	p.log.Warn("a phase streamed into its transaction for longer than a quarter of PHASEGATE_TRANSACTION_TIMEOUT without sealing: the transaction is aborted and the phase is written whole at its seal; check the partitions holding the watermark",
		"phase", f.Phase, "streamed_records", f.Streamed, "open", f.Open.Round(time.Millisecond), "held_by", held, "holders", len(f.Holders))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
