package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/containers"
	"github.com/sluiceflow/sluice/internal/listen"
	"github.com/sluiceflow/sluice/internal/reload"
	"github.com/sluiceflow/sluice/internal/spawn"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// runFlags are the flags of `vertex run`.
type runFlags struct {
	file, replica, metricsAddr, httpAddr, plainHTTPAddr, logLevel, otlp, udsDir, vertex, isb, stateDir, region string
	spawn                                                                                                      bool
	reloadInterval                                                                                             time.Duration
	// containers is the engine of the containers with an image alone;
	// startupTimeout bounds the wait for the user-defined servers.
	containers     string
	startupTimeout time.Duration
	// sideInputsDir is where vertices find side-input files;
	// sideInputsManager runs a pipeline's side inputs alone.
	sideInputsDir     string
	sideInputsManager bool
	// runtimeErrorsDir is where the processor records the user-defined
	// containers' errors, and runtimeAddr where it serves them.
	runtimeErrorsDir, runtimeAddr string
}

func runRun(args []string, stdout, stderr io.Writer) error {
	fl, err := parseRunFlags(args, stdout)
	if err != nil {
		return err
	}
	rep, err := cli.ReplicaIndex(fl.replica)
	if err != nil {
		return err
	}
	log, err := cli.NewLogger(fl.logLevel, stderr)
	if err != nil {
		return err
	}
	defer log.Sync()
	f, err := cli.LoadConfig(fl.file)
	if err != nil {
		return err
	}
	cli.LogIgnored(log, f)
	if err := checkRunFlags(fl, f); err != nil {
		return err
	}
	name := f.Name()
	if fl.vertex != "" {
		name = fl.vertex
	}
	reg := observe.NewRegistry()
	w := reload.New(fl.file, f, reload.Deps{Interval: fl.reloadInterval, Log: log, Registerer: reg, Vertex: name, Replica: rep})
	return execute(f, runner{flags: fl, log: log, replica: rep, reg: reg, reload: w}, stdout, stderr)
}

// execute runs what f holds as r says (its flags, log, replica, registry, and
// TLS and Numaflow's metrics for the processor) until SIGTERM or SIGINT.
func execute(f *config.File, r runner, stdout, stderr io.Writer) error {
	fl, log, rep := r.flags, r.log, r.replica
	// What cannot be bound is refused before anything starts.
	ls, err := listen.Bind(listen.Flags{MetricsAddr: fl.metricsAddr, HTTPAddr: fl.httpAddr, PlainHTTPAddr: fl.plainHTTPAddr,
		Vertex: fl.vertex, SideInputsManager: fl.sideInputsManager}, f)
	if err != nil {
		return err
	}
	defer ls.Close()
	r.listeners = ls
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	tracer, shutdownTracing, err := observe.NewTracer(ctx, fl.otlp, f.Name(), rep)
	if err != nil {
		return usagef("--otlp-endpoint (%q): %v", fl.otlp, err)
	}
	defer shutdownTracing()
	plan, stopContainers, err := containers.Start(ctx, f, spawn.Choice{Only: fl.vertex, SideInputsManager: fl.sideInputsManager, Dir: fl.udsDir,
		Commands: fl.spawn, Engine: fl.containers, SideInputsDir: fl.sideInputsDir, Log: log},
		spawn.Deps{Only: fl.vertex, Replica: rep, Stdout: stdout, Stderr: stderr, Log: log, SideInputsManager: fl.sideInputsManager})
	if err != nil {
		return err
	}
	defer stopContainers()
	r.dir, r.flags.sideInputsDir = plan.Dir, plan.SideInputsDir
	r.vopts = []vertex.Option{vertex.WithReplica(rep), vertex.WithLogger(log), vertex.WithRegisterer(r.reg),
		vertex.WithTracer(tracer), vertex.WithHTTPAddr(fl.httpAddr), vertex.WithPlainHTTPAddr(fl.plainHTTPAddr),
		vertex.WithLogSink(sink.NewLog(stdout)),
		vertex.WithSocketDirHint(containers.SocketDirHint), vertex.WithRegion(fl.region), vertex.WithListen(ls.Listen),
		vertex.WithStartupTimeout(fl.startupTimeout)}
	if on, set, err := vertexconfig.ReadAhead(os.Getenv(vertexconfig.EnvReadAhead)); err != nil {
		return usagef("%v", err)
	} else if set {
		r.vopts = append(r.vopts, vertex.WithReadAhead(on))
	}
	switch {
	case fl.sideInputsManager:
		err = r.sideInputsManager(ctx, f.Pipeline)
	case f.Pipeline != nil:
		err = r.pipeline(ctx, f.Pipeline)
	default:
		err = r.monoVertex(ctx, f.MonoVertex)
	}
	log.Info("stopped", zap.Error(err))
	return runError(err, fl, rep)
}

func parseRunFlags(args []string, stdout io.Writer) (runFlags, error) {
	fs := cli.NewFlagSet("run", `usage: vertex run -f FILE [flags]

Runs one replica of the MonoVertex in FILE until SIGTERM or SIGINT: it stops
reading, finishes and acks the batches in flight, leaves the rate limiter's pool
and exits 0. NUMAFLOW_READ_AHEAD=true reads the next batch while the current one
is mapped and written; spec.streaming: true keeps limits.concurrency messages in
flight.

With a Pipeline in FILE, --vertex NAME runs one replica of that vertex, reading
and writing its buffers on JetStream (spec.isb.jetstream); without --vertex,
every vertex runs in this process, on in-memory buffers (--isb memory, the
default) or on JetStream (--isb jetstream). On SIGTERM the sources stop first and
the rest drain the in-memory buffers (for at most 30s) before they stop; a
second signal exits at once.

A Pipeline's side inputs (spec.sideInputs) run in the process that runs every
vertex; with --vertex, they run in a process of their own,
--side-inputs-manager, their values travelling in the JetStream bucket
<pipeline>-side-inputs. Vertices that name side inputs find their values as
files in --side-inputs-dir and read nothing until each has one.

While it runs, a change of FILE (looked at every --reload-interval, and at
once on SIGHUP) to the max, min, rampUpDuration, modes or shadow of a rate
limit is applied without a restart: with a Redis store every replica switches
at the same epoch boundary. Any other change is refused with one log line and
the running config stays.

flags:
`)
	var fl runFlags
	fs.StringVar(&fl.file, "f", "", "the MonoVertex or Pipeline YAML (required)")
	fs.StringVar(&fl.replica, "replica", "", "this replica's index (default: $NUMAFLOW_REPLICA, else 0)")
	fs.StringVar(&fl.region, "region", os.Getenv("SLUICE_REGION"), "this replica's region, for a rate limit with regions (default: $SLUICE_REGION)")
	fs.StringVar(&fl.metricsAddr, "metrics-addr", observe.DefaultAddr, "address of /metrics, /healthz, /readyz, /status, /status/live and the status page on /")
	fs.StringVar(&fl.httpAddr, "http-addr", "", "HTTPS address of an http source (default: :ports.https, else :8443)")
	fs.StringVar(&fl.plainHTTPAddr, "http-plain-addr", "", "plain HTTP address of an http source with ports.http (default: :ports.http)")
	fs.StringVar(&fl.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&fl.otlp, "otlp-endpoint", "", "OTLP gRPC endpoint for traces of forward iterations (default: $OTEL_EXPORTER_OTLP_ENDPOINT; unset: no tracing)")
	fs.StringVar(&fl.udsDir, "uds-dir", "", "directory of the user-defined containers' sockets and server-info files, created if missing (default /var/run/numaflow; when this process starts containers, a new private directory that each container sees as /var/run/numaflow)")
	fs.BoolVar(&fl.spawn, "spawn", false, "start each user-defined container's command as a child process, in a mount namespace of its own where it can, for local runs")
	fs.StringVar(&fl.containers, "containers", "", "run the user-defined containers that have an image and no command with this engine: podman, docker or none (default: the first of podman and docker that can run containers here; none with --uds-dir, where the servers run on their own)")
	fs.ConfigDurationVar(&fl.startupTimeout, "startup-timeout", vertex.DefaultStartupTimeout, "how long a vertex waits for its user-defined servers to be ready before it fails (0: for ever)")
	fs.StringVar(&fl.vertex, "vertex", "", "Pipeline only: run this vertex alone, on JetStream")
	fs.BoolVar(&fl.sideInputsManager, "side-inputs-manager", false, "Pipeline only: run the side inputs alone, their values going to the vertices through JetStream")
	fs.StringVar(&fl.sideInputsDir, "side-inputs-dir", "", "Pipeline only: where vertices that name side inputs find their values, a file each (default /var/numaflow/side-inputs)")
	fs.StringVar(&fl.isb, "isb", "", "Pipeline only, without --vertex: the buffers, memory (default) or jetstream")
	fs.StringVar(&fl.stateDir, "state-dir", "", "Pipeline only: where reduce vertices keep the windows they have read, each in DIR/<vertex>, "+
		"unless its storage is no_store (default $TMPDIR/sluice-state/<pipeline>; in a pod, the reduce's volume, such as /var/numaflow/pbq)")
	fs.ConfigDurationVar(&fl.reloadInterval, "reload-interval", reload.DefaultInterval, "how often FILE is looked at for a live change of a rate limit (0: on SIGHUP only)")
	if err := fs.ParseArgs(args, stdout); err != nil {
		return fl, err
	}
	if fl.file == "" {
		return fl, usagef("run: -f FILE is required")
	}
	if fl.reloadInterval < 0 {
		return fl, usagef("run: --reload-interval (%v) must not be negative", fl.reloadInterval)
	}
	if err := cli.CheckOTLP(fl.otlp); err != nil {
		return fl, usagef("run: %v", err)
	}
	switch fl.containers {
	case "", "podman", "docker", "none":
	default:
		return fl, usagef("run: --containers (%q): want podman, docker or none", fl.containers)
	}
	if fl.startupTimeout < 0 {
		return fl, usagef("run: --startup-timeout (%v) must not be negative", fl.startupTimeout)
	}
	return fl, nil
}

// checkRunFlags checks the flags that depend on what FILE holds.
func checkRunFlags(fl runFlags, f *config.File) error {
	switch {
	case f.MonoVertex != nil && fl.vertex != "":
		return usagef("run: --vertex %q: %s is a MonoVertex; --vertex picks a vertex of a Pipeline", fl.vertex, fl.file)
	case f.MonoVertex != nil && fl.stateDir != "":
		return usagef("run: --state-dir %q: %s is a MonoVertex, which has no reduce", fl.stateDir, fl.file)
	case f.MonoVertex != nil && fl.isb != "":
		return usagef("run: --isb %q: %s is a MonoVertex, which has no buffers", fl.isb, fl.file)
	case fl.vertex != "" && fl.isb != "" && fl.isb != "jetstream":
		return usagef("run: --isb %q: one vertex alone (--vertex) runs on jetstream", fl.isb)
	case fl.isb != "" && fl.isb != "memory" && fl.isb != "jetstream":
		return usagef("run: --isb %q: want memory or jetstream", fl.isb)
	case f.MonoVertex != nil && (fl.sideInputsManager || fl.sideInputsDir != ""):
		return usagef("run: --side-inputs-manager and --side-inputs-dir: %s is a MonoVertex, which has no side inputs", fl.file)
	case fl.sideInputsManager && fl.vertex != "":
		return usagef("run: --side-inputs-manager runs the side inputs alone, without a vertex (--vertex %q)", fl.vertex)
	case fl.sideInputsManager && len(f.Pipeline.Spec.SideInputs) == 0:
		return usagef("run: --side-inputs-manager: pipeline %q has no side inputs (spec.sideInputs)", f.Name())
	case fl.vertex != "" && f.Pipeline.Vertex(fl.vertex) == nil:
		return usagef("run: --vertex %q: no such vertex in pipeline %q (vertices: %s)", fl.vertex, f.Name(), strings.Join(pipeline.NewGraph(f.Pipeline).Vertices(), ", "))
	}
	return nil
}

// runner runs what `vertex run` or `vertex processor` loaded.
type runner struct {
	flags   runFlags
	log     *zap.Logger
	replica int
	// tls, when set, serves --metrics-addr over HTTPS with it.
	tls *tls.Config
	// numaflow exports Numaflow's MonoVertex metrics beside sluice's.
	numaflow bool
	// reg is the registry of the metrics --metrics-addr serves.
	reg *prometheus.Registry
	// reload, when set, applies live changes of the config file.
	reload *reload.Watcher

	// Set by execute.
	dir       string // of the user-defined containers' sockets
	vopts     []vertex.Option
	listeners *listen.Listeners // bound before anything starts
}

// monoVertex runs one replica of m.
func (r runner) monoVertex(ctx context.Context, m *config.MonoVertex) error {
	opts := append(r.vopts, vertex.WithSocketDir(r.dir))
	if r.numaflow {
		opts = append(opts, vertex.WithNumaflowMetrics())
	}
	v, err := vertex.New(vertexconfig.FromMonoVertex(m), opts...)
	if err != nil {
		return err
	}
	defer r.serve(v.Ready, func() any { return v.Status() }, func(since int64) any { return v.PageView(since) })()
	defer r.reload.Start(ctx, func(f *config.File) error {
		if rl := f.MonoVertex.Spec.Limits.GetRateLimit(); rl != nil {
			cfg := vertexconfig.LimiterConfig(rl)
			if err := v.UpdateRateLimit(&cfg); err != nil {
				return err
			}
			return v.UpdateByteLimit(vertexconfig.ByteConfig(rl))
		}
		return nil
	})()
	r.log.Info("running", zap.String("vertex", m.Metadata.Name), zap.Int("replica", r.replica))
	return v.Run(ctx)
}

// pipeline runs one vertex of p on JetStream (--vertex), or all of them.
func (r runner) pipeline(ctx context.Context, p *config.Pipeline) error {
	opts := []pipeline.Option{pipeline.WithLogger(r.log), pipeline.WithRegisterer(r.reg),
		pipeline.WithSocketDir(r.dir), pipeline.WithVertexOptions(r.vopts...)}
	if r.flags.vertex != "" || r.flags.isb == "jetstream" {
		opts = append(opts, pipeline.WithBackend(pipeline.OnJetStream))
	}
	if r.flags.vertex != "" {
		opts = append(opts, pipeline.WithVertex(r.flags.vertex), pipeline.WithReplica(r.replica))
	}
	if r.flags.stateDir != "" {
		opts = append(opts, pipeline.WithStateDir(r.flags.stateDir))
	}
	if r.flags.sideInputsDir != "" {
		opts = append(opts, pipeline.WithSideInputsDir(r.flags.sideInputsDir))
	}
	pl, err := pipeline.NewFromConfig(ctx, p, opts...)
	if err != nil {
		return withJetStreamHint(err, p)
	}
	status := func() any { return pl.Status() }
	page := func(since int64) any { return pl.PageView(since) }
	if r.flags.vertex != "" {
		status = func() any { return pl.Vertices()[0].Status() }
		page = func(since int64) any { return pl.Vertices()[0].PageView(since) }
	}
	defer r.serve(pl.Ready, status, page)()
	defer r.reload.Start(ctx, func(f *config.File) error { return pl.UpdateRateLimits(f.Pipeline) })()
	r.log.Info("running", zap.String("pipeline", p.Metadata.Name), zap.String("vertex", r.flags.vertex),
		zap.Int("replica", r.replica), zap.Int("vertices", len(pl.Vertices())))
	cli.ExitOnSecondSignal(ctx, r.log)
	return pl.Run(ctx)
}

// serve serves /metrics, /healthz, /livez, /sidecar-livez, /readyz, /status,
// /status/live and the status page on --metrics-addr, if set (bound by
// execute), over HTTPS when r.tls is set, until stop is called.
func (r runner) serve(ready func() error, status func() any, page func(since int64) any) (stop func()) {
	ln := r.listeners.Metrics()
	if ln == nil {
		return func() {}
	}
	h, scheme := observe.Handlers{Gatherer: r.reg, Ready: ready, Status: status, PageData: page}, "http"
	if r.tls != nil {
		scheme = "https"
	}
	server := observe.NewServer(ln, h, r.tls, r.log)
	r.log.Info("serving metrics, health and status", zap.String("addr", server.Addr().String()), zap.String("scheme", scheme))
	return server.Start()
}

// runError names the flag a library error is about, where there is one.
func runError(err error, fl runFlags, replica int) error {
	switch {
	case errors.Is(err, vertex.ErrReplica):
		return usagef("--replica (%d): %v", replica, err)
	case errors.Is(err, vertex.ErrRegion):
		return usagef("--region (%q): %v", fl.region, err)
	}
	return err
}

// withJetStreamHint adds how to run without JetStream to the error of a
// pipeline without spec.isb.jetstream.
func withJetStreamHint(err error, p *config.Pipeline) error {
	var fe *config.FieldError
	if errors.As(err, &fe) && fe.Path == vertexconfig.JetStreamPath && (p.Spec.ISB == nil || p.Spec.ISB.JetStream == nil) {
		return usagef("%v; without --vertex and --isb, vertex run runs the whole pipeline in one process on in-memory buffers", err)
	}
	return err
}

// sideInputsManager runs p's side inputs alone, their values going into the
// pipeline's JetStream bucket.
func (r runner) sideInputsManager(ctx context.Context, p *config.Pipeline) error {
	m, err := pipeline.NewSideInputsManager(ctx, p, pipeline.WithLogger(r.log), pipeline.WithSocketDir(r.dir))
	if err != nil {
		return withJetStreamHint(err, p)
	}
	defer r.serve(m.Ready, func() any { return m.Status() }, nil)()
	r.log.Info("running the side inputs", zap.String("pipeline", p.Metadata.Name), zap.Int("sideInputs", len(p.Spec.SideInputs)))
	return m.Run(ctx)
}
