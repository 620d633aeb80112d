package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// Sentinel errors of Commit.
var (
	// ErrFenced means another producer with the same transactional ID (or a
	// newer consumer group generation) took over. The instance must stop.
	ErrFenced = errors.New("txn: fenced: another instance with the same transactional ID took over")
	// ErrEmptyBatch means Commit was called without a record.
	ErrEmptyBatch = errors.New("txn: a transaction needs at least one record")
	// ErrClosed means Commit was called after Close.
	ErrClosed = errors.New("txn: producer closed")
	// ErrNotAuthorized means the principal lacks an ACL the transaction
	// needs: every retry would fail the same way. The error wrapping it
	// names the ACL (denied).
	ErrNotAuthorized = errors.New("txn: not authorized")
	// ErrTooLarge means a record or batch is over the producer's or the
	// broker's size limit: every retry would fail the same way.
	ErrTooLarge = errors.New("txn: a record is larger than PHASEGATE_MAX_RECORD_BYTES or the broker's message.max.bytes / the topic's max.message.bytes allow: raise them together")
)

// Batch is one transaction: records in the order they must be written, then
// the input offsets to commit with the group's metadata.
type Batch struct {
	Records Records
	// Offsets to commit, by topic: the next offset to consume and its metadata.
	Offsets map[string][]*sarama.PartitionOffsetMetadata
	Group   *sarama.ConsumerGroupMetadata
}

// Records are the records of a write, in order, each built when the
// producer takes it: the producer holds only those in flight, never a
// whole batch as sarama messages (a 1 s phase of 100 B records is about
// 340,000 of them, 90 MB the garbage collector would scan on every cycle
// while they wait).
type Records struct {
	Len int
	// At builds record i (0 <= i < Len); it is called once per record, in
	// order, on the caller's goroutine.
	At func(i int) *sarama.ProducerMessage
}

// Failure is returned by Commit when a transaction did not commit and the
// producer was repaired: Recreated tells whether a new producer replaced the
// old one. Nothing of the batch is visible to read_committed readers; the
// caller rewinds to the committed offsets.
type Failure struct {
	Err       error
	Recreated bool
}

func (f *Failure) Error() string {
	if f.Recreated {
		return fmt.Sprintf("txn: transaction failed, producer recreated: %v", f.Err)
	}
	return fmt.Sprintf("txn: transaction aborted: %v", f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// Factory creates a transactional producer. New calls it once, and again for
// every recreation.
type Factory func() (sarama.AsyncProducer, error)

// Producer is the pipeline's transactional producer. It is not safe for
// concurrent use.
type Producer struct {
	newProducer Factory
	timeout     time.Duration // the transaction timeout the factory's producers ask for
	log         *slog.Logger
	metrics     *Metrics

	slowWarned time.Time // the last warning of a slow transaction (slowWarnEvery)
	// began is when the open transaction began (Stream or Commit); zero
	// while none is open.
	began time.Time

	mu     sync.Mutex // mu guards p and closed against a concurrent Close
	p      sarama.AsyncProducer
	closed bool
}

// New creates the producer (sarama runs InitProducerId here, which also
// completes or aborts a transaction the previous owner of the transactional
// ID left open). timeout is the transaction timeout the factory's producers
// ask for (sarama's Producer.Transaction.Timeout): a fenced transaction
// open longer than that was most likely aborted by the broker for it, and
// the error says so.
func New(f Factory, timeout time.Duration, log *slog.Logger, m *Metrics) (*Producer, error) {
	p, err := f()
	if err != nil {
		return nil, classifyStart(err)
	}
	return &Producer{newProducer: f, timeout: timeout, log: log, metrics: m, p: p}, nil
}

// Timeout is the transaction timeout the producers ask for (New's
// timeout): the broker aborts a transaction open longer.
func (p *Producer) Timeout() time.Duration { return p.timeout }

// classifyStart turns a failed producer creation into ErrFenced when the
// broker says another instance owns the ID.
func classifyStart(err error) error {
	switch classify(0, err) {
	case actionFenced:
		return fmt.Errorf("%w: %v", ErrFenced, err)
	case actionDenied:
		return denied(err)
	}
	return fmt.Errorf("txn: create transactional producer: %w", err)
}

// slowWarnEvery spaces the warnings of transactions slower than half the
// transaction timeout.
const slowWarnEvery = 10 * time.Second

// Commit writes b into the open transaction (beginning one when Stream
// has not) and commits it. It returns nil when the transaction committed,
// an error wrapping ErrFenced when the instance must stop, and a *Failure
// otherwise (the transaction, streamed records included, is not visible;
// the producer is usable again).
func (p *Producer) Commit(ctx context.Context, b Batch) error {
	if b.Records.Len == 0 && p.began.IsZero() {
		return ErrEmptyBatch
	}
	prod, err := p.current()
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err = p.begin(prod); err == nil {
		err = send(ctx, prod, b.Records)
	}
	t1 := time.Now()
	if err == nil && len(b.Offsets) > 0 {
		if err = prod.AddOffsetsToTxnWithGroupMetadata(b.Offsets, b.Group); err != nil {
			err = fmt.Errorf("add offsets: %w", err)
		}
	}
	t2 := time.Now()
	if err == nil {
		if err = prod.CommitTxn(); err != nil {
			err = fmt.Errorf("commit: %w", err)
		}
	}
	if err != nil {
		return p.recover(prod, err)
	}
	d := time.Since(p.began)
	p.log.Debug("transaction committed", "records", b.Records.Len, "took", d, "send", t1.Sub(t0), "offsets", t2.Sub(t1), "commit", time.Since(t2))
	p.began = time.Time{}
	p.metrics.observe(resultCommitted, d)
	if p.timeout > 0 && d > p.timeout/2 && time.Since(p.slowWarned) >= slowWarnEvery {
		p.slowWarned = time.Now()
		p.log.Warn("a transaction took more than half the transaction timeout; one twice as slow would be aborted by the broker (raise PHASEGATE_TRANSACTION_TIMEOUT, below PHASEGATE_SESSION_TIMEOUT, if this recurs)",
			"took", d.Round(time.Millisecond), "transaction_timeout", p.timeout, "records", b.Records.Len)
	}
	return nil
}

// Stream writes records into the open transaction, beginning one when none
// is open, waits until each is acknowledged, and leaves the transaction
// open: nothing of it is visible until Commit, and Abort drops it. Errors
// are Commit's (after a *Failure no transaction is open).
func (p *Producer) Stream(ctx context.Context, records Records) error {
	prod, err := p.current()
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err = p.begin(prod); err == nil {
		err = send(ctx, prod, records)
	}
	if err != nil {
		return p.recover(prod, err)
	}
	p.log.Debug("records streamed into the open transaction", "records", records.Len, "took", time.Since(t0))
	return nil
}

// Abort aborts the open transaction, if any: what Stream wrote is never
// visible. It returns nil, an error wrapping ErrFenced, or a *Failure
// (the producer was recreated: the transaction is aborted either way).
func (p *Producer) Abort() error {
	if p.began.IsZero() {
		return nil
	}
	prod, err := p.current()
	if err != nil {
		return err
	}
	if err := prod.AbortTxn(); err != nil {
		return p.recover(prod, fmt.Errorf("abort: %w", err))
	}
	p.metrics.observe(resultAborted, time.Since(p.began))
	p.began = time.Time{}
	return nil
}

// begin begins a transaction on prod unless one is open.
func (p *Producer) begin(prod sarama.AsyncProducer) error {
	if !p.began.IsZero() {
		return nil
	}
	p.began = time.Now()
	if err := prod.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	return nil
}

// send writes records in order and waits until each is acknowledged or failed.
func send(ctx context.Context, prod sarama.AsyncProducer, records Records) error {
	if records.Len == 0 {
		return nil
	}
	results := make(chan error, 1)
	go func() {
		var first error
		for range records.Len {
			select {
			case <-prod.Successes():
			case perr, ok := <-prod.Errors():
				if ok && first == nil {
					first = perr.Err
				}
			}
		}
		results <- first
	}()
	for i := range records.Len {
		prod.Input() <- records.At(i)
	}
	select {
	case err := <-results:
		if err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		return nil
	case <-ctx.Done():
		// The producer keeps delivering; the acknowledgements are drained by
		// the goroutine above before recreation closes the producer.
		return fmt.Errorf("produce: %w", ctx.Err())
	}
}

// recover decides what a failed transaction needs: abort, recreate, or
// stop. Afterwards no transaction is open.
func (p *Producer) recover(prod sarama.AsyncProducer, err error) error {
	start := p.began
	p.began = time.Time{}
	switch classify(prod.TxnStatus(), err) {
	case actionTooLarge:
		_ = prod.AbortTxn()
		p.metrics.observe(resultAborted, time.Since(start))
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	case actionDenied:
		_ = prod.AbortTxn()
		p.metrics.observe(resultAborted, time.Since(start))
		return denied(err)
	case actionFenced:
		p.metrics.observe(resultFenced, time.Since(start))
		return fenced(err, time.Since(start), p.timeout)
	case actionAbort:
		aerr := prod.AbortTxn()
		if aerr == nil {
			p.metrics.observe(resultAborted, time.Since(start))
			p.log.Warn("transaction aborted; rewinding to the committed offsets", "err", err)
			return &Failure{Err: err}
		}
		if classify(prod.TxnStatus(), aerr) == actionFenced {
			p.metrics.observe(resultFenced, time.Since(start))
			return fenced(aerr, time.Since(start), p.timeout)
		}
		err = fmt.Errorf("%w (abort failed: %v)", err, aerr)
	}
	p.metrics.observe(resultFailed, time.Since(start))
	if rerr := p.recreate(prod); rerr != nil {
		return rerr
	}
	p.log.Warn("transaction failed; producer recreated with a new epoch, rewinding to the committed offsets", "err", err)
	return &Failure{Err: err, Recreated: true}
}

// fenced is the error of a fenced transaction that was open for open. The
// broker answers with the same old-epoch error when another instance took
// over and when it aborted the transaction for outliving the transaction
// timeout (it bumps the epoch either way), so a transaction open at least
// that long names the timeout too: on fresh output partitions a first
// transaction was measured at 5.8-19.7 s (README, "Performance").
func fenced(err error, open, timeout time.Duration) error {
	if timeout <= 0 || open < timeout {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return fmt.Errorf("%w, or the broker aborted the transaction: it was open %s, past the transaction timeout (PHASEGATE_TRANSACTION_TIMEOUT=%s); "+
		"if no other instance uses this transactional ID, raise PHASEGATE_TRANSACTION_TIMEOUT (below PHASEGATE_SESSION_TIMEOUT): %w",
		ErrFenced, open.Round(time.Millisecond), timeout, err)
}

// current returns the producer, creating it when a recreation failed
// before (the broker was unreachable): a *Failure when that fails again.
func (p *Producer) current() (sarama.AsyncProducer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if p.p != nil {
		return p.p, nil
	}
	next, err := p.newProducer()
	if err != nil {
		if err := classifyStart(err); errors.Is(err, ErrFenced) || errors.Is(err, ErrNotAuthorized) {
			return nil, err
		}
		return nil, &Failure{Err: fmt.Errorf("create transactional producer: %w", err), Recreated: true}
	}
	p.p = next
	return next, nil
}

// recreate closes prod and creates a new producer (InitProducerId bumps the
// epoch, so a delayed request of the old one cannot land in a later
// transaction). When the new one cannot be created yet, the next Commit
// tries again before it writes anything.
func (p *Producer) recreate(prod sarama.AsyncProducer) error {
	_ = prod.Close()
	p.mu.Lock()
	if p.p == prod {
		p.p = nil
	}
	p.mu.Unlock()
	p.metrics.recreations.Inc()
	if _, err := p.current(); err != nil {
		var f *Failure
		if errors.As(err, &f) {
			p.log.Warn("cannot create a new transactional producer yet; the next transaction tries again", "err", f.Err)
			return nil
		}
		return err
	}
	return nil
}

// Close aborts nothing (an open transaction times out or is aborted by the
// next owner's InitProducerId) and closes the producer. Safe to call twice.
func (p *Producer) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.p == nil {
		return nil
	}
	return p.p.Close()
}
