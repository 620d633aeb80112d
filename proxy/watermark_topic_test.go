package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/internal/inproc"
)

// adminFor is a franz-go admin client on the env's cluster.
func adminFor(t *testing.T, e *env) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// FLEET.md: the watermark topic deleted and created again while an
// instance runs. The instance reads it again from the start and reports
// its tasks again within reportRefresh, and phases keep sealing: before,
// the closed partition consumer handed the reader a nil record and the
// process panicked.
func TestWatermarkTopicRecreated(t *testing.T) {
	forks := map[string]int32{"a": 2, "b": 1}
	e := newEnv(t, forks, 2)
	// No partition turns idle while the topic is gone (idle partitions
	// would make the branch read first seal the other's phases: the
	// documented price of idleness, not this test's concern); input
	// markers seal each burst's last phase.
	e.cfg.Watermarks.IdleTimeout = time.Minute
	e.start()
	base := phaseBase()
	want := grid(e, base, 0, 3, forks, 4)
	e.closeAll(forks, phaseOf(at(base, 2, 0)))
	e.settleWhole(want, "the first phases")

	adm := adminFor(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, e.cfg.WatermarkTopic); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let the reader meet the missing topic
	compact := "compact"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, e.cfg.WatermarkTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for phase, m := range grid(e, base, 3, 6, forks, 4) {
		want[phase] = m
	}
	e.closeAll(forks, phaseOf(at(base, 5, 0)))
	e.settleWhole(want, "the watermark topic's deletion")
	waitFor(t, 10*time.Second, "the instance's reports on the new topic", func() bool {
		offs, err := adm.ListEndOffsets(ctx, e.cfg.WatermarkTopic)
		if err != nil {
			return false
		}
		o, ok := offs.Lookup(e.cfg.WatermarkTopic, 0)
		return ok && o.Offset > 0
	})
}

// An existing watermark topic of another shape is refused at the start,
// with an error that names what is wrong and what to do.
func TestWatermarkTopicShapeRefused(t *testing.T) {
	tests := []struct {
		name       string
		partitions int32
		policy     string
		want       string
	}{
		{"two partitions", 2, "compact", "has 2 partitions"},
		{"delete policy", 1, "delete", "cleanup.policy=delete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, map[string]int32{"a": 1}, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := adminFor(t, e).CreateTopic(ctx, tt.partitions, 1, map[string]*string{"cleanup.policy": &tt.policy}, e.cfg.WatermarkTopic)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := inproc.StartSidecar(inproc.KafkaFor(e.brokers), e.cfg, e.logger())
			if err == nil {
				_ = s.Stop()
				t.Fatal("the sidecar started on a watermark topic of another shape")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "PHASEGATE_WATERMARK_TOPIC") {
				t.Fatalf("error %q does not say %q and what to do", err, tt.want)
			}
		})
	}
}
