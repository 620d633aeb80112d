package topicread

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// batch builds a record batch of n records from offset first.
func batch(first int64, n int, pid int64, txn, control bool, key []byte) *sarama.Records {
	b := &sarama.RecordBatch{FirstOffset: first, LastOffsetDelta: int32(n - 1), ProducerID: pid, IsTransactional: txn, Control: control,
		FirstTimestamp: time.UnixMilli(1000)}
	for i := range n {
		b.Records = append(b.Records, &sarama.Record{OffsetDelta: int64(i), Key: key, Value: []byte{byte(first) + byte(i)}})
	}
	return &sarama.Records{RecordBatch: b}
}

// take hands out only committed data records, moves the position past
// control records and aborted batches, and stops at the range's end.
func TestTakeReadCommitted(t *testing.T) {
	abortKey, commitKey := []byte{0, 0, 0, 0}, []byte{0, 0, 0, 1}
	blk := &sarama.FetchResponseBlock{
		AbortedTransactions: []*sarama.AbortedTransaction{{ProducerID: 7, FirstOffset: 0}},
		RecordsSet: []*sarama.Records{
			batch(0, 2, 7, true, false, nil),        // aborted
			batch(2, 1, 7, true, true, abortKey),    // its abort marker
			batch(3, 2, 8, true, false, nil),        // committed
			batch(5, 1, 8, true, true, commitKey),   // its commit marker
			batch(6, 3, -1, false, false, []byte{}), // plain records, the range ends at 7
		},
	}
	cases := []struct {
		name     string
		start    int64
		end      int64
		want     []int64
		pos      int64
		finished bool
	}{
		{"from the start to offset 7", 0, 7, []int64{3, 4, 6}, 7, true},
		{"from inside a batch", 4, 7, []int64{4, 6}, 7, true},
		{"the last stable offset right after a commit marker", 0, 6, []int64{3, 4}, 6, true},
		{"past the end of the block", 0, 20, []int64{3, 4, 6, 7, 8}, 9, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := &Reader{}
			pp := tr.Add(0, c.start, c.end)
			var got []int64
			if err := tr.take(pp, blk, func(r Record) { got = append(got, r.Offset) }); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) || pp.Pos != c.pos || pp.Done != c.finished {
				t.Fatalf("offsets %v pos %d done %v; want %v pos %d done %v", got, pp.Pos, pp.Done, c.want, c.pos, c.finished)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("offsets %v, want %v", got, c.want)
				}
			}
		})
	}
}
