package txn

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/IBM/sarama"
)

type action int

const (
	actionAbort    action = iota // abort the transaction, keep the producer
	actionRecreate               // close the producer and create a new one
	actionFenced                 // another instance owns the transactional ID: stop
	actionTooLarge               // a record over the size limits: every retry fails, stop
	actionDenied                 // an authorization error: every retry fails, stop
)

// classify is the one place that decides what a Kafka error needs, given
// the producer's transaction status (0 when there is no producer yet).
// Every caller switches on its answer.
func classify(status sarama.ProducerTxnStatusFlag, err error) action {
	switch {
	case isDenied(err):
		return actionDenied
	case isFenced(err):
		return actionFenced
	case errors.Is(err, sarama.ErrMessageSizeTooLarge):
		return actionTooLarge
	case isIndefinite(err):
		return actionRecreate
	}
	switch {
	case status&sarama.ProducerTxnFlagFatalError != 0:
		return actionRecreate
	case status&sarama.ProducerTxnFlagInTransaction != 0,
		status&sarama.ProducerTxnFlagAbortableError != 0:
		return actionAbort
	default:
		// Not in a transaction and not in error: nothing to abort, and
		// nothing proves the producer is sound.
		return actionRecreate
	}
}

// isFenced reports whether err says another instance owns the
// transactional ID. A stale group generation (KIP-447) is not fencing of
// the instance: sarama reports it as abortable, and the rewind rejoins.
func isFenced(err error) bool {
	return errors.Is(err, sarama.ErrProducerFenced) ||
		errors.Is(err, sarama.ErrInvalidProducerEpoch)
}

// isDenied reports an ACL the principal lacks: for its transactional ID,
// a topic it writes, or its consumer group (the offsets committed in the
// transaction).
func isDenied(err error) bool {
	return errors.Is(err, sarama.ErrTransactionalIDAuthorizationFailed) ||
		errors.Is(err, sarama.ErrTopicAuthorizationFailed) ||
		errors.Is(err, sarama.ErrGroupAuthorizationFailed)
}

// denied is ErrNotAuthorized naming the ACL that err, an isDenied error,
// says is missing.
func denied(err error) error {
	grant := "WRITE on the output and quarantine topics (PHASEGATE_OUTPUT_TOPIC, PHASEGATE_QUARANTINE_TOPIC)"
	switch {
	case errors.Is(err, sarama.ErrTransactionalIDAuthorizationFailed):
		grant = "WRITE on its TransactionalId (PHASEGATE_TRANSACTIONAL_ID)"
	case errors.Is(err, sarama.ErrGroupAuthorizationFailed):
		grant = "READ on the consumer group (PHASEGATE_GROUP_ID)"
	}
	return fmt.Errorf("%w: grant this principal %s (docs/SECURITY.md): %v", ErrNotAuthorized, grant, err)
}

// isIndefinite reports errors after which the outcome of an in-flight request
// is unknown: a timeout, a network error, a sequence gap. The producer must be
// recreated (Jepsen's Kafka analysis: a delayed request of the old epoch can
// otherwise land in a later transaction).
func isIndefinite(err error) bool {
	var nerr net.Error
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) ||
		errors.As(err, &nerr) ||
		errors.Is(err, sarama.ErrOutOfOrderSequenceNumber) ||
		errors.Is(err, sarama.ErrRequestTimedOut) ||
		errors.Is(err, sarama.ErrOutOfBrokers) ||
		errors.Is(err, sarama.ErrNotConnected) ||
		errors.Is(err, sarama.ErrUnknownProducerID) ||
		errors.Is(err, sarama.ErrTxnUnableToParseResponse)
}
