package proxy

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/phasegate/phasegate/align"
)

// fakeClaim is one partition's claim: the records given, then open.
type fakeClaim struct {
	tp   align.TP
	msgs chan *sarama.ConsumerMessage
}

func (c *fakeClaim) Topic() string                            { return c.tp.Topic }
func (c *fakeClaim) Partition() int32                         { return c.tp.Partition }
func (c *fakeClaim) InitialOffset() int64                     { return 0 }
func (c *fakeClaim) HighWaterMarkOffset() int64               { return 0 }
func (c *fakeClaim) Messages() <-chan *sarama.ConsumerMessage { return c.msgs }

// pauseCounter is the consumer group as ConsumeClaim uses it: it counts
// the fetch pauses and resumes of the claim.
type pauseCounter struct {
	sarama.ConsumerGroup
	pauses, resumes int
}

func (g *pauseCounter) Pause(map[string][]int32)  { g.pauses++ }
func (g *pauseCounter) Resume(map[string][]int32) { g.resumes++ }

// A partition's records reach the loop in offset order while the
// partition keeps starting and stopping to hold the watermark (hot), the
// loop always taking hot records first; and a claim whose queue holds two
// fetches' worth stops its partition's fetches and resumes them once it
// drains. With the
// channel switched regardless of records still in the other one
// (gate.pending), offsets arrive out of order.
func TestClaimKeepsOrderAcrossHotChanges(t *testing.T) {
	const n = 3000
	tp := align.TP{Topic: "a", Partition: 0}
	group := &pauseCounter{}
	p := &Pipeline{in: make(chan delivery, inCapacity), hot: make(chan delivery, inCapacity), deps: Deps{Group: group}, fetchSize: FetchBytes(0, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gt := newGate(new(atomic.Int32))
	h := &handler{p: p}
	h.gen.Store(&generation{id: 1, ctx: ctx, gates: map[align.TP]*gate{tp: gt}})
	claim := &fakeClaim{tp: tp, msgs: make(chan *sarama.ConsumerMessage, n)}
	for off := range int64(n) {
		claim.msgs <- &sarama.ConsumerMessage{Topic: tp.Topic, Partition: tp.Partition, Offset: off, Value: make([]byte, 1<<10)}
	}
	done := make(chan error, 1)
	go func() { done <- h.ConsumeClaim(nil, claim) }()

	next := int64(0)
	deadline := time.After(10 * time.Second)
	for next < n {
		var d delivery
		select {
		case d = <-p.hot:
		default:
			select {
			case d = <-p.hot:
			case d = <-p.in:
			case <-deadline:
				t.Fatalf("timed out at offset %d of %d", next, n)
			}
		}
		d.gate.taken()
		if d.msg.Offset != next {
			t.Fatalf("offset %d arrived when %d was next: a record overtook an earlier one of its partition", d.msg.Offset, next)
		}
		next++
		if next%37 == 0 {
			gt.setHot(!gt.hot.Load())
			time.Sleep(time.Millisecond) // let both channels fill
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if group.pauses == 0 || group.resumes == 0 {
		t.Errorf("fetches paused %d and resumed %d times with %d KiB queued (limit %d KiB): want both", group.pauses, group.resumes, n, 2*p.fetchSize>>10)
	}
}

// A partition that stops holding the watermark sends nothing more on hot
// than what was on its way (at most one record past those waiting there),
// and one that begins holding while records of it wait on in sends on hot
// only once the loop has taken the last of them, counted in toHot (which
// has the loop read in) until then.
func TestClaimChangesChannelOnlyOnceTheOtherIsEmpty(t *testing.T) {
	const n = 200
	p, gt, toHot, cancel, done := runClaim(n, true)
	defer cancel()
	next := int64(0)
	take := func(lane chan delivery) bool {
		t.Helper()
		select {
		case d := <-lane:
			d.gate.taken()
			if d.msg.Offset != next {
				t.Fatalf("offset %d arrived when %d was next", d.msg.Offset, next)
			}
			next++
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}

	waitFor(t, 5*time.Second, "the hot channel to fill", func() bool { return len(p.hot) == inCapacity })
	for range 10 {
		take(p.hot)
	}
	gt.setHot(false) // it passed the watermark
	onWay := int64(gt.pending.Load())
	fromHot := int64(0)
	for take(p.hot) {
		fromHot++
	}
	if fromHot > onWay+1 {
		t.Errorf("%d records came on hot after the partition stopped holding, with %d on their way", fromHot, onWay)
	}

	waitFor(t, 5*time.Second, "the in channel to fill", func() bool { return len(p.in) == inCapacity })
	gt.setHot(true) // it holds again: the records on in go first
	time.Sleep(20 * time.Millisecond)
	if len(p.hot) != 0 {
		t.Fatalf("%d records on hot while earlier ones wait on in", len(p.hot))
	}
	waitFor(t, 5*time.Second, "toHot to count the claim, whose records wait on in (the loop then reads in)", func() bool { return toHot.Load() == 1 })
	for len(p.in) > 0 {
		take(p.in)
	}
	for next < n {
		if !take(p.hot) {
			t.Fatalf("offset %d did not come on hot", next)
		}
	}
	if got := toHot.Load(); got != 0 {
		t.Errorf("toHot = %d once the claim sends on hot: want 0", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// FetchBytes shares an 8th of the buffer bound out over the input
// partitions (the claims queue up to twice it each), within 16 KiB..1 MiB.
func TestFetchBytes(t *testing.T) {
	for _, c := range []struct {
		bound      int64
		partitions int
		want       int64
	}{
		{bound: 256 << 20, partitions: 5, want: 1 << 20},      // a 64th, capped
		{bound: 16 << 20, partitions: 5, want: 16 << 20 / 80}, // an 8th over 5 partitions, 204.8 KiB
		{bound: 16 << 20, partitions: 4, want: 256 << 10},     // a 64th
		{bound: 256 << 20, partitions: 512, want: 32 << 10},   // 2 x 512 x 32 KiB = an 8th of the bound
		{bound: 256 << 20, partitions: 2048, want: 16 << 10},  // the floor: 64 MiB
		{bound: 8 << 20, partitions: 512, want: 16 << 10},     // e2e P1: the floor
		{bound: 1 << 20, partitions: 1, want: 16 << 10},       // the floor
		{bound: 1 << 40, partitions: 1000, want: 1 << 20},     // the cap
	} {
		if got := FetchBytes(c.bound, c.partitions); got != c.want {
			t.Errorf("FetchBytes(%d MiB, %d partitions) = %d KiB, want %d KiB", c.bound>>20, c.partitions, got>>10, c.want>>10)
		}
	}
}

// detach moves a record's bytes out of the fetch response into a buffer of
// their own: the message reads the same after the response's bytes change,
// null stays null and empty stays empty.
func TestDetach(t *testing.T) {
	raw := []byte("kkvvvhhHH")
	m := &sarama.ConsumerMessage{Key: raw[0:2], Value: raw[2:5], Headers: []*sarama.RecordHeader{
		{Key: raw[5:7], Value: raw[7:9]},
		{Key: raw[0:0], Value: nil},
	}}
	if n := detach(m); n != 9 {
		t.Errorf("detach = %d bytes, want 9", n)
	}
	for i := range raw {
		raw[i] = 'x' // sarama's next use of the response
	}
	if string(m.Key) != "kk" || string(m.Value) != "vvv" || string(m.Headers[0].Key) != "hh" || string(m.Headers[0].Value) != "HH" {
		t.Errorf("after detach and a change of the response: key %q value %q header %q=%q", m.Key, m.Value, m.Headers[0].Key, m.Headers[0].Value)
	}
	if h := m.Headers[1]; h.Key == nil || len(h.Key) != 0 || h.Value != nil {
		t.Errorf("second header: key %#v value %#v, want empty and null", h.Key, h.Value)
	}
	m.Key = append(m.Key, 'z') // the copies hold no spare capacity over each other
	if string(m.Value) != "vvv" {
		t.Errorf("appending to the key changed the value: %q", m.Value)
	}
	null := &sarama.ConsumerMessage{Value: []byte{}}
	if detach(null); null.Key != nil || null.Value == nil {
		t.Errorf("null key %#v, empty value %#v after detach", null.Key, null.Value)
	}
}

// A claim that ends while it waits to send on hot (its records on in not
// yet taken) no longer counts in toHot: a count left behind would have
// the loop read in past the bound for the rest of the generation.
func TestClaimEndingWhileWaitingForHotIsUncounted(t *testing.T) {
	p, gt, toHot, cancel, done := runClaim(2*inCapacity, false)
	defer cancel()
	waitFor(t, 5*time.Second, "the in channel to fill", func() bool { return len(p.in) == inCapacity })
	gt.setHot(true)
	waitFor(t, 5*time.Second, "toHot to count the claim waiting to send on hot", func() bool { return toHot.Load() == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := toHot.Load(); got != 0 {
		t.Errorf("toHot = %d after the claim ended: want 0", got)
	}
}

// runClaim runs ConsumeClaim over n records of one partition (offsets from
// 0), its gate hot or not, counting in toHot; cancel ends the claim, done
// gives its result.
func runClaim(n int, hot bool) (p *Pipeline, gt *gate, toHot *atomic.Int32, cancel context.CancelFunc, done <-chan error) {
	tp := align.TP{Topic: "a", Partition: 0}
	p = &Pipeline{in: make(chan delivery, inCapacity), hot: make(chan delivery, inCapacity), deps: Deps{Group: &pauseCounter{}}, fetchSize: FetchBytes(0, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	toHot = new(atomic.Int32)
	gt = newGate(toHot)
	gt.setHot(hot)
	h := &handler{p: p}
	h.gen.Store(&generation{id: 1, ctx: ctx, gates: map[align.TP]*gate{tp: gt}})
	claim := &fakeClaim{tp: tp, msgs: make(chan *sarama.ConsumerMessage, n)}
	for off := range int64(n) {
		claim.msgs <- &sarama.ConsumerMessage{Topic: tp.Topic, Partition: tp.Partition, Offset: off}
	}
	result := make(chan error, 1)
	go func() { result <- h.ConsumeClaim(nil, claim) }()
	return p, gt, toHot, cancel, result
}

// TestFifo pops in push order through every interleaving of a run of
// pushes and pops, and reuses its array: a queue that empties and one that
// compacts before growing keep a capacity of at most what they ever held.
func TestFifo(t *testing.T) {
	for _, c := range []struct {
		name   string
		pushes []int // pushes before each pop
		maxCap int
	}{
		{"empties after each record", []int{1, 1, 1, 1, 1, 1, 1, 1}, 1},
		{"empties after each burst", []int{4, 0, 0, 0, 4, 0, 0, 0}, 4},
		{"never empties", []int{3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f fifo
			next, want := int64(0), int64(0)
			for _, n := range c.pushes {
				for range n {
					f.push(delivery{size: next})
					next++
				}
				if got := f.pop().size; got != want {
					t.Fatalf("popped record %d, want %d", got, want)
				}
				want++
			}
			for f.len() > 0 {
				if got := f.pop().size; got != want {
					t.Fatalf("popped record %d, want %d", got, want)
				}
				want++
			}
			if want != next {
				t.Fatalf("popped %d records of %d", want, next)
			}
			if cap(f.q) > c.maxCap {
				t.Fatalf("capacity %d after at most %d records held, want at most %d", cap(f.q), c.maxCap, c.maxCap)
			}
		})
	}
}
