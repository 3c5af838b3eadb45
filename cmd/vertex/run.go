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

flags:
`)
	file := fs.String("f", "", "the MonoVertex YAML (required)")
	replica := fs.String("replica", "", "this replica's index (default: $NUMAFLOW_REPLICA, else 0)")
	metricsAddr := fs.String("metrics-addr", observe.DefaultAddr, "address of /metrics, /healthz, /readyz and /status")
	httpAddr := fs.String("http-addr", "", "listen address of an http source (default: its ports.http, else :8090)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	otlp := fs.String("otlp-endpoint", "", "OTLP gRPC endpoint for traces of forward iterations (default: $OTEL_EXPORTER_OTLP_ENDPOINT; unset: no tracing)")
	udsDir := fs.String("uds-dir", "", "directory of the user-defined containers' sockets and server-info files (default /var/run/numaflow; with --spawn, a new temporary directory)")
	spawn := fs.Bool("spawn", false, "start each user-defined container's command as a child process, for local runs")
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
	if f.MonoVertex == nil {
		return usagef("run: %s is a Pipeline; running pipelines is not supported yet", *file)
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
	mv, err := buildMonoVertex(f.MonoVertex, runtimeOptions{
		replica: rep, metricsAddr: *metricsAddr, httpAddr: *httpAddr,
		stdout: stdout, stderr: stderr, log: log, tracer: tracer, registry: reg,
		udsDir: dir, spawn: *spawn,
	})
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
