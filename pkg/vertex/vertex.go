package vertex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udsconn"
	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/reduce"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// Vertex is one replica of a vertex: its reader (a source, or a forwarder per
// input partition), its functions, its writers, its rate limiter and the
// throttle tracker and metrics, wired as its [Spec] says.
//
// Create one with [New], run it with [Vertex.Run], and read it with
// [Vertex.Status] and [Vertex.Ready] at any time, from any goroutine. A Vertex
// runs once. The zero value is not usable.
type Vertex struct {
	spec Spec
	o    options
	log  *zap.Logger

	runs []runner // the forwarders, or a reduce's readers
	// reduceMetrics count what a reduce's readers do; nil for other vertices.
	reduceMetrics *reduce.Metrics
	// lateLog logs what a reduce's readers drop as late; nil for others.
	lateLog *reduce.LateLog
	marks   *marks
	tracker *forward.Tracker
	metrics *forward.Metrics
	limiter *ratelimit.Limiter // nil without a rate limit
	groups  []groupLimiter     // the shared limits it joined
	// The per-key limit (rateLimit.perKey) and its metrics; nil without.
	keys       *ratelimit.KeyLimiter
	keyMetrics *throttle.KeyMetrics
	uds        []UDClient        // user-defined servers, connected before the forwarders start
	udKinds    []serverinfo.Kind // the kind of each
	// calls are the calls to them (Env.Calls).
	calls *udsconn.Calls
	// infoFiles are the names of their server-info files.
	infoFiles []string
	// pending, when the source can tell its pending count, its gauge and
	// its last answer (-1: unknown).
	pending      pendingSource
	pendingGauge prometheus.Gauge
	lastPending  atomic.Int64
	// pendingOwn says the count is the replica's part of the source's;
	// pendingGroup, when the source can also tell the whole, asks it, and
	// groupPending is its last answer (-1: unknown).
	pendingOwn   bool
	pendingGroup groupPendingSource
	groupPending atomic.Int64
	// shared are the writers the forwarders share, by their key (Env.Shared).
	shared map[any]isb.Writer

	ran     atomic.Bool
	running atomic.Bool

	mu      sync.Mutex
	closers []func() error // closed in reverse order after the forwarders stop

	// bytes is the byte limit (rateLimit.bytes); nil without.
	bytes *ratelimit.Limiter
	// page is what /status/live shows beyond the status.
	page pageState
	// desired is the scale rule and its gauge; nil without Spec.Scale.
	desired *desired
}

// ErrReplica is matched by the error of a replica index beyond the replicas
// of a replicaCountStore.
var ErrReplica = errors.New("replica index out of range")

// ErrRegion is matched by the error of a replica's region ([WithRegion])
// that is missing or not one of its rate limit's regions.
var ErrRegion = errors.New("the replica's region")

// shutdownGrace is how long, beyond its readTimeout, the batch in flight may
// take to be written and acked once Run's context is done.
const shutdownGrace = 5 * time.Second

// New builds a replica of the vertex spec describes. It calls the
// constructors of its parts, which open what the vertex needs (an http
// source's port, the rate limiter's store) but connect to no user-defined
// server: Run does. It returns the first error of a constructor as it is: those
// of package vertexconfig name the field of the config at fault.
func New(spec Spec, opts ...Option) (_ *Vertex, err error) {
	spec = spec.withDefaults()
	o := buildOptions(opts)
	v := &Vertex{spec: spec, o: o, log: o.log.With(zap.String("vertex", spec.Name), zap.Int("replica", o.replica))}
	defer func() {
		if err != nil {
			v.Close()
		}
	}()
	if spec.Source == nil && len(spec.Inputs) == 0 {
		return nil, fmt.Errorf("vertex %s: neither a source nor inputs", spec.Name)
	}
	if spec.Sink == nil && spec.Output == nil {
		return nil, fmt.Errorf("vertex %s: neither a sink nor an output", spec.Name)
	}
	if err := spec.Limits.check(); err != nil {
		return nil, fmt.Errorf("vertex %s: %w", spec.Name, err)
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"vertex": spec.Name, "replica": strconv.Itoa(o.replica)}, o.registerer)
	// The tracker and the counters come first: the limiter's epoch
	// observer reads them into the vertex's history.
	v.tracker = forward.NewTracker(o.clock)
	v.metrics = forward.NewMetrics(reg, v.tracker)
	// The servers answer in real time: their calls' deadlines run on the
	// wall clock, as the forwarder's pauses do, whatever WithClock says.
	v.calls = udsconn.NewCalls(spec.Limits.UDFTimeout, nil)
	reg.MustRegister(newCallsCollector(v.calls))
	if spec.Reduce != nil {
		v.reduceMetrics = reduce.NewMetrics(reg)
		v.lateLog = reduce.NewLateLog(v.log, o.clock)
		v.onClose(v.lateLog.Close)
	}
	v.page.history = v.newHistory()
	if err := v.buildLimiter(reg); err != nil {
		return nil, err
	}
	if err := v.buildDesired(reg); err != nil {
		return nil, fmt.Errorf("vertex %s: scale: %w", spec.Name, err)
	}
	readers := spec.Inputs
	if spec.Source != nil {
		r, err := v.buildSource()
		if err != nil {
			return nil, err
		}
		readers = []isb.Reader{r}
		v.buildPending(reg, r)
		buildDropped(reg, r)
		buildHTTPStats(reg, r)
	}
	if o.numaflowMetrics {
		if err := o.registerer.Register(newNumaflowCollector(v)); err != nil {
			return nil, fmt.Errorf("vertex %s: registering Numaflow's metrics: %w", spec.Name, err)
		}
	}
	if readers, err = v.buildMarks(readers); err != nil {
		return nil, err
	}
	v.buildMarkMetrics(reg)
	for i, r := range readers {
		add := v.addForwarder
		if spec.Reduce != nil {
			add = func(r isb.Reader, shared bool) error { return v.addReducer(i, r, shared) }
		}
		if err := add(r, len(readers) > 1); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// runner is a forwarder, or a reader of a reduce vertex.
type runner interface {
	Run(ctx context.Context) error
}

// addForwarder adds the forwarder of reader r; shared says other forwarders
// share the limiter.
func (v *Vertex) addForwarder(r isb.Reader, shared bool) error {
	d := forward.Deps{Reader: r, Logger: v.log, Tracer: v.o.tracer, Metrics: v.metrics, Tracker: v.tracker,
		Throttle: v.throttle(shared)}
	if err := v.buildFunctions(&d); err != nil {
		return err
	}
	if err := v.buildWriters(&d); err != nil {
		return err
	}
	limits := v.spec.Limits
	opts := forward.Options{
		BatchSize:       limits.ReadBatchSize,
		ExcludeDropped:  v.excludeDropped(),
		Retry:           v.spec.Retry,
		TransformRetry:  v.spec.TransformRetry,
		MapRetry:        v.spec.MapRetry,
		ShutdownTimeout: limits.ReadTimeout + shutdownGrace,
		// A dry source is read at most every 100ms, or every readTimeout when
		// that is shorter: a longer pause would delay the first message after a
		// dry spell by as much. The pauses run on the wall clock, not on
		// WithClock's: a reader that waits on real time (an ISB buffer, the http
		// source) must not then be held by a clock that only a test moves.
		MaxIdlePause: min(limits.ReadTimeout, forward.DefaultMaxIdlePause),
		Concurrency:  limits.concurrency(),
		Streaming:    v.spec.Streaming,
		ReadAhead:    v.o.readAhead,
		Ordered:      v.spec.Ordered,
	}
	fwd, err := forward.New(d, opts)
	if err != nil {
		return err
	}
	v.runs = append(v.runs, fwd)
	return nil
}

// onClose adds f to what is closed, in reverse order, after the forwarders.
func (v *Vertex) onClose(f func() error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closers = append(v.closers, f)
}

// remote notes a client of a user-defined server of kind, to connect it
// before the forwarders start, check it for Ready, and close it after the
// forwarders.
func (v *Vertex) remote(kind serverinfo.Kind, c UDClient) {
	if len(v.uds) == 0 {
		v.onClose(v.closeUDs)
	}
	v.uds = append(v.uds, c)
	v.udKinds = append(v.udKinds, kind)
	if name := kind.InfoFile(); !slices.Contains(v.infoFiles, name) {
		v.infoFiles = append(v.infoFiles, name)
	}
}

// closeUDs closes the clients of the user-defined servers all at once: each
// gives its server up to a second to end its streams.
func (v *Vertex) closeUDs() error {
	errs := make([]error, len(v.uds))
	var wg sync.WaitGroup
	for i, c := range v.uds {
		wg.Go(func() { errs[i] = c.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Run connects to the vertex's user-defined servers, creating their socket
// directory when it is missing and waiting until they are up, and forwards
// until ctx is done, asking a user-defined source every 5s how many messages
// it has pending. Then it stops reading, writes and acks the batches in flight
// (for at most readTimeout + 5s), leaves the rate limit's replica set, closes what
// New opened (half-closing the streams to the user-defined servers, which get
// a second to end them) and returns. It returns an error when the vertex
// cannot go on: a socket directory it cannot create, a user-defined server
// sluice cannot talk to (matching [udf.ErrIncompatible]), a closed limiter.
// A Vertex runs once.
func (v *Vertex) Run(ctx context.Context) error {
	if v.ran.Swap(true) {
		return fmt.Errorf("vertex %s: already ran", v.spec.Name)
	}
	defer v.Close()
	if err := v.connect(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	if si := v.o.sideInputs; si != nil {
		if err := si.Wait(ctx); err != nil {
			return nil // ctx ended
		}
	}
	v.running.Store(true)
	defer v.running.Store(false)
	if v.pending != nil {
		defer background(ctx, v.pollPending)()
	}
	if v.limiter == nil {
		defer background(ctx, v.recordSeconds)()
	}
	if v.desired != nil {
		defer background(ctx, v.runDesired)()
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range v.runs {
		g.Go(func() error { return r.Run(gctx) })
	}
	marksCtx, stopMarks := context.WithCancel(context.WithoutCancel(gctx))
	marked := make(chan error, 1)
	go func() { marked <- v.runMarks(marksCtx) }()
	err := g.Wait()
	// The watermark goes on until the forwarders have finished, then the
	// vertex's entries are removed.
	stopMarks()
	return errors.Join(err, <-marked)
}

// connect waits until every user-defined server is up and ready, or ctx is
// done, warning meanwhile about servers that seem to know only the fixed
// socket directory; a server not ready within the startup timeout is a
// [*StartupError].
func (v *Vertex) connect(ctx context.Context) error {
	if len(v.uds) == 0 {
		return nil
	}
	if err := v.makeSocketDir(); err != nil {
		return err
	}
	stop := v.watchFixedDir(ctx)
	defer stop()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d := v.o.startup; d > 0 {
		t := v.o.clock.AfterFunc(d, cancel)
		defer t.Stop()
	}
	for i, c := range v.uds {
		if err := c.Connect(cctx); err != nil {
			switch {
			case ctx.Err() != nil:
				return nil
			case cctx.Err() != nil:
				k := v.udKinds[i]
				e := &StartupError{Vertex: v.spec.Name, Container: k.Container(), Kind: k, Timeout: v.o.startup,
					InfoFile: filepath.Join(v.o.socketDir, k.InfoFile()), Socket: filepath.Join(v.o.socketDir, k.Socket())}
				_, err := os.Stat(e.InfoFile)
				e.InfoWritten = err == nil
				return e
			}
			return err
		}
	}
	return nil
}

// StartupError is the error of [Vertex.Run] for a user-defined server that
// was not ready within the startup timeout ([WithStartupTimeout]).
type StartupError struct {
	Vertex, Container string
	Kind              udf.Kind
	Timeout           time.Duration
	// InfoFile and Socket are the server-info file and the socket the vertex
	// waited for; InfoWritten, whether the server wrote the file by then.
	InfoFile, Socket string
	InfoWritten      bool
}

func (e *StartupError) Error() string {
	what := "it wrote no server-info file " + e.InfoFile
	if e.InfoWritten {
		what = "it wrote its server-info file " + e.InfoFile + ", but did not answer on " + e.Socket
	}
	return fmt.Sprintf("vertex %s: the %s container's %s server was not ready within %v (--startup-timeout): %s",
		e.Vertex, e.Container, e.Kind, e.Timeout, what)
}

// Ready reports whether the vertex is running with every user-defined server
// ready, none of them stuck (a call abandoned at its deadline, until a call
// to it succeeds again), and a value of every side input it names; the error
// says what it waits for, naming the server-info file of each server not
// ready or stuck and the side inputs without a value.
func (v *Vertex) Ready() error {
	var errs []error
	if !v.running.Load() {
		errs = append(errs, errors.New(v.spec.Name+": not running"))
	}
	for _, c := range v.uds {
		errs = append(errs, c.Ready())
	}
	if si := v.o.sideInputs; si != nil {
		errs = append(errs, si.Ready())
	}
	return errors.Join(errs...)
}

// Close releases what New opened, in reverse order: the clients of the
// user-defined servers, the sources and sinks, the rate limiter (which leaves
// its pool). Run closes the vertex itself when it returns; Close is for a
// vertex that never runs, and is safe to call more than once.
func (v *Vertex) Close() error {
	v.mu.Lock()
	closers := v.closers
	v.closers = nil
	v.mu.Unlock()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i]())
	}
	return errors.Join(errs...)
}

// background runs fn in a goroutine until the returned stop, which ends
// fn's context and waits for fn to return.
func background(ctx context.Context, fn func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
