package proxy

import (
	"strconv"

	"github.com/phasegate/phasegate/watermarks"
)

// pauseReasonBuffer is the tracker's reason for pausing a partition that
// runs too far ahead while the buffer is filling.
const pauseReasonBuffer = watermarks.ReasonBuffer

// quarantineBatch commits quarantined records without waiting for a seal
// once this many are queued.
const quarantineBatch = 1000

// step runs after each batch of records and on every tick: seal what can be
// sealed, commit, apply pause decisions, publish the status.
func (p *Pipeline) step() error {
	g := p.gen
	if g == nil {
		p.publish(nil)
		return nil
	}
	p.peakBuffered = max(p.peakBuffered, g.tracker.BufferedBytes())
	seals := g.tracker.Advance()
	for _, s := range seals {
		g.dedupe.Seal(s.Phase)
	}
	if len(seals) > 0 || p.quarantineDue(g) {
		if err := p.commit(g, seals); err != nil {
			return err
		}
		if p.gen == nil {
			p.publish(nil)
			return nil
		}
	}
	p.applyActions(g)
	p.publish(g)
	return nil
}

// quarantineDue reports whether queued quarantine records should be
// committed now even though no phase sealed.
func (p *Pipeline) quarantineDue(g *generation) bool {
	return len(g.quar) >= quarantineBatch ||
		len(g.quar) > 0 && p.now().Sub(g.quarSince) >= p.cfg.QuarantineDelay
}

// applyActions hands the tracker's pause decisions to the consumer.
func (p *Pipeline) applyActions(g *generation) {
	acts := g.tracker.Actions()
	if len(acts) == 0 {
		return
	}
	pause, resume := map[string][]int32{}, map[string][]int32{}
	for _, a := range acts {
		ps := g.byP[a.P]
		part := strconv.Itoa(int(ps.partition))
		ps.paused = a.Pause
		g.gates[ps.tp].set(a.Pause)
		if a.Pause {
			pause[ps.topic] = append(pause[ps.topic], ps.partition)
			for _, r := range a.Reasons {
				p.metrics.paused.WithLabelValues(ps.topic, part, r).Set(1)
			}
			p.log.Info("partition paused: it runs ahead of the global watermark while the buffer is over half of PHASEGATE_MAX_BUFFER_BYTES; it resumes when the slowest partition catches up",
				"topic", ps.topic, "partition", ps.partition, "reasons", a.Reasons)
		} else {
			resume[ps.topic] = append(resume[ps.topic], ps.partition)
			p.metrics.paused.DeletePartialMatch(map[string]string{"topic": ps.topic, "partition": part})
			p.metrics.paused.WithLabelValues(ps.topic, part, pauseReasonBuffer)
			p.log.Info("partition resumed", "topic", ps.topic, "partition", ps.partition)
		}
	}
	if len(pause) > 0 {
		p.deps.Group.Pause(pause)
	}
	if len(resume) > 0 {
		p.deps.Group.Resume(resume)
	}
}
