package udfserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/sluiceflow/sluice/internal/protocodec"
	"github.com/sluiceflow/sluice/internal/serverinfo"
)

// Server runs one gRPC service of a given kind on its unix socket. Create it
// with New, register the service on Registrar, then call Run once.
type Server struct {
	kind  serverinfo.Kind
	info  serverinfo.ServerInfo
	cfg   Config
	label string // names the container in UDF_EXECUTION_ERROR(label)
	grpc  *grpc.Server

	started atomic.Bool
	ready   atomic.Bool

	panicOnce sync.Once
	panicked  chan struct{} // closed on the first panic in user code
	panicErr  error
}

// New returns a server of kind k with configuration cfg. Its server-info
// file is serverinfo.Default(k, serverinfo.SDKCompatVersion), which
// Numaflow-compatible runtimes accept.
func New(k serverinfo.Kind, cfg Config) *Server {
	s := &Server{
		kind:     k,
		info:     serverinfo.Default(k, serverinfo.SDKCompatVersion),
		cfg:      cfg,
		label:    panicLabel(k),
		panicked: make(chan struct{}),
	}
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(serverinfo.MaxMessageSize),
		grpc.ForceServerCodecV2(protocodec.Codec{}),
		grpc.InitialWindowSize(serverinfo.StreamWindow),
		grpc.InitialConnWindowSize(serverinfo.ConnWindow),
		grpc.MaxSendMsgSize(serverinfo.MaxMessageSize),
		grpc.ChainUnaryInterceptor(s.recoverUnary),
		grpc.ChainStreamInterceptor(s.recoverStream),
	)
	return s
}

// Registrar is where the service is registered, before Run.
func (s *Server) Registrar() grpc.ServiceRegistrar { return s.grpc }

// Ready reports whether the server is serving: true from the moment it
// listens until its shutdown begins. It is the answer to IsReady.
func (s *Server) Ready() bool { return s.ready.Load() }

// ReadyFor is Ready for a server of h, the user's handler: when h also has
// Ready() error (each SDK package's ReadyReporter), the server is ready only
// while h's Ready returns nil too.
func (s *Server) ReadyFor(h any) bool {
	if !s.Ready() {
		return false
	}
	r, ok := h.(interface{ Ready() error })
	return !ok || r.Ready() == nil
}

// Run listens on the kind's socket in the configured directory (removing a
// stale socket file first), serves, and writes the server-info file once the
// socket is listening. It blocks until ctx ends, the process receives
// SIGTERM or SIGINT, or user code panics; then it removes the server-info
// file, stops gracefully (in-flight streams get Config.ShutdownTimeout to
// finish before they are closed) and removes the socket.
//
// Run returns nil after a stop asked for by ctx or a signal; an error if the
// server could not start, or one wrapping ErrUDFPanic after a panic.
func (s *Server) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	ctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()

	dir := s.cfg.Dir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sdk: creating socket directory: %w", err)
	}
	sock := filepath.Join(dir, s.kind.Socket())
	infoPath := filepath.Join(dir, s.kind.InfoFile())
	lis, err := listen(sock)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- s.grpc.Serve(lis) }()
	s.ready.Store(true)

	runErr := serverinfo.Write(infoPath, s.info)
	serveEnded := false
	if runErr == nil {
		select {
		case <-ctx.Done():
		case <-s.panicked:
			runErr = fmt.Errorf("%w: %w", ErrUDFPanic, s.panicErr)
		case err := <-served:
			serveEnded = true
			runErr = fmt.Errorf("sdk: serving on %s: %w", sock, err)
		}
	}

	s.ready.Store(false)
	infoErr := removeIfExists(infoPath)
	s.stop()
	if !serveEnded {
		<-served // Serve returns nil once the server is stopped.
	}
	return errors.Join(runErr, infoErr, removeIfExists(sock))
}

// stop stops the gRPC server gracefully, and forcibly once the shutdown
// timeout has passed.
func (s *Server) stop() {
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	timer := time.NewTimer(s.cfg.shutdownTimeout())
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.grpc.Stop()
		<-done
	}
}
