package udstest

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/internal/udsconn"
	"github.com/sluiceflow/sluice/pkg/clock"
)

// OutstandingWarning is the message of the warning logged about a call to a
// user-defined server that has had no answer for a while.
const OutstandingWarning = "a call to the UDF server is outstanding"

// reconnecting is the message logged when a connection to a user-defined
// server is dropped and made again.
const reconnecting = "UDF server failed; reconnecting"

// SocketDir returns a new directory for the sockets of a test, removed when
// the test ends. It is made in the system's temporary directory, whose short
// path keeps socket paths within the limit of a unix socket's address.
func SocketDir(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Start runs start, the Start method of a server of the SDK, until the test
// ends, when it cancels start's context and waits for it to return.
func Start(t testing.TB, start func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
}

// Hang is the body of a user-defined function that takes a call and, while
// it is stuck, never answers it: it waits for the call's context or for
// [Hang.Release]. A new Hang is stuck; it is safe for concurrent use.
type Hang struct {
	stuck   atomic.Bool
	got     chan struct{} // a value per call taken, as long as there is room
	release chan struct{}
	once    sync.Once
}

// NewHang returns a Hang that is stuck.
func NewHang() *Hang {
	h := &Hang{got: make(chan struct{}, 100), release: make(chan struct{})}
	h.stuck.Store(true)
	return h
}

// Wait is what the function does with a call: it tells [Hang.Taken] of it
// and, while h is stuck, waits for ctx or [Hang.Release].
func (h *Hang) Wait(ctx context.Context) {
	select {
	case h.got <- struct{}{}:
	default:
	}
	if h.stuck.Load() {
		select {
		case <-ctx.Done():
		case <-h.release:
		}
	}
}

// Taken waits for the function to take a call, and fails the test if ctx
// is done first.
func (h *Hang) Taken(t testing.TB, ctx context.Context) {
	t.Helper()
	select {
	case <-h.got:
	case <-ctx.Done():
		t.Fatal("the server never took the call")
	}
}

// Answer makes the function answer the calls it takes from now on; the
// calls waiting go on waiting.
func (h *Hang) Answer() { h.stuck.Store(false) }

// Release ends the wait of every call, now and later. A test calls it when
// it ends, before the server stops (register it with t.Cleanup after the
// server's own cleanup); it is safe to call twice.
func (h *Hang) Release() { h.once.Do(func() { close(h.release) }) }

// ObservedLogger returns a logger of the info level and above whose entries
// the test reads from the logs returned.
func ObservedLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return zap.New(core), logs
}

// Stuck is the scaffolding of a test of calls to a user-defined server that
// are taken and never answered: a manual clock, the calls it times, and a
// logger whose warnings the test checks. Its methods move the clock, from
// [Stuck.Start], to the warning and to the deadline.
type Stuck struct {
	// Start is the time the clock starts at.
	Start time.Time
	// Clock is the manual clock the calls are timed with.
	Clock *clock.Manual
	// Calls times the calls, abandoning each at its deadline; pass it to
	// the client with [Stuck.WithCalls].
	Calls *udsconn.Calls
	// Logger is the client's logger, and Logs what it logged.
	Logger *zap.Logger
	Logs   *observer.ObservedLogs
}

// NewStuck returns the scaffolding of a test whose calls have timeout as
// their deadline (limits.udfTimeout).
func NewStuck(timeout time.Duration) *Stuck {
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewManual(start)
	logger, logs := ObservedLogger()
	return &Stuck{Start: start, Clock: clk, Calls: udsconn.NewCalls(timeout, clk), Logger: logger, Logs: logs}
}

// WithCalls is the option that makes a client time its calls with s.Calls.
func (s *Stuck) WithCalls() udsconn.Option { return udsconn.WithCalls(s.Calls) }

// Go runs call in a goroutine and returns where its error is sent.
func Go(call func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- call() }()
	return done
}

// Warn waits for a call to be timed, moves the clock to at after the start,
// checks that exactly one warning of a call outstanding is logged, and that
// it has each field of want; it returns the warning's fields.
func (s *Stuck) Warn(t testing.TB, ctx context.Context, at time.Duration, want map[string]any) map[string]any {
	t.Helper()
	if err := s.Clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Clock.Set(s.Start.Add(at))
	warns := s.Logs.FilterMessage(OutstandingWarning).All()
	if len(warns) != 1 {
		t.Fatalf("%d warnings at %v; want 1", len(warns), at)
	}
	got := warns[0].ContextMap()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the warning says %s=%v (%v); want %v", k, got[k], got, v)
		}
	}
	return got
}

// Warnings is the number of warnings of a call outstanding logged.
func (s *Stuck) Warnings() int { return s.Logs.FilterMessage(OutstandingWarning).Len() }

// Oldest checks that one function has a call outstanding, that it is
// function's (unless function is "") and has been outstanding since the
// start, and returns it for the test to check more of.
func (s *Stuck) Oldest(t testing.TB, function string) udsconn.Outstanding {
	t.Helper()
	o := s.Calls.Oldest()
	if len(o) != 1 {
		t.Fatalf("Oldest = %+v; want one call", o)
	}
	if (function != "" && o[0].Function != function) || o[0].Age != s.Clock.Now().Sub(s.Start) {
		t.Errorf("Oldest = %+v; want a call of %q outstanding %v", o, function, s.Clock.Now().Sub(s.Start))
	}
	return o[0]
}

// Abandon moves the clock to at after the start, the deadline of the call
// whose error done gives, and checks that the call is abandoned: its error
// is udsconn.ErrDeadline and says each of says. It returns the error.
func (s *Stuck) Abandon(t testing.TB, at time.Duration, done <-chan error, says ...string) error {
	t.Helper()
	s.Clock.Set(s.Start.Add(at))
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the call did not end at its deadline, %v after the start", at)
	}
	if !errors.Is(err, udsconn.ErrDeadline) {
		t.Fatalf("the call ended with %v at its deadline; want ErrDeadline", err)
	}
	for _, want := range says {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the call ended with %q at its deadline; want it to say %q", err, want)
		}
	}
	return err
}

// ConnectionKept checks that the connection was never dropped: a call
// abandoned keeps it.
func (s *Stuck) ConnectionKept(t testing.TB) {
	t.Helper()
	if n := s.Logs.FilterMessage(reconnecting).Len(); n != 0 {
		t.Errorf("the connection was dropped %d times; an abandoned call keeps it", n)
	}
}

// NotReadyStuck checks that ready, the Ready method of a client, says the
// server is stuck.
func NotReadyStuck(t testing.TB, ready func() error) {
	t.Helper()
	if err := ready(); err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("Ready = %v; want stuck", err)
	}
}

// Ready checks that ready, the Ready method of a client, says the server is
// ready; when says why it should be.
func Ready(t testing.TB, ready func() error, when string) {
	t.Helper()
	if err := ready(); err != nil {
		t.Fatalf("Ready = %v %s", err, when)
	}
}
