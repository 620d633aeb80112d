package txn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

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
		{"not authorised for the transactional ID: stop, not fenced", sarama.ErrTransactionalIDAuthorizationFailed, inTxn, actionDenied},
		{"not authorised for a topic it writes: stop", fmt.Errorf("produce: %w", sarama.ErrTopicAuthorizationFailed), inTxn, actionDenied},
		{"not authorised for the group (offsets in the transaction): stop", sarama.ErrGroupAuthorizationFailed, inTxn, actionDenied},
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

// A fenced transaction open at least the transaction timeout names the
// timeout as the likely cause (the broker's old-epoch answer is the same
// for both); a shorter one cannot have timed out and says fenced only.
func TestFencedNamesTheTimeoutOnlyWhenItCouldHaveExpired(t *testing.T) {
	cause := fmt.Errorf("produce: %w", sarama.ErrInvalidProducerEpoch)
	cases := []struct {
		name        string
		open, limit time.Duration
		wantTimeout bool
	}{
		{"open shorter than the timeout: fenced only", 4 * time.Second, 10 * time.Second, false},
		{"open exactly the timeout", 10 * time.Second, 10 * time.Second, true},
		{"open longer than the timeout", 14100 * time.Millisecond, 10 * time.Second, true},
		{"timeout unknown (0): fenced only", time.Minute, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := fenced(cause, c.open, c.limit)
			if !errors.Is(err, ErrFenced) || !errors.Is(err, sarama.ErrInvalidProducerEpoch) {
				t.Fatalf("fenced() = %v: want it to wrap ErrFenced and the broker's error", err)
			}
			named := strings.Contains(err.Error(), "PHASEGATE_TRANSACTION_TIMEOUT="+c.limit.String()) &&
				strings.Contains(err.Error(), "it was open "+c.open.String())
			if named != c.wantTimeout {
				t.Fatalf("fenced(open %s, timeout %s) = %q: names the timeout %t, want %t", c.open, c.limit, err, named, c.wantTimeout)
			}
		})
	}
}

// An authorization error names the one ACL the broker says is missing.
func TestDeniedNamesTheACL(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{sarama.ErrTransactionalIDAuthorizationFailed, "WRITE on its TransactionalId (PHASEGATE_TRANSACTIONAL_ID)"},
		{fmt.Errorf("produce: %w", sarama.ErrTopicAuthorizationFailed), "WRITE on the output and quarantine topics"},
		{sarama.ErrGroupAuthorizationFailed, "READ on the consumer group (PHASEGATE_GROUP_ID)"},
	}
	grants := []string{"TransactionalId", "output and quarantine", "consumer group"}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			err := denied(c.err)
			if !errors.Is(err, ErrNotAuthorized) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.err.Error()) {
				t.Fatalf("denied(%v) = %q: want ErrNotAuthorized, %q and the broker's error", c.err, err, c.want)
			}
			for _, g := range grants {
				if !strings.Contains(c.want, g) && strings.Contains(err.Error(), g) {
					t.Errorf("denied(%v) = %q also names %q", c.err, err, g)
				}
			}
		})
	}
}
