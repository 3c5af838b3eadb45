package monitor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// ShutdownTimeout bounds how long [Serve] waits, once its context ends, for
// the requests in flight.
const ShutdownTimeout = 5 * time.Second

// Serve serves s's errors ([Handler]) on ln until ctx ends, then shuts down
// within [ShutdownTimeout]. It returns nil after a shutdown that finished in
// time, else the error that stopped it.
func Serve(ctx context.Context, ln net.Listener, s *Store) error {
	srv := &http.Server{Handler: Handler(s), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shut)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// RecordUDFError records err, at now, when it is a user-defined container's
// error ([IsUDFError]), and ignores any other error: it is what the processor
// gives udsconn.ReportFailures.
func (s *Store) RecordUDFError(err error, now time.Time) error {
	if !IsUDFError(err) {
		return nil
	}
	return s.Record(EntryOf(err, now))
}
