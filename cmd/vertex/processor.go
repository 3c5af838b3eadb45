package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/monitor"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udsconn"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

func runProcessor(args []string, stdout, stderr io.Writer) error {
	if os.Getenv(vertexconfig.EnvMonoVertexObject) == "" && os.Getenv(vertexconfig.EnvVertexObject) != "" {
		return usagef("processor: %s is not set and %s is: this is the pod of a pipeline's vertex, "+
			"and sluice stands in only for the numa container of a MonoVertex's pod", vertexconfig.EnvMonoVertexObject, vertexconfig.EnvVertexObject)
	}
	fl, err := parseProcessorFlags(args, stdout)
	if err != nil {
		return err
	}
	rep, err := cli.ReplicaIndex("")
	if err != nil {
		return err
	}
	log, err := cli.NewLogger(fl.logLevel, stderr)
	if err != nil {
		return err
	}
	defer log.Sync()
	f, err := monoVertexFromEnv(os.Getenv(vertexconfig.EnvMonoVertexObject))
	if err != nil {
		return err
	}
	// Numaflow fills in fields of its own (scale, updateStrategy, status, ...):
	// not worth an info line in every pod.
	if len(f.Ignored) > 0 {
		log.Debug("ignoring Kubernetes-only fields", zap.Strings("fields", f.Ignored))
	}
	cli.LogWarnings(log, f)
	tlsConfig, err := observe.SelfSignedTLS(time.Now())
	if err != nil {
		return err
	}
	// The errors of the user-defined containers, served on 2470 by this
	// process or, in a v1.8 pod, by the monitor sidecar.
	errs := monitor.NewStore(fl.runtimeErrorsDir, 0)
	stopRuntime, err := monitor.StartRuntime(fl.runtimeAddr, tlsConfig, errs, log)
	if err != nil {
		return usagef("processor: --runtime-addr (%q): %v", fl.runtimeAddr, err)
	}
	defer stopRuntime()
	udsconn.ReportFailures(func(err error) {
		if rerr := errs.RecordUDFError(err, time.Now()); rerr != nil {
			log.Warn("cannot record the error for the monitor", zap.Error(rerr))
		}
	})
	defer udsconn.ReportFailures(nil)
	return execute(f, runner{flags: fl, log: log, replica: rep, reg: observe.NewRegistry(), tls: tlsConfig, numaflow: true}, stdout, stderr)
}

func parseProcessorFlags(args []string, stdout io.Writer) (runFlags, error) {
	fs := cli.NewFlagSet("processor", `usage: numaflow-rs processor [flags]
       vertex processor [flags]

Runs one replica of the MonoVertex in $`+vertexconfig.EnvMonoVertexObject+` (standard base64
of its JSON, as Numaflow's controller sets it in the pods of a MonoVertex), as
the numa container of such a pod: the replica is $NUMAFLOW_REPLICA, the
user-defined containers' sockets are in /var/run/numaflow, and port 2469 serves
/metrics (with Numaflow's monovtx_* metrics), /readyz, /livez, /sidecar-livez,
/healthz and /status over HTTPS with a self-signed certificate made at start;
port 2470 serves the user-defined containers' errors on /runtime/errors, unless
the pod's monitor sidecar (Numaflow v1.8) holds it and serves them itself.
On SIGTERM it stops reading, finishes and acks the batch in flight, leaves the
rate limiter's pool and exits 0.

Numaflow passes no flags; these are for running it elsewhere.

flags:
`)
	var fl runFlags
	fs.StringVar(&fl.metricsAddr, "metrics-addr", observe.DefaultAddr, "HTTPS address of /metrics, /readyz, /livez, /sidecar-livez, /healthz, /status, /status/live and the status page on /")
	fs.StringVar(&fl.udsDir, "uds-dir", serverinfo.DefaultDir, "directory of the user-defined containers' sockets and server-info files, created if missing")
	fs.StringVar(&fl.logLevel, "log-level", "info", "log level: debug, info, warn or error (default debug when $"+vertexconfig.EnvDebug+" is true)")
	fs.StringVar(&fl.otlp, "otlp-endpoint", "", "OTLP gRPC endpoint for traces of forward iterations (default: $OTEL_EXPORTER_OTLP_ENDPOINT; unset: no tracing)")
	fs.StringVar(&fl.runtimeErrorsDir, "runtime-errors-dir", monitor.DefaultDir, "directory where the user-defined containers' errors are recorded")
	fs.StringVar(&fl.runtimeAddr, "runtime-addr", ":"+strconv.Itoa(monitor.Port), "HTTPS address of "+monitor.Path+" (the pod's port named runtime), unless the monitor sidecar holds it; \"\" for none")
	if err := fs.ParseArgs(args, stdout); err != nil {
		return fl, err
	}
	if !fs.IsSet("log-level") && strings.EqualFold(os.Getenv(vertexconfig.EnvDebug), "true") {
		fl.logLevel = "debug"
	}
	if fl.udsDir == "" {
		return fl, usagef("processor: --uds-dir must not be empty")
	}
	if err := cli.CheckOTLP(fl.otlp); err != nil {
		return fl, usagef("processor: %v", err)
	}
	return fl, nil
}

// monoVertexFromEnv decodes and validates the MonoVertex in value, the value
// of NUMAFLOW_MONO_VERTEX_OBJECT. Every error names the variable and is a
// usage error.
func monoVertexFromEnv(value string) (*config.File, error) {
	if value == "" {
		return nil, usagef("processor: %s is not set: Numaflow's controller sets it to the MonoVertex a pod runs "+
			"(standard base64 of its JSON); to run a YAML file, use vertex run -f FILE", vertexconfig.EnvMonoVertexObject)
	}
	f, err := vertexconfig.ParseMonoVertexEnv(value)
	if err != nil {
		return nil, usagef("processor: %v", err)
	}
	return f, nil
}
