package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/observe"
)

func runRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", `usage: vertex run -f FILE [flags]

Runs one replica of the MonoVertex in FILE until SIGTERM or SIGINT: it stops
reading, finishes and acks the batch in flight, leaves the rate limiter's pool and
exits 0.

With a Pipeline in FILE, --vertex NAME runs one replica of that vertex, reading
and writing its buffers on JetStream (spec.isb.jetstream); without --vertex,
every vertex runs in this process, on in-memory buffers (--isb memory, the
default) or on JetStream (--isb jetstream). On SIGTERM the sources stop first and
the rest drain the in-memory buffers before they stop.

flags:
`)
	file := fs.String("f", "", "the MonoVertex or Pipeline YAML (required)")
	replica := fs.String("replica", "", "this replica's index (default: $NUMAFLOW_REPLICA, else 0)")
	metricsAddr := fs.String("metrics-addr", observe.DefaultAddr, "address of /metrics, /healthz, /readyz and /status")
	httpAddr := fs.String("http-addr", "", "listen address of an http source (default: its ports.http, else :8090)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	otlp := fs.String("otlp-endpoint", "", "OTLP gRPC endpoint for traces of forward iterations (default: $OTEL_EXPORTER_OTLP_ENDPOINT; unset: no tracing)")
	udsDir := fs.String("uds-dir", "", "directory of the user-defined containers' sockets and server-info files (default /var/run/numaflow; with --spawn, a new temporary directory)")
	spawn := fs.Bool("spawn", false, "start each user-defined container's command as a child process, for local runs")
	vertexName := fs.String("vertex", "", "Pipeline only: run this vertex alone, on JetStream")
	isbKind := fs.String("isb", "", "Pipeline only, without --vertex: the buffers, memory (default) or jetstream")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	if *file == "" {
		return usagef("run: -f FILE is required")
	}
	rep, err := replicaIndex(*replica)
	if err != nil {
		return err
	}
	log, err := newLogger(*logLevel, stderr)
	if err != nil {
		return err
	}
	defer log.Sync()

	f, err := loadConfig(*file)
	if err != nil {
		return err
	}
	logIgnored(log, f)
	switch {
	case f.MonoVertex != nil && *vertexName != "":
		return usagef("run: --vertex %q: %s is a MonoVertex; --vertex picks a vertex of a Pipeline", *vertexName, *file)
	case f.MonoVertex != nil && *isbKind != "":
		return usagef("run: --isb %q: %s is a MonoVertex, which has no buffers", *isbKind, *file)
	case *vertexName != "" && *isbKind != "" && *isbKind != "jetstream":
		return usagef("run: --isb %q: one vertex alone (--vertex) runs on jetstream", *isbKind)
	case *isbKind != "" && *isbKind != "memory" && *isbKind != "jetstream":
		return usagef("run: --isb %q: want memory or jetstream", *isbKind)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	tracer, shutdownTracing, err := newTracer(ctx, *otlp, f.Name(), rep)
	if err != nil {
		return err
	}
	defer shutdownTracing()

	dir := *udsDir
	if dir == "" && *spawn {
		if dir, err = os.MkdirTemp("", "sluice-uds-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	reg := prometheus.NewRegistry()
	registerProcessCollectors(reg)
	o := runtimeOptions{
		replica: rep, metricsAddr: *metricsAddr, httpAddr: *httpAddr,
		stdout: stdout, stderr: stderr, log: log, tracer: tracer, registry: reg,
		udsDir: dir, spawn: *spawn,
	}
	if f.Pipeline != nil {
		if *vertexName != "" {
			return runPipelineVertex(ctx, f.Pipeline, *vertexName, o)
		}
		return runPipeline(ctx, f.Pipeline, *isbKind == "jetstream", o)
	}
	mv, err := buildMonoVertex(f.MonoVertex, o)
	if err != nil {
		return err
	}
	log.Info("running", zap.String("vertex", f.Name()), zap.Int("replica", rep))
	err = mv.run(ctx)
	log.Info("stopped", zap.Error(err))
	return err
}

// replicaIndex returns the --replica flag, or $NUMAFLOW_REPLICA, or 0.
func replicaIndex(flagValue string) (int, error) {
	v, name := flagValue, "--replica"
	if v == "" {
		v, name = os.Getenv("NUMAFLOW_REPLICA"), "NUMAFLOW_REPLICA"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, usagef("%s (%q) must be a whole number, 0 or more", name, v)
	}
	return n, nil
}

// loadConfig loads and validates a config; a bad config is a usage error listing
// every problem.
func loadConfig(path string) (*config.File, error) {
	f, err := config.Load(path)
	if err == nil {
		return f, nil
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		return nil, &usageError{msg: fmt.Sprintf("%d problem(s) in the config:\n%s", len(ce.Problems), ce.Error())}
	}
	return nil, &usageError{msg: err.Error()}
}

// logIgnored names, in one log line, the Kubernetes-only fields the config sets.
func logIgnored(log *zap.Logger, f *config.File) {
	if len(f.Ignored) > 0 {
		log.Info("ignoring Kubernetes-only fields", zap.Strings("fields", f.Ignored))
	}
}
