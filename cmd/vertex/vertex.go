package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sink"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udsconn"
)

// runtimeOptions are what `vertex run` and `vertex bench` set besides the config.
type runtimeOptions struct {
	replica     int
	metricsAddr string // "" serves no metrics
	httpAddr    string // overrides the http source's listen address
	stdout      io.Writer
	log         *zap.Logger
	tracer      trace.Tracer
	registry    *prometheus.Registry
	// sinkOverride replaces the configured sink (vertex bench uses blackhole).
	sinkOverride isb.Writer
	// noRateLimit drops the config's rate limit (vertex bench's "off" runs).
	noRateLimit bool
	// udsDir is where user-defined containers have their sockets.
	udsDir string
	// spawn starts the user-defined containers' commands as child processes.
	spawn  bool
	stderr io.Writer
	// logSink is the log sink of every vertex in the process: one, so that
	// their lines never interleave (default: a log sink on stdout).
	logSink *sink.Log
}

// vertexSpec is what one replica of a vertex is built from: a MonoVertex, or a
// vertex of a pipeline, whose ends may be buffers.
type vertexSpec struct {
	// name is the vertex's name in metrics, logs and /status; storeKey keys its
	// rate limiter's state in the store (a pipeline vertex's includes the
	// pipeline's name).
	name, storeKey string
	batchSize      int
	readTimeout    time.Duration
	rateLimit      *config.RateLimit // nil: no rate limit

	// Reading: source, or else inputs (the partitions of its buffer), each read
	// by a forwarder of its own.
	source *config.Source
	inputs []isb.Reader
	udf    *config.UDF
	// Writing: sink, or else output, which returns a new writer along the
	// vertex's edges for each forwarder and adds what must be closed after the
	// forwarders to closers.
	sink   *config.Sink
	output func(closers *[]func() error) (isb.Writer, error)
}

// udClient is a client of a user-defined container's server.
type udClient interface {
	Connect(ctx context.Context) error
	Ready() error
	Close() error
}

// vertex is one replica of a vertex assembled from its spec: readers,
// functions, writers, rate limiter and forwarders (one per reader), with its
// observability server.
type vertex struct {
	name    string
	opts    runtimeOptions
	fwds    []*forward.Forwarder
	tracker *forward.Tracker
	limiter *ratelimit.Limiter // nil without a rate limit
	mode    string
	server  *observe.Server
	closers []func() error // closed in reverse order after the forwarders stop
	running atomic.Bool
	metrics *forward.Metrics
	uds     []udClient // user-defined servers, connected before the forwarders start
	isSink  bool       // writes to a sink, not to buffers
}

// buildVertex assembles a vertex replica. Everything it opens is closed by run,
// or by close when run is never called.
func buildVertex(s *vertexSpec, o runtimeOptions) (_ *vertex, err error) {
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.stdout == nil {
		o.stdout = os.Stdout
	}
	if o.registry == nil {
		o.registry = prometheus.NewRegistry()
	}
	if o.stderr == nil {
		o.stderr = os.Stderr
	}
	if o.udsDir == "" {
		o.udsDir = serverinfo.DefaultDir
	}
	if o.logSink == nil {
		o.logSink = sink.NewLog(o.stdout)
	}
	v := &vertex{name: s.name, opts: o, isSink: s.sink != nil}
	defer func() {
		if err != nil {
			v.close()
		}
	}()
	log := o.log.With(zap.String("vertex", v.name), zap.Int("replica", o.replica))
	if cs := containersOf(s.source, s.udf, s.sink); len(cs) > 0 && o.spawn {
		sp, err := startContainers(cs, o.udsDir, v.name, o.replica, o.stdout, o.stderr, log)
		if err != nil {
			return nil, err
		}
		v.closers = append(v.closers, sp.stop) // closed last: after the clients
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"vertex": v.name, "replica": strconv.Itoa(o.replica)}, o.registry)

	var lim forward.Limiter = forward.Noop{}
	excludeDropped := false
	if rl := s.rateLimit; rl != nil && !o.noRateLimit {
		lopts, err := limiterOptions(rl, s.storeKey, o.replica, log, &v.closers)
		if err != nil {
			return nil, err
		}
		l, err := ratelimit.New(rl.LimiterConfig(), lopts...)
		if err != nil {
			return nil, err
		}
		v.limiter, lim = l, l
		v.mode = rl.LimiterConfig().Mode.String()
		v.closers = append(v.closers, func() error { return l.Close(context.Background()) })
		excludeDropped = rl.ExcludeDropped != nil && *rl.ExcludeDropped
		observe.RegisterLimiter(reg, l.Status)
	}

	readers := s.inputs
	if s.source != nil {
		r, err := v.buildSource(s, log)
		if err != nil {
			return nil, err
		}
		readers = []isb.Reader{r}
	}
	v.tracker = forward.NewTracker(nil)
	v.metrics = forward.NewMetrics(reg, v.tracker)
	opts := forward.Options{
		BatchSize:       s.batchSize,
		ExcludeDropped:  excludeDropped,
		Retry:           forward.RetryPolicy{Interval: time.Millisecond, MaxInterval: time.Second},
		ShutdownTimeout: s.readTimeout + 5*time.Second,
	}
	if s.sink != nil {
		opts.Retry = retryPolicy(s.sink.RetryStrategy, s.sink.Fallback != nil)
	}
	for _, r := range readers {
		d := forward.Deps{Reader: r, Limiter: lim, Logger: log, Tracer: o.tracer, Metrics: v.metrics, Tracker: v.tracker}
		if l := v.limiter; l != nil && len(readers) > 1 {
			d.Limiter = l.Lane() // forwarders that share a limiter each take a lane
		}
		if err := v.buildFunctions(s, &d, log); err != nil {
			return nil, err
		}
		if err := v.buildWriters(s, &d, log); err != nil {
			return nil, err
		}
		fwd, err := forward.New(d, opts)
		if err != nil {
			return nil, err
		}
		v.fwds = append(v.fwds, fwd)
	}
	if o.metricsAddr != "" {
		if v.server, err = observe.Listen(o.metricsAddr, observe.Handlers{
			Gatherer: o.registry, Ready: v.ready, Status: func() any { return v.status() },
		}, log); err != nil {
			return nil, fmt.Errorf("--metrics-addr %s: %w", o.metricsAddr, err)
		}
		log.Info("serving metrics, health and status", zap.String("addr", v.server.Addr().String()))
	}
	return v, nil
}

// buildFunctions sets the transformer and the UDF of one forwarder. Each
// forwarder has its own: a user-defined function's client carries one batch at
// a time.
func (v *vertex) buildFunctions(s *vertexSpec, d *forward.Deps, log *zap.Logger) (err error) {
	if s.source != nil && s.source.Transformer != nil {
		if t := s.source.Transformer; t.Container != nil {
			d.Transformer = remoteOf(v, udf.NewRemoteTransformer(v.opts.udsDir, log))
		} else if d.Transformer, err = udf.NewBuiltinTransformer(t.Builtin.Name, t.Builtin.KWArgs, log); err != nil {
			return err
		}
	}
	if u := s.udf; u != nil {
		if u.Container != nil {
			d.Mapper = remoteOf(v, udf.NewRemoteMap(v.opts.udsDir, log))
		} else if d.Mapper, err = udf.NewBuiltin(u.Builtin.Name, u.Builtin.KWArgs, log); err != nil {
			return err
		}
	}
	return nil
}

// buildWriters sets the sink and fallback sink of one forwarder: the
// configured sinks, or the writer along the vertex's edges.
func (v *vertex) buildWriters(s *vertexSpec, d *forward.Deps, log *zap.Logger) error {
	switch {
	case s.sink != nil && v.opts.sinkOverride != nil:
		d.Sink = v.opts.sinkOverride
	case s.sink != nil:
		d.Sink = v.buildSink(&s.sink.AbstractSink, serverinfo.KindSink, log)
		if fb := s.sink.Fallback; fb != nil {
			d.Fallback = v.buildSink(fb, serverinfo.KindFallbackSink, log)
		}
	case s.output != nil:
		w, err := s.output(&v.closers)
		if err != nil {
			return err
		}
		d.Sink = w
	default:
		return errors.New("vertex " + s.name + " has neither a sink nor edges out")
	}
	return nil
}

// remoteOf notes a client of a user-defined server, to connect it before the
// forwarders start, check it for /readyz, and close it after the forwarders.
func remoteOf[C udClient](v *vertex, c C) C {
	v.uds = append(v.uds, c)
	v.closers = append(v.closers, c.Close)
	return c
}

func (v *vertex) ready() error {
	if !v.running.Load() {
		return errors.New(v.name + ": not running")
	}
	for _, c := range v.uds {
		if err := c.Ready(); err != nil {
			return err
		}
	}
	return nil
}

// connect waits until every user-defined server is up and ready. A server
// sluice cannot talk to is a usage error.
func (v *vertex) connect(ctx context.Context) error {
	for _, c := range v.uds {
		if err := c.Connect(ctx); err != nil {
			if errors.Is(err, udsconn.ErrIncompatible) {
				return &usageError{msg: err.Error()}
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// vertexStatus is the JSON of /status.
type vertexStatus struct {
	Vertex     string   `json:"vertex"`
	Replica    int      `json:"replica"`
	RateLimit  bool     `json:"rateLimit"`
	Mode       string   `json:"mode,omitempty"`
	Epoch      int64    `json:"epoch,omitempty"`
	Pool       float64  `json:"pool,omitempty"`
	Share      int64    `json:"share,omitempty"`
	Granted    int64    `json:"grantedThisEpoch,omitempty"`
	PoolSize   int      `json:"poolSize,omitempty"`
	Rank       int      `json:"rank"`
	Throttled  bool     `json:"throttled"`
	Reasons    []string `json:"throttledReasons"`
	Running    bool     `json:"running"`
	ReadTotal  float64  `json:"readTotal"`
	WriteTotal float64  `json:"writeTotal"`
}

func (v *vertex) status() vertexStatus {
	s := vertexStatus{Vertex: v.name, Replica: v.opts.replica, Running: v.running.Load(), Reasons: []string{}}
	if l := v.limiter; l != nil {
		ls := l.Status()
		s.RateLimit, s.Mode, s.Epoch, s.Pool, s.Share, s.Granted, s.PoolSize, s.Rank =
			true, v.mode, ls.Epoch, ls.Pool(), ls.Share, ls.Granted, ls.PoolSize, ls.Rank
	}
	var rs []ratelimit.Reason
	s.Throttled, rs = v.tracker.Throttled()
	for _, r := range rs {
		s.Reasons = append(s.Reasons, r.String())
	}
	s.ReadTotal = counterValue(v.metrics.Read)
	s.WriteTotal = counterValue(v.metrics.Written)
	return s
}

// run forwards until ctx is done (SIGTERM), then finishes the batches in flight,
// leaves the rate limiter's pool, and stops serving.
func (v *vertex) run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	if v.server != nil {
		g.Go(func() error { return v.server.Serve(serveCtx) })
	}
	g.Go(func() error {
		defer stopServing()
		if err := v.connect(gctx); err != nil || gctx.Err() != nil {
			return errors.Join(err, v.close())
		}
		v.running.Store(true)
		fg, fctx := errgroup.WithContext(gctx)
		for _, f := range v.fwds {
			fg.Go(func() error { return f.Run(fctx) })
		}
		err := fg.Wait()
		v.running.Store(false)
		if cerr := v.close(); err == nil {
			err = cerr
		}
		return err
	})
	return g.Wait()
}

// written is what the vertex has written to its sinks or buffers.
func (v *vertex) written() float64 { return counterValue(v.metrics.Written) }

// close releases what buildVertex opened, in reverse order.
func (v *vertex) close() error {
	var errs []error
	for i := len(v.closers) - 1; i >= 0; i-- {
		errs = append(errs, v.closers[i]())
	}
	v.closers = nil
	return errors.Join(errs...)
}
