package txn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/IBM/sarama"
)

func TestClassify(t *testing.T) {
	inTxn := sarama.ProducerTxnFlagInTransaction
	cases := []struct {
		name   string
		err    error
		status sarama.ProducerTxnStatusFlag
		want   action
	}{
		{"fenced by a newer producer: stop", fmt.Errorf("commit: %w", sarama.ErrProducerFenced), inTxn, actionFenced},
		{"old epoch (fenced, or timed out and bumped): stop", sarama.ErrInvalidProducerEpoch, sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagFatalError, actionFenced},
		{"not authorised for the transactional ID: stop", sarama.ErrTransactionalIDAuthorizationFailed, inTxn, actionFenced},
		{"fenced at start (no producer yet)", sarama.ErrProducerFenced, 0, actionFenced},
		{"record over the size limit: every retry fails, stop", sarama.ErrMessageSizeTooLarge, sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagAbortableError, actionTooLarge},
		{"request timed out: outcome unknown, recreate", sarama.ErrRequestTimedOut, inTxn, actionRecreate},
		{"network error: recreate", &net.OpError{Op: "read", Err: errors.New("connection reset")}, inTxn, actionRecreate},
		{"out-of-order sequence: recreate", sarama.ErrOutOfOrderSequenceNumber, sarama.ProducerTxnFlagAbortableError, actionRecreate},
		{"our own deadline: recreate", context.DeadlineExceeded, inTxn, actionRecreate},
		{"fatal status: recreate", errors.New("something"), sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagFatalError, actionRecreate},
		{"abortable status: abort", sarama.ErrIllegalGeneration, sarama.ProducerTxnFlagInError | sarama.ProducerTxnFlagAbortableError, actionAbort},
		{"failure inside a transaction: abort", sarama.ErrNotEnoughReplicas, inTxn, actionAbort},
		{"no transaction and no error state: recreate", errors.New("begin: odd"), sarama.ProducerTxnFlagReady, actionRecreate},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := classify(c.status, c.err); got != c.want {
				t.Fatalf("classify = %d, want %d", got, c.want)
			}
		})
	}
}

func TestCommitRefusesAnEmptyBatch(t *testing.T) {
	p := &Producer{}
	if err := p.Commit(context.Background(), Batch{}); !errors.Is(err, ErrEmptyBatch) {
		t.Fatalf("Commit(empty) = %v, want ErrEmptyBatch", err)
	}
}
