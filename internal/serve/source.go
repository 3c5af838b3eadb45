package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// sourceDrain is how long a stopping source role waits for its client to
// ack what it read before it hands the rest back to the source: within the
// 5s the vertex gives its last batch beyond its read timeout, so that the
// nacks reach the source before the vertex stops.
const sourceDrain = 3 * time.Second

func init() {
	register(Role{Name: "source", Help: "a UD source server (source.sock) over the file's source, under its rate limit", Run: runSource})
}

// sourceSpec returns the spec of the vertex whose source o's file names,
// with its path in the file, or a usage error naming the field.
func sourceSpec(o Options) (vertex.Spec, string, error) {
	pt := o.part()
	src, path := pt.source, pt.path+".source"
	switch {
	case !pt.monoVertex && src == nil:
		return vertex.Spec{}, "", cli.Usagef("serve: --role source: vertex %q of %s has no source (spec.vertices[].source)", o.Vertex, o.Path)
	case src == nil:
		return vertex.Spec{}, "", cli.Usagef("serve: --role source: %s has no source (%s)", o.Path, path)
	case src.UDSource != nil:
		return vertex.Spec{}, "", cli.Usagef("serve: --role source: %s.udsource is a user-defined source; the role serves a generator, http, kafka, nats or jetstream source", path)
	case src.Transformer != nil:
		return vertex.Spec{}, "", cli.Usagef("serve: --role source: %s.transformer is not served: the role serves the source alone", path)
	}
	spec, err := o.spec()
	if err != nil {
		return vertex.Spec{}, "", cli.Usagef("serve: --role source: %v", err)
	}
	return spec, path, nil
}

func runSource(ctx context.Context, o Options) error {
	spec, path, err := sourceSpec(o)
	if err != nil {
		return err
	}
	// One partition per replica, numbered by the replica's index, as
	// Numaflow's runtime gives it in NUMAFLOW_REPLICA.
	parts := sourcer.DefaultPartitions()
	b := newBridge(sourceDrain, parts)
	open := spec.Source
	spec.Source = func(env vertex.Env) (isb.Reader, error) {
		r, err := open(env)
		if p, ok := r.(interface {
			Pending(context.Context) (int64, error)
		}); ok && err == nil {
			b.pending = func(ctx context.Context) int64 {
				n, err := p.Pending(ctx)
				if err != nil {
					return sourcer.PendingUnknown
				}
				return n
			}
		}
		return r, err
	}
	spec.Transformer, spec.Map, spec.Fallback, spec.OnSuccess, spec.Bypass, spec.Output = nil, nil, nil, nil, nil, nil
	spec.Sink = func(vertex.Env) (isb.Writer, error) { return b, nil }
	reg := observe.NewRegistry()
	v, err := vertex.New(spec, vertex.WithReplica(int(parts[0])), vertex.WithLogger(o.Log), vertex.WithRegisterer(reg), vertex.WithSocketDir(o.SocketDir))
	if err != nil {
		var fe *config.FieldError
		if errors.As(err, &fe) {
			return cli.Usagef("serve: --role source: %v", err)
		}
		return fmt.Errorf("serve: --role source: %s: %w", path, err)
	}
	b.ready = v.Ready
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		v.Close()
		return cli.Usagef("serve: --addr (%q): %v", o.Addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		if err := v.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()

	// The server outlives the vertex: while the vertex drains, its client
	// goes on reading and acking.
	sctx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	srv := sourcer.NewServer(b, sourcer.WithSocketDir(o.SocketDir))
	served := make(chan error, 1)
	go func() { served <- srv.Start(sctx) }()
	ran := make(chan error, 1)
	go func() { ran <- v.Run(ctx) }()
	o.Log.Info("serving", zap.String("source", path), zap.String("socketDir", o.SocketDir), zap.String("addr", ln.Addr().String()))
	var runErr, srvErr error
	select {
	case runErr = <-ran:
		b.close()
		stopServer()
		srvErr = <-served
	case srvErr = <-served:
		b.close()
		runErr = <-ran
		stopServer()
	case <-ctx.Done():
		b.close()
		runErr = <-ran
		stopServer()
		srvErr = <-served
	}
	o.Log.Info("stopped", zap.NamedError("vertex", runErr), zap.NamedError("server", srvErr))
	return errors.Join(runErr, srvErr)
}
