package vertex

import (
	"context"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/udsconn"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// Env is what the constructors of a vertex's parts ([SourceFunc],
// [SinkFunc], [FunctionFunc], [StoreFunc]) get from the vertex: who it is,
// its options, and where to hand what they open.
type Env struct {
	// Name and StoreKey are the vertex's ([Spec]), Replica its index.
	Name     string
	StoreKey string
	Replica  int
	// Region is the replica's region ([WithRegion]), "" for none: a store
	// opens the region's store of a limit with regions.
	Region string
	// Limits are the vertex's.
	Limits Limits
	// Log is the vertex's logger, Clock its clock.
	Log   *zap.Logger
	Clock clock.Clock
	// SocketDir is where the user-defined containers have their sockets.
	SocketDir string
	// HTTPAddr is the HTTPS address [WithHTTPAddr] gives an http source,
	// or "".
	HTTPAddr string
	// PlainHTTPAddr is the plain HTTP address [WithPlainHTTPAddr] gives an
	// http source with ports.http, or "".
	PlainHTTPAddr string
	// Listen is how an http source listens on its address ([WithListen];
	// by default net.Listen).
	Listen func(addr string) (net.Listener, error)
	// LogSink is the log sink's writer ([WithLogSink]).
	LogSink *sink.Log
	// Watermark returns the vertex's watermark now, watermark.None while
	// it has none: what requests to its functions carry.
	Watermark func() time.Time
	// Calls are the calls to the vertex's user-defined servers: a client
	// given [udf.WithCalls](Calls) has the vertex's UDFTimeout as its
	// deadline, and its calls in /status and in the metric
	// sluice_udf_call_oldest_seconds.
	Calls *udsconn.Calls

	v *Vertex
}

// UDClient is a client of a user-defined container's server.
type UDClient interface {
	Connect(ctx context.Context) error
	Ready() error
	Close() error
}

// OnClose adds f to what the vertex closes, in reverse order, after its
// forwarders stop.
func (e Env) OnClose(f func() error) { e.v.onClose(f) }

// Remote notes c, a client of a user-defined server of kind: the vertex
// connects it before its forwarders start, checks it in Ready, and closes
// it after them.
func (e Env) Remote(kind udf.Kind, c UDClient) { e.v.remote(kind, c) }

// Shared returns the writer the vertex's forwarders share under key: the
// first call with key opens it with open, the later ones return it. A sink
// that one client serves for every forwarder (Kafka, http) opens it so.
func (e Env) Shared(key any, open func() (isb.Writer, error)) (isb.Writer, error) {
	v := e.v
	if w, ok := v.shared[key]; ok {
		return w, nil
	}
	w, err := open()
	if err != nil {
		return nil, err
	}
	if v.shared == nil {
		v.shared = map[any]isb.Writer{}
	}
	v.shared[key] = w
	return w, nil
}

// RetryAfter tells turned-away clients when tokens come: at the next epoch of
// the vertex's rate limiter, or in a second without one.
func (e Env) RetryAfter() time.Duration { return e.v.retryAfter() }

// env returns the Env of v's constructors.
func (v *Vertex) env() Env {
	return Env{Name: v.spec.Name, StoreKey: v.spec.StoreKey, Replica: v.o.replica, Region: v.region(), Limits: v.spec.Limits,
		Log: v.log, Clock: v.o.clock, SocketDir: v.o.socketDir, HTTPAddr: v.o.httpAddr, PlainHTTPAddr: v.o.plainHTTPAddr, Listen: v.o.listen, LogSink: v.o.logSink,
		Watermark: v.watermark, Calls: v.calls, v: v}
}
