package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// startFleet starts k sidecars of one group, transactional IDs (= static
// instance IDs) <group>-1 .. <group>-k, and waits until they share the
// tasks: each owns at least one and together they own all (or, with more
// instances than tasks, every task is owned). It returns each one's
// environment, for a restart.
func (r *runner) startFleet(ctx context.Context, e sidecarEnv, k, tasks int) ([]*sidecar, []sidecarEnv, error) {
	scs := make([]*sidecar, 0, k)
	envs := make([]sidecarEnv, k)
	for i := range k {
		envs[i] = e
		envs[i].TxnID = fmt.Sprintf("%s-%d", e.Group, i+1)
		sc, err := startSidecar(r.cfg.Sidecar, r.cfg.WorkDir, envs[i])
		if err != nil {
			stopFleet(scs)
			return nil, nil, err
		}
		scs = append(scs, sc)
	}
	if err := waitShared(ctx, scs, tasks); err != nil {
		stopFleet(scs)
		return nil, nil, err
	}
	return scs, envs, nil
}

// stopFleet stops every sidecar (SIGTERM, then SIGKILL after 20 s).
func stopFleet(scs []*sidecar) {
	for _, sc := range scs {
		if sc != nil {
			_ = sc.p.stop(20 * time.Second)
		}
	}
}

// waitShared polls phasegate_tasks_owned until every sidecar owns at
// least one task (when there are as many tasks) and they own tasks in all.
func waitShared(ctx context.Context, scs []*sidecar, tasks int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		sum, each := 0, true
		for _, sc := range scs {
			if sc.p.exited() {
				return fmt.Errorf("sidecar exited before the fleet shared its tasks: %v (log %s)", sc.p.err, sc.p.log.Name())
			}
			m, err := sc.metrics(ctx, "phasegate_tasks_owned")
			if err != nil {
				each = false
				continue
			}
			n := int(m["phasegate_tasks_owned"])
			sum += n
			if n == 0 && len(scs) <= tasks {
				each = false
			}
		}
		if each && sum == tasks {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the %d sidecars did not share the %d tasks (they own %d): %w", len(scs), tasks, sum, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ownedPartitions lists the input partitions the sidecar owns, from
// /phases?partitions=all.
func ownedPartitions(ctx context.Context, sc *sidecar) ([]slot, error) {
	b, err := sc.get(ctx, "/phases?partitions=all")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	out := make([]slot, len(doc.Partitions))
	for i, p := range doc.Partitions {
		out[i] = slot{topic: p.Topic, part: p.Partition}
	}
	return out, nil
}
