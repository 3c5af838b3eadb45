package monitor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/listen"
)

// ErrHeld is returned by [Listen] when another process listens on the
// address: in a MonoVertex pod, the monitor sidecar of Numaflow's v1.8 pods
// or the numa container of its later ones, whichever took port 2470 first.
var ErrHeld = errors.New("held by another process of the pod")

// Listen binds addr for [Serve]. An address another process listens on is
// ErrHeld, wrapped with the address; any other error says why it cannot be
// bound.
func Listen(addr string) (net.Listener, error) {
	ln, err := listen.TCP(addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s: %w", addr, ErrHeld)
	}
	return ln, err
}

// StartRuntime serves s's errors on addr over HTTPS with cfg, as the numa
// container of Numaflow's MonoVertex pods does since Numaflow dropped their
// monitor sidecar (port 2470, named runtime). When addr is held ([ErrHeld]),
// the pod has a monitor sidecar (Numaflow v1.8) that serves the same
// directory: StartRuntime logs that and serves nothing. addr "" serves
// nothing. Any other bind error is returned. stop shuts the server down and
// waits for it; it is safe to call more than once.
func StartRuntime(addr string, cfg *tls.Config, s *Store, log *zap.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := Listen(addr)
	if errors.Is(err, ErrHeld) {
		log.Info("the runtime errors' port is held: the pod's monitor sidecar serves them", zap.String("addr", addr))
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	log.Info("serving runtime errors", zap.String("addr", ln.Addr().String()), zap.String("dir", s.Dir()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := Serve(ctx, tls.NewListener(ln, cfg), s); err != nil && ctx.Err() == nil {
			log.Warn("the runtime errors' server stopped", zap.Error(err))
		}
	}()
	return func() { cancel(); <-done }, nil
}

// RetryHeld is how often [ListenWhenFree] tries again to bind a held address.
const RetryHeld = time.Second

// ListenWhenFree binds addr for the monitor sidecar. While another process
// holds it (the numa container of the pod serves the errors itself), it logs
// that once and tries again every [RetryHeld] until it binds or ctx ends; it
// returns nil and no error when ctx ends first. Any other bind error is
// returned at once.
func ListenWhenFree(ctx context.Context, addr string, log *zap.Logger) (net.Listener, error) {
	t := time.NewTicker(RetryHeld)
	defer t.Stop()
	for logged := false; ; logged = true {
		ln, err := Listen(addr)
		if !errors.Is(err, ErrHeld) {
			return ln, err
		}
		if !logged {
			log.Info("the runtime errors' port is held: the numa container serves them; waiting for it to be free", zap.String("addr", addr))
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-t.C:
		}
	}
}
