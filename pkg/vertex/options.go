package vertex

import (
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
)

// Option configures a [Vertex] beyond its [Spec].
type Option func(*options)

type options struct {
	replica       int
	region        string
	log           *zap.Logger
	registerer    prometheus.Registerer
	tracer        trace.Tracer
	clock         clock.Clock
	socketDir     string
	socketHint    string
	fixedDir      string
	httpAddr      string
	plainHTTPAddr string
	listen        func(addr string) (net.Listener, error)
	logSink       *sink.Log
	sideInputs    SideInputs
	startup       time.Duration

	numaflowMetrics bool
	readAhead       bool
}

// DefaultStartupTimeout is how long a vertex waits for its user-defined
// servers to be ready, unless WithStartupTimeout says otherwise: that of
// Numaflow's startup probe of a user-defined container.
const DefaultStartupTimeout = 120 * time.Second

// WithStartupTimeout bounds the wait of Run for the vertex's user-defined
// servers to be ready, from its start (default DefaultStartupTimeout); past
// it, Run fails with a [*StartupError]. 0 or less waits for ever.
func WithStartupTimeout(d time.Duration) Option { return func(o *options) { o.startup = d } }

// WithReadAhead makes the vertex read its next batch while the current one is
// mapped and written (NUMAFLOW_READ_AHEAD); a streaming MonoVertex always does.
func WithReadAhead(on bool) Option { return func(o *options) { o.readAhead = on } }

// WithReplica sets the replica's index (default 0): it ranks the replica among
// its rate limiter's replicas and numbers the messages of a generator.
func WithReplica(n int) Option { return func(o *options) { o.replica = n } }

// WithRegion sets the replica's region, for a rate limit with regions
// (RateLimit.Regions): the replica takes its region's part of the limit and
// lends to and borrows from the other regions.
func WithRegion(name string) Option { return func(o *options) { o.region = name } }

// WithLogger logs the vertex's changes of state and failures (default: no logs).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithRegisterer registers the vertex's metrics with r, labelled with the
// vertex and the replica (default: a registry of the vertex's own).
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.registerer = r } }

// WithTracer traces every forward iteration with t (default: no tracing, at no
// cost).
func WithTracer(t trace.Tracer) Option { return func(o *options) { o.tracer = t } }

// WithClock makes the rate limiter, the throttle tracker and a generator source
// read time from c (default: the wall clock). The deadlines of calls to
// user-defined servers, which answer in real time, run on the wall clock.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithSocketDir is where the vertex's user-defined containers have their
// sockets and server-info files (default /var/run/numaflow). Run creates it
// when it is missing.
func WithSocketDir(dir string) Option { return func(o *options) { o.socketDir = dir } }

// WithSocketDirHint says what to do, in the warning logged when a user-defined
// server writes its server-info file to /var/run/numaflow while the vertex
// waits for it in another socket directory: such a server (numaflow-go's)
// knows only that directory.
func WithSocketDirHint(hint string) Option { return func(o *options) { o.socketHint = hint } }

// WithHTTPAddr sets the address an http source serves HTTPS on, instead of
// its ports.https (default :8443).
func WithHTTPAddr(addr string) Option { return func(o *options) { o.httpAddr = addr } }

// WithPlainHTTPAddr sets the address an http source with ports.http serves
// plain HTTP on, instead of :ports.http. An http source without ports.http
// serves HTTPS only, with or without it.
func WithPlainHTTPAddr(addr string) Option { return func(o *options) { o.plainHTTPAddr = addr } }

// WithListen makes the vertex's http source listen with listen instead of
// net.Listen: a caller that binds the source's address before anything
// starts, to report an address that cannot be bound up front, hands the
// listener over so.
func WithListen(listen func(addr string) (net.Listener, error)) Option {
	return func(o *options) { o.listen = listen }
}

// WithLogSink makes a log sink write through s: vertices of one process share
// one, so that their lines never interleave (default: one on stdout).
func WithLogSink(s *sink.Log) Option { return func(o *options) { o.logSink = s } }

func buildOptions(opts []Option) options {
	o := options{startup: DefaultStartupTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.registerer == nil {
		o.registerer = prometheus.NewRegistry()
	}
	if o.clock == nil {
		o.clock = clock.Real()
	}
	if o.socketDir == "" {
		o.socketDir = serverinfo.DefaultDir
	}
	if o.fixedDir == "" {
		o.fixedDir = serverinfo.DefaultDir
	}
	if o.socketHint == "" {
		o.socketHint = defaultSocketDirHint
	}
	if o.logSink == nil {
		o.logSink = sink.NewLog(os.Stdout)
	}
	if o.listen == nil {
		o.listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	return o
}
