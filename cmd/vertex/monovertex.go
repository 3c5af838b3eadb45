package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
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
	"github.com/sluiceflow/sluice/pkg/source"
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
}

// udClient is a client of a user-defined container's server.
type udClient interface {
	Connect(ctx context.Context) error
	Ready() error
	Close() error
}

// monoVertex is a MonoVertex assembled from its config: source, functions,
// sinks, rate limiter and forwarder, with its observability server.
type monoVertex struct {
	name    string
	opts    runtimeOptions
	fwd     *forward.Forwarder
	tracker *forward.Tracker
	limiter *ratelimit.Limiter // nil without a rate limit
	mode    string
	server  *observe.Server
	closers []func() error // closed in reverse order after the forwarder stops
	running atomic.Bool
	metrics *forward.Metrics
	uds     []udClient // user-defined servers, connected before the forwarder starts
}

// buildMonoVertex assembles a MonoVertex. Everything it opens is closed by run,
// or by close when run is never called.
func buildMonoVertex(m *config.MonoVertex, o runtimeOptions) (_ *monoVertex, err error) {
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
	mv := &monoVertex{name: m.Metadata.Name, opts: o}
	defer func() {
		if err != nil {
			mv.close()
		}
	}()
	spec := &m.Spec
	log := o.log.With(zap.String("vertex", mv.name), zap.Int("replica", o.replica))
	if cs := containers(spec); len(cs) > 0 && o.spawn {
		sp, err := startContainers(cs, o.udsDir, mv.name, o.replica, o.stdout, o.stderr, log)
		if err != nil {
			return nil, err
		}
		mv.closers = append(mv.closers, sp.stop) // closed last: after the clients
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"vertex": mv.name, "replica": strconv.Itoa(o.replica)}, o.registry)

	var lim forward.Limiter = forward.Noop{}
	excludeDropped := false
	if rl := spec.Limits.GetRateLimit(); rl != nil && !o.noRateLimit {
		lopts, err := limiterOptions(rl, mv.name, o.replica, log, &mv.closers)
		if err != nil {
			return nil, err
		}
		l, err := ratelimit.New(rl.LimiterConfig(), lopts...)
		if err != nil {
			return nil, err
		}
		mv.limiter, lim = l, l
		mv.mode = rl.LimiterConfig().Mode.String()
		mv.closers = append(mv.closers, func() error { return l.Close(context.Background()) })
		excludeDropped = rl.ExcludeDropped != nil && *rl.ExcludeDropped
		observe.RegisterLimiter(reg, l.Status)
	}

	reader, err := mv.buildSource(spec, log)
	if err != nil {
		return nil, err
	}
	d := forward.Deps{Reader: reader, Limiter: lim, Logger: log, Tracer: o.tracer}
	if t := spec.Source.Transformer; t != nil {
		if t.Container != nil {
			d.Transformer = remoteOf(mv, udf.NewRemoteTransformer(o.udsDir, log))
		} else if d.Transformer, err = udf.NewBuiltinTransformer(t.Builtin.Name, t.Builtin.KWArgs, log); err != nil {
			return nil, err
		}
	}
	if u := spec.UDF; u != nil {
		if u.Container != nil {
			d.Mapper = remoteOf(mv, udf.NewRemoteMap(o.udsDir, log))
		} else if d.Mapper, err = udf.NewBuiltin(u.Builtin.Name, u.Builtin.KWArgs, log); err != nil {
			return nil, err
		}
	}
	d.Sink = o.sinkOverride
	if d.Sink == nil {
		d.Sink = mv.buildSink(&spec.Sink.AbstractSink, serverinfo.KindSink, log)
		if fb := spec.Sink.Fallback; fb != nil {
			d.Fallback = mv.buildSink(fb, serverinfo.KindFallbackSink, log)
		}
	}
	mv.tracker = forward.NewTracker(nil)
	mv.metrics = forward.NewMetrics(reg, mv.tracker)
	d.Metrics, d.Tracker = mv.metrics, mv.tracker
	opts := forward.Options{
		BatchSize:       spec.Limits.GetReadBatchSize(),
		ExcludeDropped:  excludeDropped,
		Retry:           retryPolicy(spec.Sink.RetryStrategy, spec.Sink.Fallback != nil),
		ShutdownTimeout: spec.Limits.GetReadTimeout() + 5*time.Second,
	}
	if mv.fwd, err = forward.New(d, opts); err != nil {
		return nil, err
	}
	if o.metricsAddr != "" {
		if mv.server, err = observe.Listen(o.metricsAddr, observe.Handlers{
			Gatherer: o.registry, Ready: mv.ready, Status: func() any { return mv.status() },
		}, log); err != nil {
			return nil, fmt.Errorf("--metrics-addr %s: %w", o.metricsAddr, err)
		}
		log.Info("serving metrics, health and status", zap.String("addr", mv.server.Addr().String()))
	}
	return mv, nil
}

func (mv *monoVertex) buildSource(spec *config.MonoVertexSpec, log *zap.Logger) (isb.Reader, error) {
	readTimeout := spec.Limits.GetReadTimeout()
	src := spec.Source
	switch {
	case src.Generator != nil:
		g := src.Generator
		cfg := source.GeneratorConfig{RPU: config.DefaultGeneratorRPU, Duration: config.DefaultGeneratorDuration,
			MsgSize: config.DefaultGeneratorMsgSize, Value: g.Value, Replica: mv.opts.replica, Vertex: mv.name, ReadTimeout: readTimeout}
		if g.RPU != nil {
			cfg.RPU = *g.RPU
		}
		if g.Duration != nil {
			cfg.Duration = g.Duration.Duration
		}
		if g.MsgSize != nil {
			cfg.MsgSize = int(*g.MsgSize)
		}
		if g.KeyCount != nil {
			cfg.KeyCount = int(*g.KeyCount)
		}
		if g.Jitter != nil {
			cfg.Jitter = g.Jitter.Duration
		}
		if g.ValueBlob != nil {
			blob, err := base64.StdEncoding.DecodeString(*g.ValueBlob)
			if err != nil {
				return nil, err
			}
			cfg.ValueBlob = blob
		}
		return source.NewGenerator(cfg)
	case src.HTTP != nil:
		return mv.buildHTTP(spec, log)
	case src.UDSource != nil:
		return remoteOf(mv, source.NewUD(mv.opts.udsDir, readTimeout, log)), nil
	}
	return nil, errors.New("spec.source: no supported source")
}

func (mv *monoVertex) buildHTTP(spec *config.MonoVertexSpec, log *zap.Logger) (isb.Reader, error) {
	h := spec.Source.HTTP
	addr := mv.opts.httpAddr
	if addr == "" {
		port := int32(8090)
		if h.Ports != nil && h.Ports.HTTP != nil {
			port = *h.Ports.HTTP
		}
		addr = ":" + strconv.Itoa(int(port))
	}
	cfg := source.HTTPConfig{Addr: addr, Vertex: mv.name, Queue: spec.Limits.GetReadBatchSize(),
		ReadTimeout: spec.Limits.GetReadTimeout(), Logger: log, RetryAfter: mv.retryAfter}
	if h.Auth != nil && h.Auth.Token != nil {
		token, err := readSecret(h.Auth.Token)
		if err != nil {
			return nil, fmt.Errorf("spec.source.http.auth.token: %w", err)
		}
		cfg.Token = token
	}
	s, err := source.NewHTTP(cfg)
	if err != nil {
		return nil, fmt.Errorf("http source on %s: %w", addr, err)
	}
	mv.closers = append(mv.closers, s.Close)
	log.Info("http source listening", zap.String("addr", s.Addr().String()), zap.String("path", "/vertices/"+mv.name))
	return s, nil
}

// retryAfter tells turned-away HTTP clients when tokens come: at the next epoch.
func (mv *monoVertex) retryAfter() time.Duration {
	if mv.limiter == nil {
		return time.Second
	}
	return time.Until(time.Unix(mv.limiter.Status().Epoch+1, 0))
}

// secretsDir is where Numaflow mounts the secrets a vertex names.
const secretsDir = "/var/numaflow/secrets"

// secretPath is the file of a secret: its own, or Numaflow's mount of it.
func secretPath(s *config.SecretKeySelector) string {
	if s.File != "" {
		return s.File
	}
	return filepath.Join(secretsDir, s.Name, s.Key)
}

// readSecret reads a secret, trimmed of surrounding white space.
func readSecret(s *config.SecretKeySelector) (string, error) {
	b, err := os.ReadFile(secretPath(s))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func (mv *monoVertex) buildSink(s *config.AbstractSink, kind serverinfo.Kind, log *zap.Logger) isb.Writer {
	switch {
	case s.Log != nil:
		return sink.NewLog(mv.opts.stdout)
	case s.UDSink != nil:
		return remoteOf(mv, sink.NewUD(mv.opts.udsDir, kind, log))
	}
	return sink.Blackhole{}
}

// remote notes a client of a user-defined server, to connect it before the
// forwarder starts, check it for /readyz, and close it after the forwarder.
func remoteOf[C udClient](mv *monoVertex, c C) C {
	mv.uds = append(mv.uds, c)
	mv.closers = append(mv.closers, c.Close)
	return c
}

// defaultFallbackSteps is how many writes a message gets before it goes to the
// fallback sink, when there is one and retryStrategy does not say.
const defaultFallbackSteps = 10

// retryPolicy maps a sink's retryStrategy to the forwarder's. sluice's default
// backs off from 1ms, doubling to at most 1s, and retries until the sink takes the
// message, or, when a fallback sink is configured, for 10 attempts before writing
// it there.
func retryPolicy(r *config.RetryStrategy, hasFallback bool) forward.RetryPolicy {
	p := forward.RetryPolicy{Interval: time.Millisecond, MaxInterval: time.Second}
	if hasFallback && (r == nil || r.OnFailure == nil) {
		p.Steps, p.OnFailure = defaultFallbackSteps, forward.Fallback
	}
	if r == nil {
		return p
	}
	if b := r.Backoff; b != nil {
		if b.Interval != nil {
			p.Interval = b.Interval.Duration
		}
		if b.Cap != nil {
			p.MaxInterval = b.Cap.Duration
		}
		if b.Steps != nil {
			p.Steps = int(*b.Steps)
		}
	}
	if r.OnFailure != nil {
		switch *r.OnFailure {
		case "fallback":
			p.OnFailure = forward.Fallback
		case "drop":
			p.OnFailure = forward.Drop
		}
	}
	return p
}

func (mv *monoVertex) ready() error {
	if !mv.running.Load() {
		return errors.New("not running")
	}
	for _, c := range mv.uds {
		if err := c.Ready(); err != nil {
			return err
		}
	}
	return nil
}

// connect waits until every user-defined server is up and ready. A server
// sluice cannot talk to is a usage error.
func (mv *monoVertex) connect(ctx context.Context) error {
	for _, c := range mv.uds {
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

func (mv *monoVertex) status() vertexStatus {
	s := vertexStatus{Vertex: mv.name, Replica: mv.opts.replica, Running: mv.running.Load(), Reasons: []string{}}
	if l := mv.limiter; l != nil {
		ls := l.Status()
		s.RateLimit, s.Mode, s.Epoch, s.Pool, s.Share, s.Granted, s.PoolSize, s.Rank =
			true, mv.mode, ls.Epoch, ls.Pool(), ls.Share, ls.Granted, ls.PoolSize, ls.Rank
	}
	var rs []forward.Reason
	s.Throttled, rs = mv.tracker.Throttled()
	for _, r := range rs {
		s.Reasons = append(s.Reasons, string(r))
	}
	s.ReadTotal = counterValue(mv.metrics.Read)
	s.WriteTotal = counterValue(mv.metrics.Written)
	return s
}

// run forwards until ctx is done (SIGTERM), then finishes the batch in flight,
// leaves the rate limiter's pool, and stops serving.
func (mv *monoVertex) run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	if mv.server != nil {
		g.Go(func() error { return mv.server.Serve(serveCtx) })
	}
	g.Go(func() error {
		defer stopServing()
		if err := mv.connect(gctx); err != nil || gctx.Err() != nil {
			return errors.Join(err, mv.close())
		}
		mv.running.Store(true)
		err := mv.fwd.Run(gctx)
		mv.running.Store(false)
		if cerr := mv.close(); err == nil {
			err = cerr
		}
		return err
	})
	return g.Wait()
}

// close releases what buildMonoVertex opened, in reverse order.
func (mv *monoVertex) close() error {
	var errs []error
	for i := len(mv.closers) - 1; i >= 0; i-- {
		errs = append(errs, mv.closers[i]())
	}
	mv.closers = nil
	return errors.Join(errs...)
}

// registerProcessCollectors adds the Go runtime and process metrics.
func registerProcessCollectors(reg *prometheus.Registry) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// counterValue reads a counter's current value.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
