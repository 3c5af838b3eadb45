package main

import (
	"context"
	"crypto/tls"
	"io"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/listen"
	"github.com/sluiceflow/sluice/internal/monitor"
	"github.com/sluiceflow/sluice/pkg/observe"
)

// runMonitor is the monitor sidecar of a Numaflow MonoVertex pod, which
// Numaflow's controller runs as /bin/numaflow-rs monitor: it serves the
// errors the numa container records, over HTTPS, until SIGTERM or SIGINT.
func runMonitor(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("monitor", `usage: numaflow-rs monitor [flags]
       vertex monitor [flags]

Serves GET `+monitor.Path+` on port `+strconv.Itoa(monitor.Port)+` over HTTPS with a self-signed
certificate made at start, as the monitor sidecar of a Numaflow MonoVertex pod:
the errors of the user-defined containers that the numa container (vertex
processor) records under the runtime volume, which Numaflow's MonoVertex daemon
reads for the UI's Errors tab. Numaflow passes no flags; these are for running
it elsewhere.

flags:
`)
	addr := fs.String("addr", ":"+strconv.Itoa(monitor.Port), "HTTPS address to serve "+monitor.Path+" on")
	dir := fs.String("dir", monitor.DefaultDir, "directory of the recorded errors, one subdirectory a container")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.ParseArgs(args, stdout); err != nil {
		return err
	}
	log, err := cli.NewLogger(*logLevel, stderr)
	if err != nil {
		return err
	}
	defer log.Sync()
	tlsConfig, err := observe.SelfSignedTLS(time.Now())
	if err != nil {
		return err
	}
	ln, err := listen.TCP(*addr)
	if err != nil {
		return usagef("monitor: --addr (%q): %v", *addr, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("serving runtime errors", zap.String("addr", ln.Addr().String()), zap.String("dir", *dir))
	return monitor.Serve(ctx, tls.NewListener(ln, tlsConfig), monitor.NewStore(*dir, 0))
}
