// Package observe serves what operators look at: Prometheus metrics, health and
// readiness probes, a JSON status of the vertex and its rate limiter, and a
// status page of the limit on / that polls /status/live, all on one HTTP port,
// or one HTTPS port with a self-signed certificate as in Numaflow's pods
// ([ListenTLS], [SelfSignedTLS]). A [History] keeps the last epochs that
// /status/live lists. [NewRegistry] holds the Go runtime's and the process's
// metrics for a vertex's to join.
package observe

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// DefaultAddr is the default listen address of the observability port, the port
// Numaflow's vertices serve metrics on.
const DefaultAddr = ":2469"

// Server serves /metrics, /healthz, /livez, /sidecar-livez, /readyz, /status,
// /status/live and the status page on /.
type Server struct {
	srv *http.Server
	ln  net.Listener
	log *zap.Logger
}

// Handlers are what the server reports.
type Handlers struct {
	// Gatherer is scraped on /metrics.
	Gatherer prometheus.Gatherer
	// Ready reports whether the vertex is ready for traffic; /readyz answers 503
	// with the error's text until it returns nil. nil means always ready.
	Ready func() error
	// Status returns the value served as JSON on /status.
	Status func() any
	// PageData returns the value served as JSON on /status/live, with the
	// epochs after since (0 for all that are kept); the page on / polls it.
	// nil serves an empty object.
	PageData func(since int64) any
}

// Listen binds addr (":0" picks a free port) and returns a server ready to
// Serve over HTTP.
//
// /healthz, /livez and /sidecar-livez answer 200 while the process runs: /livez
// is the name Numaflow's pods probe the vertex with, and /sidecar-livez the one
// they probe its user-defined containers with (the vertex answers for them, as
// Numaflow's own does; a container that exits is restarted by the kubelet,
// and one that stops answering shows on /readyz).
func Listen(addr string, h Handlers, log *zap.Logger) (*Server, error) {
	return listen(addr, h, nil, log)
}

// ListenTLS is [Listen] over HTTPS with cfg, for instance [SelfSignedTLS]'s.
func ListenTLS(addr string, h Handlers, cfg *tls.Config, log *zap.Logger) (*Server, error) {
	return listen(addr, h, cfg, log)
}

func listen(addr string, h Handlers, cfg *tls.Config, log *zap.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewServer(ln, h, cfg, log), nil
}

// NewServer returns a server ready to Serve on ln, which it closes when Serve
// returns: over HTTPS with cfg, for instance [SelfSignedTLS]'s, or over HTTP
// when cfg is nil. A caller that binds its address early, to report one that
// cannot be bound before anything starts, hands the listener over so.
func NewServer(ln net.Listener, h Handlers, cfg *tls.Config, log *zap.Logger) *Server {
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(h.Gatherer, promhttp.HandlerOpts{}))
	alive := func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	}
	mux.HandleFunc("GET /healthz", alive)
	mux.HandleFunc("GET /livez", alive)
	mux.HandleFunc("GET /sidecar-livez", alive)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if h.Ready != nil {
			if err := h.Ready(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		var v any = struct{}{}
		if h.Status != nil {
			v = h.Status()
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(v)
	})
	handlePage(mux, h.PageData)
	if log == nil {
		log = zap.NewNop()
	}
	// The server's own complaints (a client that speaks HTTP to the HTTPS port)
	// go to the debug log, not to stderr unstructured.
	errLog, _ := zap.NewStdLogAt(log.Named("http"), zap.DebugLevel)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: errLog}
	return &Server{srv: srv, ln: ln, log: log}
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Start serves in a goroutine of its own, as [Server.Serve] does, and
// returns at once; stop shuts the server down and waits for it.
func (s *Server) Start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.Serve(ctx)
	}()
	return func() {
		cancel()
		<-served
	}
}

// Serve serves until ctx is done, then shuts down, giving open requests a second.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	// Shutdown waits for connections that never sent a request for seconds;
	// after a second, close whatever is left.
	if err := s.srv.Shutdown(sctx); err != nil {
		s.srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
