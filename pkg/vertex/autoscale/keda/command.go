package keda

import (
	"context"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/cli"
)

// Command is `vertex scaler`: it serves KEDA's external scaler for the
// vertices of a file until SIGTERM or SIGINT. A bad flag or file is a
// usage error (cli.IsUsage) naming it.
func Command(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("scaler", `usage: vertex scaler -f FILE --status [VERTEX=]HOST:PORT[,...] (--addr HOST:PORT | --socket PATH) [flags]

Serves KEDA's externalscaler.ExternalScaler over gRPC for the vertices of a
MonoVertex or Pipeline file: it reads each vertex's replicas (/status and
/metrics on their --metrics-addr) every --interval, and answers GetMetrics
with the replicas the scale rule wants (metric `+MetricName+`, target 1).
The trigger's metadata names the vertex: vertex: NAME.

flags:
`)
	file := fs.String("f", "", "MonoVertex or Pipeline YAML (required)")
	var status, rates cli.Strings
	fs.Var(&status, "status", "[VERTEX=]HOST:PORT[,HOST:PORT...]: a vertex's replicas; a host that resolves to several IPs is a replica each (repeatable)")
	fs.Var(&rates, "replica-rate", "[VERTEX=]N: messages one replica processes a second; left out, the rule learns it (repeatable)")
	addr := fs.String("addr", "", "TCP address to serve gRPC on")
	socket := fs.String("socket", "", "unix socket to serve gRPC on")
	interval := fs.Duration("interval", 5*time.Second, "how often the replicas are read")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.ParseArgs(args, stdout); err != nil {
		return err
	}
	if *file == "" {
		return cli.Usagef("scaler: -f is required")
	}
	if *addr == "" && *socket == "" {
		return cli.Usagef("scaler: --addr or --socket is required")
	}
	if *interval <= 0 {
		return cli.Usagef("scaler: --interval (%v) must be more than 0", *interval)
	}
	f, err := cli.LoadConfig(*file)
	if err != nil {
		return err
	}
	vertices, err := Vertices(f, status, rates)
	if err != nil {
		return cli.Usagef("scaler: %v", err)
	}
	log, err := cli.NewLogger(*logLevel, stderr)
	if err != nil {
		return err
	}
	defer log.Sync()
	srv, err := New(Config{Vertices: vertices, Interval: *interval, Log: log})
	if err != nil {
		return cli.Usagef("scaler: %v", err)
	}
	var lns []net.Listener
	if *addr != "" {
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return cli.Usagef("scaler: --addr (%q): %v", *addr, err)
		}
		lns = append(lns, ln)
		log.Info("serving the external scaler", zap.String("addr", ln.Addr().String()))
	}
	if *socket != "" {
		os.Remove(*socket)
		ln, err := net.Listen("unix", *socket)
		if err != nil {
			return cli.Usagef("scaler: --socket (%q): %v", *socket, err)
		}
		lns = append(lns, ln)
		log.Info("serving the external scaler", zap.String("socket", *socket))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return srv.Serve(ctx, lns...)
}
