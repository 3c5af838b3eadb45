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
	"github.com/sluiceflow/sluice/internal/monitor"
	"github.com/sluiceflow/sluice/pkg/observe"
)

// runMonitor is the monitor sidecar of a Numaflow v1.8 MonoVertex pod
// (/bin/numaflow-rs monitor): it serves the errors the numa container
// records, over HTTPS, until SIGTERM or SIGINT.
func runMonitor(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("monitor", `usage: numaflow-rs monitor [flags]
       vertex monitor [flags]

Serves GET `+monitor.Path+` on port `+strconv.Itoa(monitor.Port)+` over HTTPS with a self-signed
certificate made at start, as the monitor sidecar of a Numaflow v1.8 MonoVertex
pod: the errors of the user-defined containers that the numa container (vertex
processor) records under the runtime volume, for the UI's Errors tab. While the
numa container holds the port, it waits. Numaflow passes no flags.

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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ln, err := monitor.ListenWhenFree(ctx, *addr, log)
	if err != nil {
		return usagef("monitor: --addr (%q): %v", *addr, err)
	}
	if ln == nil { // stopped while the numa container held the port
		return nil
	}
	log.Info("serving runtime errors", zap.String("addr", ln.Addr().String()), zap.String("dir", *dir))
	return monitor.Serve(ctx, tls.NewListener(ln, tlsConfig), monitor.NewStore(*dir, 0))
}
