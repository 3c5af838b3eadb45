package forward

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/enum"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// Deps are what a forwarder moves messages between.
type Deps struct {
	Reader      isb.Reader
	Transformer udf.Mapper // optional: the source transformer
	Mapper      udf.Mapper // optional: the UDF
	Sink        isb.Writer
	Fallback    isb.Writer // optional: where failed or FALLBACK messages go
	// OnSuccess is optional: where the messages the sink answers ON_SUCCESS
	// (isb.ErrOnSuccess) go; without it they count as written.
	OnSuccess isb.Writer
	// Bypass, optional, sends messages straight to a sink by their tags.
	Bypass  *Bypass
	Metrics *Metrics
	Tracker *Tracker
	Logger  *zap.Logger
	Tracer  trace.Tracer // optional
	// Throttle is everything that throttles the forwarder: its limits, the
	// cost of a message, the per-key limit, and where throttle signals and
	// what the sink accepted go. nil throttles nothing.
	Throttle *throttle.Throttle
}

// OnFailure is what a forwarder does with messages its sink keeps failing
// (a sink's retryStrategy.onFailure). The zero value is [Retry].
type OnFailure uint8

const (
	// Retry retries until the sink takes them (or shutdown's deadline).
	Retry OnFailure = iota
	// Fallback writes them to the fallback sink after Steps attempts.
	Fallback
	// Drop drops them after Steps attempts.
	Drop
)

var onFailureNames = [...]string{Retry: "retry", Fallback: "fallback", Drop: "drop"}

// String returns the YAML name: retry, fallback or drop.
func (f OnFailure) String() string { return enum.Name(onFailureNames[:], f, "OnFailure") }

// UnmarshalText parses retry, fallback or drop, and rejects any other name.
func (f *OnFailure) UnmarshalText(b []byte) error {
	return enum.Parse(f, onFailureNames[:], b, "onFailure")
}

// Options tune a forwarder.
type Options struct {
	// BatchSize is the most messages read per iteration (readBatchSize).
	BatchSize int
	// ExcludeDropped gives the tokens of messages the UDF dropped back to the
	// limiter, so that only messages that reach the sink count against the limit.
	ExcludeDropped bool
	// Retry is how sink writes are retried.
	Retry RetryPolicy
	// TransformRetry and MapRetry are how the inputs the transformer and the
	// map fail (udf.Failed) are retried: OnFailure Retry or Drop.
	TransformRetry, MapRetry RetryPolicy
	// ShutdownTimeout is how long the iteration in flight may take to finish once
	// Run's context is done.
	ShutdownTimeout time.Duration
	// MaxIdlePause caps the pause between the reads of a dry reader, one whose
	// reads return no message and no error (default DefaultMaxIdlePause). The
	// pause is 1ms after the first empty read, doubles with each further one up
	// to MaxIdlePause, counts from the start of the read, and ends at once when
	// Run's context is done; a read that returns messages resets it, so the
	// reads of a source with data are never delayed. A vertex sets it to its
	// readTimeout when that is shorter.
	MaxIdlePause time.Duration
	// Clock times the pauses of a dry reader and the waits before retries
	// (default: the wall clock).
	Clock clock.Clock

	// Concurrency is the most messages in flight, read and not yet acked
	// (limits.concurrency; default BatchSize). Without Streaming a read takes
	// at most the smaller of BatchSize and Concurrency.
	Concurrency int
	// Streaming (a MonoVertex's spec.streaming) reads on while earlier
	// messages are mapped, written and acked: up to Concurrency messages are
	// in flight, in batches of at most BatchSize that are mapped at once by
	// forks of the functions (udf.Forker), written to the sink one batch at a
	// time in the order they are ready, and acked as they are written, so
	// out of the order they were read. A new batch is read as soon as a slot
	// frees up.
	Streaming bool
	// ReadAhead (NUMAFLOW_READ_AHEAD) reads the next batch while the current
	// one is mapped and written: two batches in flight, written and acked in
	// the order they were read. Streaming overrides it.
	ReadAhead bool
	// Ordered (a vertex's ordered processing) forwards one message at a
	// time, in the order read: the next is read only once the last is
	// written and acked. It sets Concurrency to 1 and turns Streaming and
	// ReadAhead off. A message a function or the sink nacks is delivered
	// again by the forwarder itself, after the nack's delay, before any
	// later one is read; retries of a write hold the next message likewise.
	Ordered bool
}

// Forwarder runs the forward loop of one vertex replica: acquire tokens, read at
// most that many messages, give back the unused tokens, transform and map them,
// write them to the sink (or the fallback sink) and ack them once written. By
// default it does one batch at a time; with Options.Streaming or
// Options.ReadAhead the stages overlap (see Options).
type Forwarder struct {
	d    Deps
	th   *throttle.Throttle // d.Throttle, with the forwarder's tracker, metrics, logger and clock
	opts Options
	log  *zap.Logger
	idle idle
	// nacker and optsNacker are the reader, when it can take messages back
	// (with the options of a nack); nil otherwise.
	nacker     isb.Nacker
	optsNacker isb.OptionsNacker
	// keys holds the messages over their key's limit (throttle.Hold); nil
	// without a per-key limit.
	keys *throttle.Hold
	// nackKeys hands held messages back to the reader; nil when it cannot
	// take them.
	nackKeys throttle.NackFunc

	// writeMu makes one write to the sinks at a time, and ackMu one ack or nack
	// of the reader, when batches are in flight at once.
	writeMu, ackMu sync.Mutex
	nackLog        atomic.Bool
	// onSuccessLog is set once ON_SUCCESS without an on-success sink is logged.
	onSuccessLog atomic.Bool
}

// worker moves batches through the functions and to the sinks. The
// sequential loop has one; a pipelined forwarder has one per batch that may
// be in flight at once, each with functions of its own.
type worker struct {
	*Forwarder
	transformer, mapper udf.Mapper

	// Buffers reused by every batch.
	read     []isb.ReadMessage
	in, mid  []isb.Message
	out      []isb.Message
	errs     []error
	failed   []isb.Message
	tries    []int // tries[i]: the failed attempts of failed[i] that count as retry steps
	fallback []isb.Message
	// onSuccess are the messages of the batch in progress for the
	// on-success sink.
	onSuccess []isb.Message
	// bySink, byFallback and byOnSuccess are the messages of the batch in
	// progress that Bypass sends to each sink.
	bySink, byFallback, byOnSuccess []isb.Message
	// rejectDrops counts the messages of the batch in progress that the sink
	// rejected and OnFailure dropped, and rejectErr is the first one's error.
	rejectDrops int
	rejectErr   error
	// nacks[i] is set when batch[i] of the batch in progress was nacked.
	nacks  []*isb.NackOptions
	nacked int // how many of nacks are set
	// tok is the tokens of the batch in progress (throttle.Tokens): what
	// it is written on and what it paid after its read. gone marks the
	// messages of the batch that go on.
	tok  throttle.Tokens
	gone []bool
}

// New returns a forwarder. Deps.Reader, Deps.Sink, Deps.Metrics and Deps.Tracker are
// required.
func New(d Deps, opts Options) (*Forwarder, error) {
	if d.Reader == nil || d.Sink == nil || d.Metrics == nil || d.Tracker == nil {
		return nil, errors.New("forward: Reader, Sink, Metrics and Tracker are required")
	}
	if opts.BatchSize < 1 {
		return nil, fmt.Errorf("forward: BatchSize (%d) must be at least 1", opts.BatchSize)
	}
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	opts.Retry, opts.TransformRetry, opts.MapRetry = opts.Retry.normal(), opts.TransformRetry.normal(), opts.MapRetry.normal()
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	if opts.MaxIdlePause <= 0 {
		opts.MaxIdlePause = DefaultMaxIdlePause
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Concurrency < 1 {
		opts.Concurrency = opts.BatchSize
	}
	if opts.Ordered {
		opts.Concurrency, opts.Streaming, opts.ReadAhead = 1, false, false
	}
	f := &Forwarder{d: d, opts: opts, log: d.Logger, idle: newIdle(opts.Clock, opts.MaxIdlePause)}
	m := d.Metrics
	f.th = d.Throttle.With(throttle.Env{Pauses: d.Tracker, Logger: d.Logger, Clock: opts.Clock,
		Metrics: throttle.Metrics{Granted: m.Granted, Deposited: m.Deposited, Retaken: m.Retaken,
			Bytes: m.Bytes, BytesDeposited: m.BytesDeposited, CostErrors: m.Errors.WithLabelValues(StageCost)}})
	f.nacker, _ = d.Reader.(isb.Nacker)
	f.optsNacker, _ = d.Reader.(isb.OptionsNacker)
	if f.keys = f.th.NewHold(opts.BatchSize, f.readSize()); f.nacker != nil {
		f.nackKeys = f.nackHeld
	}
	if opts.Ordered && f.keys != nil {
		return nil, errors.New("forward: Ordered with a per-key limit: held keys would be overtaken by later messages")
	}
	return f, nil
}

// Run forwards until ctx is done, then finishes the iteration in flight (write and
// ack) within the shutdown timeout, and returns. It returns an error only when the
// forwarder cannot go on, such as a closed limiter.
func (f *Forwarder) Run(ctx context.Context) error {
	// The tokens of a read are always taken before it and its unused ones given
	// back at once, by the one goroutine that reads, so the limit holds the same
	// however many batches are in flight.
	// hard is done ShutdownTimeout after ctx: the in-flight iteration uses it to
	// finish its writes and acks after reads have stopped.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	var mu sync.Mutex
	var grace *time.Timer
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		grace = time.AfterFunc(f.opts.ShutdownTimeout, cancelHard)
	})
	defer func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		if grace != nil {
			grace.Stop()
		}
	}()

	err := f.run(ctx, hard)
	if f.keys != nil {
		f.releaseHeld(hard)
	}
	if err != nil {
		return err
	}
	if hard.Err() != nil {
		f.log.Warn("shutdown timeout passed before the last batch was acked", zap.Duration("timeout", f.opts.ShutdownTimeout))
	}
	return nil
}

// readSize is the most messages one read takes.
func (f *Forwarder) readSize() int { return min(f.opts.BatchSize, f.opts.Concurrency) }

func (f *Forwarder) newWorker(transformer, mapper udf.Mapper) *worker {
	return &worker{Forwarder: f, transformer: transformer, mapper: mapper}
}

// forward processes, writes and acks batch, read at start and sent on with
// tok. With turns, it writes and acks when turn seq comes, after the batches
// read before it. It abandons the batch when hard ends first.
func (f *worker) forward(hard context.Context, tok throttle.Tokens, batch []isb.ReadMessage, start time.Time, t *turns, seq uint64) {
	f.tok = tok
	defer func() { f.tok = throttle.Tokens{} }()
	if f.d.Tracer != nil {
		// A span per batch, from the start of its read; empty reads make none.
		var span trace.Span
		hard, span = f.d.Tracer.Start(hard, "forward", trace.WithTimestamp(start))
		defer span.End()
	}
	out, err := f.process(hard, batch)
	if t != nil {
		t.wait(seq)
		defer t.done()
	}
	if err != nil {
		f.abandon(hard, "process", batch, err)
		return
	}
	if err := f.write(hard, out); err != nil {
		f.abandon(hard, StageWrite, batch, err)
		return
	}
	if f.nacked > 0 {
		err = f.settle(hard, batch)
	} else {
		err = f.ack(hard, batch)
	}
	if err != nil {
		f.abandon(hard, StageAck, batch, err)
		return
	}
	f.d.Metrics.Batch.Observe(time.Since(start).Seconds())
	if f.d.Tracer != nil {
		trace.SpanFromContext(hard).SetAttributes(attribute.Int("read", len(batch)), attribute.Int("written", len(out)))
	}
}

// readBatch reads at most len(buf) messages into buf. On a read error it logs and waits a little
// so that a failing source is not spun on; messages read before the error are
// still forwarded. An empty read without an error starts or lengthens the pause
// before the next read; a read with messages ends it.
func (f *Forwarder) readBatch(ctx context.Context, buf []isb.ReadMessage) []isb.ReadMessage {
	if len(buf) == 0 {
		return nil
	}
	start := f.idle.now()
	var n int
	var err error
	if f.keys != nil {
		n, err = f.keys.Read(ctx, buf, f.readCounted) // what goes on of the held and the new
	} else {
		n, err = f.readCounted(ctx, buf)
	}
	if n > 0 || err == nil {
		f.idle.read(start, n)
	}
	if err != nil && ctx.Err() == nil {
		f.d.Metrics.Errors.WithLabelValues(StageRead).Inc()
		f.log.Warn("read failed", zap.Error(err))
		f.sleep(ctx, readErrorPause)
	}
	return buf[:n]
}

// abandon gives up a batch that was read but could not be acked because step
// failed, which happens only once hard is done: every step retries until then. It
// logs the failure and nacks the batch when the reader can, so that the batch is
// delivered again at once instead of after the reader's ack deadline.
func (f *Forwarder) abandon(hard context.Context, step string, batch []isb.ReadMessage, err error) {
	f.log.Warn("batch not acked: "+step+" did not finish; it will be delivered again",
		zap.String("stage", step), zap.Int("messages", len(batch)), zap.Error(err))
	if f.nacker == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(hard), nackTimeout)
	defer cancel()
	f.ackMu.Lock()
	nerr := f.nacker.Nack(ctx, batch, 0)
	f.ackMu.Unlock()
	if nerr != nil {
		f.log.Warn("nack failed; the batch is delivered again after the reader's ack deadline",
			zap.Int("messages", len(batch)), zap.Error(nerr))
	}
}

// nackTimeout bounds the nack of an abandoned batch, which runs after the shutdown
// deadline.
const nackTimeout = time.Second

// readErrorPause is how long the loop waits after a failed read.
const readErrorPause = 100 * time.Millisecond

// deliver processes batch, on f.tok, and writes what it produces, and
// returns that. The messages of batch that a function or the sink nacked are
// marked in f.nacks. When it cannot finish before hard is done, it abandons
// the batch and returns the error.
func (f *worker) deliver(hard context.Context, batch []isb.ReadMessage) ([]isb.Message, error) {
	out, err := f.process(hard, batch)
	if err != nil {
		f.abandon(hard, "process", batch, err)
		return nil, err
	}
	if err := f.write(hard, out); err != nil {
		f.abandon(hard, StageWrite, batch, err)
		return nil, err
	}
	return out, nil
}

// process runs the transformer and the UDF, retrying each until it succeeds or hard
// is done, and gives back the tokens of dropped messages when ExcludeDropped. The
// messages the functions nacked are marked in f.nacks and left out.
func (f *worker) process(hard context.Context, batch []isb.ReadMessage) ([]isb.Message, error) {
	f.in = f.in[:0]
	for i := range batch {
		f.in = append(f.in, batch[i].Message)
		f.in[i].Origin = i
	}
	f.nacks = slices.Grow(f.nacks[:0], len(batch))[:len(batch)]
	clear(f.nacks)
	f.nacked = 0
	msgs, dropped := f.in, 0
	f.bySink, f.byFallback, f.byOnSuccess = f.bySink[:0], f.byFallback[:0], f.byOnSuccess[:0]
	if f.transformer != nil {
		var n int
		var err error
		f.mid, n, err = f.apply(hard, StageTransform, f.transformer, f.opts.TransformRetry, msgs, f.mid[:0])
		if err != nil {
			return nil, err
		}
		f.mid = f.takeNacks(f.mid)
		msgs, dropped = f.mid, dropped+n
	}
	msgs = f.bypass(msgs)
	if f.mapper != nil {
		var n int
		var err error
		f.out, n, err = f.apply(hard, StageMap, f.mapper, f.opts.MapRetry, msgs, f.out[:0])
		if err != nil {
			return nil, err
		}
		f.out = f.takeNacks(f.out)
		msgs = f.bypass(f.out)
		dropped += n
	}
	if b := f.d.Bypass; b != nil && b.Sink != nil {
		// As in Numaflow, with a bypass to the sink only what it sends
		// there is written; the rest is dropped.
		msgs, dropped = f.bySink, dropped+len(msgs)
	}
	if dropped > 0 {
		f.d.Metrics.Dropped.Add(float64(dropped))
	}
	if f.opts.ExcludeDropped && dropped > 0 {
		f.tok.Drop(dropped) // the dropped give back their message tokens
		f.refund(batch, msgs)
	}
	return msgs, nil
}

// call runs m on in, retrying a call that fails with the sink's backoff
// until it succeeds or hard is done.
func (f *Forwarder) call(hard context.Context, stage string, m udf.Mapper, in, out []isb.Message) ([]isb.Message, int, error) {
	for attempt := 0; ; attempt++ {
		res, dropped, err := m.Map(hard, in, out)
		if err == nil {
			return res, dropped, nil
		}
		f.d.Metrics.Errors.WithLabelValues(stage).Inc()
		f.log.Warn("function failed; retrying", zap.String("stage", stage), zap.Int("attempt", attempt+1), zap.Error(err))
		if !f.sleep(hard, f.opts.Retry.wait(attempt)) {
			return nil, 0, hard.Err()
		}
	}
}

// write writes msgs to the sink, retrying what fails, and sends to the fallback
// sink what the sink asks to, what it rejects (isb.ErrRejected) when there is a
// fallback sink, and what keeps failing when OnFailure is Fallback. Messages the
// sink refused because it is throttled (isb.ErrThrottled) are retried without
// using a retry step, after the wait it asked for. It returns an error only
// when hard is done before every message was written.
func (f *worker) write(hard context.Context, msgs []isb.Message) error {
	f.fallback = append(f.fallback[:0], f.byFallback...)
	f.onSuccess = append(f.onSuccess[:0], f.byOnSuccess...)
	f.tries = zeroed(f.tries, len(msgs))
	pending := msgs
	full := false
	defer func() {
		if full {
			f.d.Tracker.End(ratelimit.ReasonDownstreamFull)
		}
		f.logRejectedDrops()
	}()
	for attempt := 0; len(pending) > 0; attempt++ {
		var o outcome
		pending, o = f.writeOnce(f.d.Sink, StageWrite, hard, pending)
		if len(pending) == 0 {
			break
		}
		if o.full != full {
			if o.full {
				f.d.Tracker.Begin(ratelimit.ReasonDownstreamFull)
			} else {
				f.d.Tracker.End(ratelimit.ReasonDownstreamFull)
			}
			full = o.full
		}
		if pending = f.giveUp(pending); len(pending) == 0 {
			break
		}
		if !f.pause(hard, o, attempt, len(pending)) {
			return hard.Err()
		}
	}
	if err := f.writeAside(hard, f.d.Fallback, StageFallback, f.fallback); err != nil {
		return err
	}
	return f.writeAside(hard, f.d.OnSuccess, StageOnSuccess, f.onSuccess)
}

// writeOnce writes msgs to w once, counts the outcome, and returns the messages to
// retry (in f.failed, with their failed attempts in f.tries, aligned with msgs on
// the way in and with the result on the way out) and what became of the batch.
// Messages w routes to the fallback sink are added to f.fallback, and those it
// routes to the on-success sink to f.onSuccess.
func (f *worker) writeOnce(w isb.Writer, stage string, hard context.Context, msgs []isb.Message) ([]isb.Message, outcome) {
	errs := f.errSlice(len(msgs))
	f.writeMu.Lock() // writes, and the tokens they take, go one at a time
	err := f.freshen(hard, stage, len(msgs))
	if err == nil {
		err = w.Write(hard, msgs, errs)
		f.freshen(hard, stage, len(msgs))
	}
	f.writeMu.Unlock()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	var o outcome
	failed, tries := f.failed[:0], f.tries[:0]
	for i, err := range errs {
		if err == nil || (errors.Is(err, isb.ErrOnSuccess) && f.succeeded(stage, &msgs[i], err)) {
			o.written++
			continue
		}
		if errors.Is(err, isb.ErrOnSuccess) {
			continue
		}
		if !f.failedOne(stage, &msgs[i], err, &o) {
			continue
		}
		t := f.tries[i]
		if !errors.Is(err, isb.ErrThrottled) && !errors.Is(err, isb.ErrUnavailable) {
			t++ // a throttled message, or one whose sink's server failed, uses no retry step
		}
		failed, tries = append(failed, msgs[i]), append(tries, t)
	}
	f.count(stage, &o)
	// On a retry msgs is f.failed itself: failed compacts it in place, never
	// writing past the message being read, and tries does f.tries likewise.
	f.failed, f.tries = failed, tries
	return failed, o
}

// freshen makes the tokens a write of n messages to the sink (stage
// StageWrite) is written on those of the current epoch (see
// throttle.Tokens.Freshen): before the write, for a batch whose tokens are
// of an epoch that has ended; after it, for a write that returned in a
// later epoch than it started in (a stalled sink), whose messages are
// charged to that epoch too. It returns hard's error when hard ends first.
// f.writeMu is held.
func (f *worker) freshen(hard context.Context, stage string, n int) error {
	if stage == StageWrite && !f.tok.Freshen(hard, n) {
		return hard.Err()
	}
	return nil
}

// writeAside writes pending to w, the fallback or the on-success sink of
// stage, until it takes all of them.
func (f *worker) writeAside(hard context.Context, w isb.Writer, stage string, pending []isb.Message) error {
	if w == nil || len(pending) == 0 {
		return nil
	}
	f.tries = zeroed(f.tries, len(pending))
	for attempt := 0; len(pending) > 0; attempt++ {
		var o outcome
		pending, o = f.writeOnce(w, stage, hard, pending)
		if len(pending) > 0 && !f.pause(hard, o, attempt, len(pending)) {
			return hard.Err()
		}
	}
	return nil
}

// ack acks the batch, retrying a few times, and returns the last error when it
// could not; a batch never acked is delivered again by sources that can.
func (f *Forwarder) ack(hard context.Context, batch []isb.ReadMessage) error {
	for attempt := 0; ; attempt++ {
		f.ackMu.Lock()
		err := f.d.Reader.Ack(hard, batch)
		f.ackMu.Unlock()
		if err == nil {
			f.d.Metrics.Acked.Add(float64(len(batch)))
			return nil
		}
		f.d.Metrics.Errors.WithLabelValues(StageAck).Inc()
		if attempt >= 4 || !f.sleep(hard, f.backoff(attempt)) {
			return fmt.Errorf("ack after %d attempts: %w", attempt+1, err)
		}
	}
}

func (f *worker) errSlice(n int) []error {
	if cap(f.errs) < n {
		f.errs = make([]error, n)
	}
	errs := f.errs[:n]
	clear(errs)
	return errs
}

// backoff is the wait before the retry of a sink write that follows attempt
// (see RetryPolicy.wait).
func (f *Forwarder) backoff(attempt int) time.Duration { return f.opts.Retry.wait(attempt) }

// sleep waits d on the forwarder's clock or until ctx is done, and reports
// whether it waited the whole d.
func (f *Forwarder) sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, f.opts.Clock, d)
}
