package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/phasegate/phasegate/align"
	"github.com/phasegate/phasegate/internal/inproc"
	"github.com/phasegate/phasegate/internal/kafkatest"
	"github.com/phasegate/phasegate/markers"
)

// MARKERS.md 3.3: W never changes on a partition. An output topic whose
// last markers say another number of writers than the instance's layout
// gives is refused at the start, with an error that names the fix (a new
// output topic); one written with the same number is taken up. Before,
// the instance wrote markers the readers drop as malformed (M1, M2).
func TestOutputWritersChecked(t *testing.T) {
	marker := func(p int32, phase uint64, task, writers int32) *kgo.Record {
		m := markers.Marker{Phase: phase, Partition: p, HasCount: true, Sources: map[string]int64{}, SealedBy: markers.SealedByWatermark,
			Emitter: "phasegate-old", Task: task, Writers: writers}
		return &kgo.Record{Topic: "out", Partition: p, Value: m.AppendOutput(nil),
			Headers: kafkatest.Headers(markers.AppendMarkerHeaders[markers.Header](nil, markers.AppendPhase(nil, phase)))}
	}
	data := func(p int32, phase uint64) *kgo.Record {
		return &kgo.Record{Topic: "out", Partition: p, Value: []byte("v"),
			Headers: kafkatest.Headers(markers.AppendDataHeaders[markers.Header](nil, markers.DataHeaders{}, markers.AppendPhase(nil, phase), []byte("a/0/0"), nil))}
	}
	tests := []struct {
		name    string
		tasks   int32 // PHASEGATE_TASKS with key routing
		written []*kgo.Record
		refused bool
	}{
		{"one writer, then three", 3, []*kgo.Record{data(0, 5), marker(0, 5, 0, 0), marker(1, 5, 0, 0)}, true},
		{"three writers, then two", 2, []*kgo.Record{marker(0, 5, 0, 3), marker(0, 5, 1, 3), marker(0, 5, 2, 3), data(1, 6)}, true},
		{"the last marker decides, data after it does not", 1, []*kgo.Record{marker(0, 5, 0, 0), data(0, 6)}, false},
		{"three writers, then three", 3, []*kgo.Record{marker(0, 5, 0, 3), marker(1, 5, 1, 3)}, false},
		{"an empty output", 3, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, map[string]int32{"a": 3}, 2)
			e.cfg.Routing, e.cfg.Tasks = align.RouteKey, tt.tasks
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := e.prod.Produce(ctx, tt.written...); err != nil {
				t.Fatal(err)
			}
			s, err := inproc.StartSidecar(inproc.KafkaFor(e.brokers), e.cfg, e.logger())
			if err == nil {
				if stop := s.Stop(); stop != nil {
					t.Fatalf("the sidecar stopped with %v", stop)
				}
			}
			switch {
			case tt.refused && err == nil:
				t.Fatal("the sidecar started on an output written with another number of writers")
			case tt.refused && !strings.Contains(err.Error(), "new output topic"):
				t.Fatalf("error %q does not name the fix", err)
			case !tt.refused && err != nil:
				t.Fatalf("the sidecar refused: %v", err)
			}
		})
	}
}
