package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

func init() {
	register(Role{Name: "sink", Help: "a user-defined sink that writes to the vertex's sink under its rate limit", Run: runSink})
}

// sinkReadTimeout is how long the vertex's read of the incoming batches
// waits when none is arriving, unless the vertex's readTimeout says.
const sinkReadTimeout = 100 * time.Millisecond

// runSink serves, as replica $NUMAFLOW_REPLICA (default 0), the sink of the vertex in o.File: each batch Numaflow's
// runtime sends is read by a vertex whose source is the batch and whose sink
// is the file's sink, so that the rate limit, the closed loop, retries,
// metrics and /status are the vertex's own. Each message is answered by what
// became of it: success once the sink took it, fallback when it went to the
// fallback sink, nack with the options when the vertex handed it back.
func runSink(ctx context.Context, o Options) error {
	rep, err := cli.ReplicaIndex("")
	if err != nil {
		return err
	}
	return runSinkReplica(ctx, o, rep)
}

// runSinkReplica is runSink as replica rep of the vertex, which tells the
// replicas sharing its limit apart.
func runSinkReplica(ctx context.Context, o Options, rep int) error {
	spec, err := sinkSpec(o)
	if err != nil {
		return err
	}
	return serveSink(ctx, spec, o, rep)
}

// serveSink serves spec's sink: spec's source, inputs and outputs are
// replaced by the batches the server gets, and its fallback by the answer
// FALLBACK.
func serveSink(ctx context.Context, spec vertex.Spec, o Options, rep int) error {
	return serveSinkWith(ctx, spec, o, rep, func(ctx context.Context, sk sinker.Sinker) error {
		return sinker.NewServer(sk, sinker.WithSocketDir(o.SocketDir)).Start(ctx)
	})
}

// serveSinkWith is serveSink with serve in place of the sink server: it
// hands serve the Sinker that feeds the vertex, once the vertex is ready.
func serveSinkWith(ctx context.Context, spec vertex.Spec, o Options, rep int, serve func(context.Context, sinker.Sinker) error) error {
	timeout := spec.Limits.ReadTimeout
	if timeout <= 0 {
		timeout = sinkReadTimeout
	}
	src := newBatchSource(timeout, spec.Limits.ReadBatchSize)
	spec.Source = func(vertex.Env) (isb.Reader, error) { return src, nil }
	spec.Inputs, spec.Output = nil, nil
	spec.Fallback = func(vertex.Env) (isb.Writer, error) { return fallbackMarker{src}, nil }
	reg := prometheus.NewRegistry()
	v, err := vertex.New(spec, vertex.WithLogger(o.Log), vertex.WithRegisterer(reg), vertex.WithReplica(rep))
	if err != nil {
		return err
	}
	if o.Addr != "" {
		ln, err := net.Listen("tcp", o.Addr)
		if err != nil {
			v.Close()
			return cli.Usagef("serve: --addr (%q): %v", o.Addr, err)
		}
		stop := observe.NewServer(ln, observe.Handlers{Gatherer: reg, Ready: func() error { return servable(v) }, Status: func() any { return v.Status() },
			PageData: func(since int64) any { return v.PageView(since) }}, nil, o.Log).Start()
		o.Log.Info("serving metrics, health and status", zap.String("addr", ln.Addr().String()))
		defer stop()
	}
	// The vertex outlives the server: what the server's last batches hold
	// is written before the vertex stops.
	vctx, vstop := context.WithCancel(context.Background())
	defer vstop()
	vdone := make(chan error, 1)
	go func() { vdone <- v.Run(vctx) }()
	// The socket and its server-info file appear once the vertex is ready
	// (its store agreed, its sink open): Numaflow's runtime waits for them.
	if err := awaitReady(ctx, v, vdone, o.Log); err != nil {
		vstop()
		<-vdone
		return fmt.Errorf("serve: sink: %w", err)
	}
	o.Log.Info("serving", zap.String("dir", o.SocketDir), zap.String("vertex", spec.Name))
	serr := serve(ctx, readySinker{src, &readiness{v: v, log: o.Log}})
	vstop()
	return errors.Join(serr, <-vdone)
}

// sinkSpec is the vertex of o whose sink the role serves.
func sinkSpec(o Options) (vertex.Spec, error) {
	if pt := o.part(); pt.sink == nil {
		return vertex.Spec{}, cli.Usagef("serve: %s: %s.sink: the %s has no sink", o.Path, pt.path, pt.what)
	}
	spec, err := o.spec()
	if err != nil {
		return vertex.Spec{}, cli.Usagef("serve: %s: %v", o.Path, err)
	}
	return spec, nil
}

// entry is one message of a batch, waiting for its outcome.
type entry struct {
	msg      isb.Message
	fallback bool // guarded by batchSource.mu
	done     chan sinker.Response
}

// batchSource is the vertex's source: the messages of the batches that the
// sink server gets, each answered once the vertex acks or nacks it. It is
// also the server's Sinker.
type batchSource struct {
	queue   chan *entry
	timeout time.Duration
	mu      sync.Mutex
	byID    map[string]*entry
}

// newBatchSource returns a source whose reads wait at most timeout; up to
// size messages wait for a read, so that one read takes a batch at once.
func newBatchSource(timeout time.Duration, size int) *batchSource {
	return &batchSource{queue: make(chan *entry, max(size, 1)), timeout: timeout, byID: map[string]*entry{}}
}

// Sink hands each datum to the vertex and answers it with its outcome; a
// message whose stream ends first is answered with a failure.
func (s *batchSource) Sink(ctx context.Context, datums <-chan sinker.Datum) sinker.Responses {
	var pending []*entry
	var resps sinker.Responses
	for d := range datums {
		e := &entry{msg: isb.Message{ID: d.ID(), Keys: d.Keys(), Value: d.Value(), EventTime: d.EventTime(), Headers: d.Headers()}, done: make(chan sinker.Response, 1)}
		if md := d.UserMetadata(); md != nil {
			e.msg.Metadata = toMetadata(md)
		}
		select {
		case s.queue <- e:
			pending = append(pending, e)
		case <-ctx.Done():
			resps = append(resps, sinker.ResponseFailure(d.ID(), "serve: the stream ended before the message was written"))
		}
	}
	for _, e := range pending {
		select {
		case r := <-e.done:
			resps = append(resps, r)
		case <-ctx.Done():
			resps = append(resps, sinker.ResponseFailure(e.msg.ID, "serve: the stream ended before the message was written"))
		}
	}
	return resps
}

func toMetadata(md *sinker.UserMetadata) isb.Metadata {
	groups := md.Groups()
	if len(groups) == 0 {
		return nil
	}
	out := make(isb.Metadata, len(groups))
	for _, g := range groups {
		kv := map[string][]byte{}
		for _, k := range md.Keys(g) {
			kv[k] = md.Value(g, k)
		}
		out[g] = kv
	}
	return out
}

func (s *batchSource) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	t := time.NewTimer(s.timeout)
	defer t.Stop()
	var e *entry
	select {
	case e = <-s.queue:
	case <-t.C:
		return 0, nil
	case <-ctx.Done():
		return 0, nil
	}
	n := 0
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		s.byID[e.msg.ID] = e
		buf[n] = isb.ReadMessage{Message: e.msg, Handle: e}
		n++
		if n == len(buf) {
			return n, nil
		}
		select {
		case e = <-s.queue:
		default:
			return n, nil
		}
	}
}

// answer sends r for each of msgs and forgets them.
func (s *batchSource) answer(msgs []isb.ReadMessage, r func(e *entry) sinker.Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		e, ok := m.Handle.(*entry)
		if !ok {
			continue
		}
		delete(s.byID, e.msg.ID)
		select {
		case e.done <- r(e):
		default:
		}
	}
}

func (s *batchSource) Ack(_ context.Context, msgs []isb.ReadMessage) error {
	s.answer(msgs, func(e *entry) sinker.Response {
		if e.fallback {
			return sinker.ResponseFallback(e.msg.ID)
		}
		return sinker.ResponseOK(e.msg.ID)
	})
	return nil
}

func (s *batchSource) Nack(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	return s.NackOptions(ctx, msgs, isb.NackOptions{Delay: delay})
}

func (s *batchSource) NackOptions(_ context.Context, msgs []isb.ReadMessage, o isb.NackOptions) error {
	s.answer(msgs, func(e *entry) sinker.Response {
		if o.RateLimited {
			return sinker.ResponseRateLimited(e.msg.ID, o.Delay, o.Reason)
		}
		opts := &sinker.NackOptions{NackMap: o.Values}
		if o.Delay > 0 {
			ms := uint64(o.Delay / time.Millisecond)
			opts.Delay = &ms
		}
		if o.MaxDeliveries > 0 {
			md := o.MaxDeliveries
			opts.MaxDeliveries = &md
		}
		if o.Reason != "" {
			r := o.Reason
			opts.Reason = &r
		}
		return sinker.ResponseNack(e.msg.ID, opts)
	})
	return nil
}

// fallbackMarker is the vertex's fallback sink: what the vertex sends there
// is answered fallback, for Numaflow's runtime to write to its own.
type fallbackMarker struct{ s *batchSource }

func (f fallbackMarker) Write(_ context.Context, msgs []isb.Message, errs []error) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	for i, m := range msgs {
		if e, ok := f.s.byID[m.ID]; ok {
			e.fallback = true
		}
		errs[i] = nil
	}
	return nil
}
