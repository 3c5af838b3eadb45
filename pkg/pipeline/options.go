package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/enum"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// Backend is where a pipeline's buffers live. The zero value is [OnMemory].
type Backend uint8

const (
	// OnMemory keeps the buffers in the process: every vertex runs in it.
	OnMemory Backend = iota
	// OnJetStream keeps the buffers in NATS JetStream (spec.isb.jetstream).
	OnJetStream
)

var backendNames = [...]string{OnMemory: "memory", OnJetStream: "jetstream"}

// String returns memory or jetstream.
func (b Backend) String() string { return enum.Name(backendNames[:], b, "Backend") }

// MarshalText returns the backend's name.
func (b Backend) MarshalText() ([]byte, error) { return enum.Marshal(backendNames[:], b, "buffers") }

// UnmarshalText parses memory or jetstream and rejects any other name.
func (b *Backend) UnmarshalText(text []byte) error {
	return enum.Parse(b, backendNames[:], text, "buffers")
}

// Option configures a [Pipeline].
type Option func(*options)

type options struct {
	backend      Backend
	only         string
	drainTimeout time.Duration
	log          *zap.Logger
	registerer   prometheus.Registerer
	socketDir    string
	replica      int
	stateDir     string
	vertexOpts   []vertex.Option

	sideInputsDir string
}

// DefaultDrainTimeout is how long, once its sources have stopped, a pipeline
// in one process waits for its in-memory buffers to empty.
const DefaultDrainTimeout = 30 * time.Second

// WithBackend puts the buffers in memory (the default) or on JetStream.
func WithBackend(b Backend) Option { return func(o *options) { o.backend = b } }

// WithVertex runs only the vertex called name, one replica of it, on
// JetStream: the other vertices run in other processes.
func WithVertex(name string) Option { return func(o *options) { o.only = name } }

// WithReplica makes the vertex that runs alone ([WithVertex]) replica i of
// its vertex (default 0): a reduce vertex's replica i reads partition i, and
// so does an ordered one's.
func WithReplica(i int) Option {
	return func(o *options) {
		o.replica = i
		o.vertexOpts = append(o.vertexOpts, vertex.WithReplica(i))
	}
}

// WithDrainTimeout bounds how long Run waits, once the sources have stopped,
// for the in-memory buffers to empty (default 30s).
func WithDrainTimeout(d time.Duration) Option { return func(o *options) { o.drainTimeout = d } }

// WithLogger logs the pipeline's and its vertices' changes of state (default:
// no logs).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithRegisterer registers the metrics of every vertex and edge with r
// (default: a registry of the pipeline's own).
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.registerer = r } }

// WithSocketDir is where the user-defined containers have their sockets
// (default /var/run/numaflow). When more than one vertex in the process has
// user-defined containers, those of each vertex are in a directory of its own
// in it, [SocketDir]; see [SocketDirs].
func WithSocketDir(dir string) Option { return func(o *options) { o.socketDir = dir } }

// WithStateDir is where reduce vertices keep the windows they have read and
// not yet reduced: each in a directory of its own,
// [vertexconfig.StateDir](dir, vertex), unless its storage is no_store
// (default: [DefaultStateDir] of the pipeline).
func WithStateDir(dir string) Option { return func(o *options) { o.stateDir = dir } }

// DefaultStateDir is the state directory of pipeline when [WithStateDir]
// gives none: sluice-state/<pipeline> in [os.TempDir].
func DefaultStateDir(pipeline string) string {
	return filepath.Join(os.TempDir(), "sluice-state", pipeline)
}

// WithVertexOptions adds options of every vertex: the replica, a tracer, a
// clock, an http source's address, the log sink (default: one on stdout, for
// every vertex).
func WithVertexOptions(opts ...vertex.Option) Option {
	return func(o *options) { o.vertexOpts = append(o.vertexOpts, opts...) }
}

// SocketDir is the directory of the sockets of vertex's user-defined
// containers when a process runs more than one vertex with such containers:
// the containers of each vertex have sockets of the same names.
func SocketDir(base, vertex string) string { return filepath.Join(base, vertex) }

// SocketDirs returns the socket directory of each vertex of p that has
// user-defined containers and runs in this process (the vertex only, unless
// only is ""), base being the process's. When one vertex at most has such
// containers, it gets base itself, so that servers that know only
// /var/run/numaflow (numaflow-go's) are found there; with more, each gets
// [SocketDir](base, vertex), which such servers cannot use: they serve one
// vertex per process.
func SocketDirs(p *config.Pipeline, base, only string) map[string]string {
	dirs := map[string]string{}
	for _, v := range p.Spec.Vertices {
		if (only == "" || v.Name == only) && hasContainers(v) {
			dirs[v.Name] = base
		}
	}
	if len(dirs) > 1 {
		for name := range dirs {
			dirs[name] = SocketDir(base, name)
		}
	}
	return dirs
}

// hasContainers reports whether v has a user-defined container.
func hasContainers(v config.Vertex) bool {
	src, snk := v.Source, v.Sink
	return (src != nil && (src.UDSource != nil || (src.Transformer != nil && src.Transformer.Container != nil))) ||
		(v.UDF != nil && v.UDF.Container != nil) ||
		(snk != nil && (snk.UDSink != nil || (snk.Fallback != nil && snk.Fallback.UDSink != nil)))
}

// sharedSocketDirHint is what to do when a server that knows only
// /var/run/numaflow serves a vertex of a process that runs several with
// user-defined containers.
const sharedSocketDirHint = "such servers serve one vertex per process, and this process runs more than one vertex " +
	"with user-defined containers, each in a directory of its own: run each of those vertices as a process of its own " +
	"(vertex run -f FILE --vertex NAME, with the buffers on JetStream)"

func buildOptions(name string, opts []Option) (options, error) {
	o := options{drainTimeout: DefaultDrainTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.registerer == nil {
		o.registerer = prometheus.NewRegistry()
	}
	if o.socketDir == "" {
		o.socketDir = serverinfo.DefaultDir
	}
	if o.stateDir == "" {
		o.stateDir = DefaultStateDir(name)
	}
	o.sideInputsDir = sideInputsDirOrDefault(o.sideInputsDir)
	if o.only != "" && o.backend != OnJetStream {
		return o, fmt.Errorf("pipeline: vertex %q alone runs on jetstream, not on %s", o.only, o.backend)
	}
	if int(o.backend) >= len(backendNames) {
		return o, fmt.Errorf("pipeline: unknown backend %d", uint8(o.backend))
	}
	// One log sink for every vertex, unless the caller gives one.
	o.vertexOpts = append([]vertex.Option{vertex.WithLogSink(sink.NewLog(os.Stdout)), vertex.WithLogger(o.log),
		vertex.WithRegisterer(o.registerer)}, o.vertexOpts...)
	return o, nil
}
