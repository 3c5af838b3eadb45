package udsconn_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udsconn"
	sourcev1 "github.com/sluiceflow/sluice/pkg/apis/proto/source/v1"
	"github.com/sluiceflow/sluice/pkg/clock"
)

const (
	outstanding = "a call to the UDF server is outstanding"
	abandoned   = "a call to the UDF server got no answer within its deadline: abandoned, to be retried"
)

// stuckCall is a call started on the manual clock, against a server that
// accepted it and does not answer.
type stuckCall struct {
	t     *testing.T
	clk   *clock.Manual
	calls *udsconn.Calls
	c     *client
	done  chan error
}

// startStuck starts call on c, whose calls are timed on clk, and waits until
// the server has the request and the call's timer is armed.
func startStuck(t *testing.T, s *server, c *client, clk *clock.Manual, calls *udsconn.Calls, call func(context.Context) error) *stuckCall {
	t.Helper()
	sc := &stuckCall{t: t, clk: clk, calls: calls, c: c, done: make(chan error, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	go func() { sc.done <- call(ctx) }()
	select {
	case <-s.got:
	case <-ctx.Done():
		t.Fatal("the server never got the call")
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal("the call armed no timer")
	}
	return sc
}

// advanceTo moves the clock to at past the start, and checks that the call
// is still outstanding with warn warnings logged so far.
func (sc *stuckCall) advanceTo(start time.Time, at time.Duration, warns int) {
	sc.t.Helper()
	sc.clk.Set(start.Add(at))
	select {
	case err := <-sc.done:
		sc.t.Fatalf("at %v the call returned %v; want it outstanding", at, err)
	default:
	}
	if n := sc.c.count(outstanding); n != warns {
		sc.t.Fatalf("at %v: %d warnings %q; want %d", at, n, outstanding, warns)
	}
}

// A read the server accepts and never answers is warned about at 5s, 10s,
// 20s and 40s, and abandoned at its 60s deadline: the error names the
// function, the call and the deadline, the stream is cancelled and dropped
// (the connection kept), and the connection is stuck until a read succeeds.
func TestStuckReadIsAbandonedAtItsDeadline(t *testing.T) {
	dir := socketDir(t)
	hold := make(chan struct{})
	s := startServer(t, dir, hold)
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewManual(start)
	calls := udsconn.NewCalls(time.Minute, clk)
	c := newClient(t, dir, udsconn.WithCalls(calls))
	cc := c.current(t)
	sc := startStuck(t, s, c, clk, calls, func(ctx context.Context) error { _, err := c.read(ctx, 3); return err })

	sc.advanceTo(start, 4999*time.Millisecond, 0)
	sc.advanceTo(start, 5*time.Second, 1)
	w := c.logs.FilterMessage(outstanding).All()[0].ContextMap()
	if w["function"] != "source" || w["call"] != "ReadFn" || w["messages"] != int64(3) || w["outstanding"] != 5*time.Second || w["deadline"] != time.Minute {
		t.Errorf("the warning says %v; want function source, call ReadFn, 3 messages, outstanding 5s, deadline 1m", w)
	}
	if got := calls.Oldest(); len(got) != 1 || got[0] != (udsconn.Outstanding{Function: "source", Call: "ReadFn", Messages: 3, Age: 5 * time.Second, Deadline: time.Minute, Calls: 1}) {
		t.Errorf("Oldest = %+v", got)
	}
	if err := c.conn.Ready(); err != nil {
		t.Fatalf("Ready = %v before the deadline", err)
	}
	sc.advanceTo(start, 19*time.Second, 2) // 10s
	sc.advanceTo(start, 20*time.Second, 3)
	sc.advanceTo(start, 40*time.Second, 4)
	sc.advanceTo(start, 59*time.Second, 4)
	clk.Set(start.Add(time.Minute))
	err := <-sc.done
	if !errors.Is(err, udsconn.ErrDeadline) {
		t.Fatalf("read = %v; want ErrDeadline", err)
	}
	const want = "source call ReadFn of 3 messages: no answer within the deadline of 1m0s (limits.udfTimeout)"
	if err.Error() != want {
		t.Errorf("error %q; want %q", err, want)
	}
	if n := c.count(abandoned); n != 1 {
		t.Errorf("%d lines %q; want 1", n, abandoned)
	}
	if got := calls.Oldest(); len(got) != 0 {
		t.Errorf("Oldest = %+v after the call ended", got)
	}
	rerr := c.conn.Ready()
	if rerr == nil || !strings.Contains(rerr.Error(), "stuck") || !strings.Contains(rerr.Error(), want) ||
		!strings.Contains(rerr.Error(), filepath.Join(dir, serverinfo.SourceInfoFile)) {
		t.Fatalf("Ready = %v; want it stuck, naming the info file and the call", rerr)
	}
	runtest.WaitFor(t, "the server's stream to be cancelled", func() bool { _, _, ends := s.streams(); return len(ends) == 1 }, runtest.Within(wait))
	if _, _, ends := s.streams(); !strings.Contains(ends[0], "canceled") {
		t.Errorf("the server's read stream ended with %q; want it cancelled", ends[0])
	}
	if n := c.count(failed); n != 0 || c.current(t) != cc {
		t.Errorf("%d lines %q and the connection changed: an abandoned call keeps the connection", n, failed)
	}

	close(hold) // the server answers again
	mustRead(t, c, 2)
	if reads, _, _ := s.streams(); reads != 2 {
		t.Errorf("%d read streams; want a new one for the read after the abandoned one", reads)
	}
	if err := c.conn.Ready(); err != nil {
		t.Fatalf("Ready = %v once a read succeeded", err)
	}
	if n := c.count("the UDF server answers calls again"); n != 1 {
		t.Errorf("%d lines saying the server answers again; want 1", n)
	}
}

// The deadline covers the stream's opening: a server that accepts the
// stream and never answers its handshake is abandoned all the same. A
// deadline shorter than 10s is first warned about at half of it.
func TestUnansweredHandshakeIsAbandoned(t *testing.T) {
	dir := socketDir(t)
	s := startServer(t, dir, nil)
	s.mu.Lock()
	s.silent = true
	s.mu.Unlock()
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewManual(start)
	calls := udsconn.NewCalls(3*time.Second, clk)
	c := newClient(t, dir, udsconn.WithCalls(calls))
	c.current(t)
	sc := startStuck(t, s, c, clk, calls, func(ctx context.Context) error { _, err := c.read(ctx, 1); return err })
	sc.advanceTo(start, 1499*time.Millisecond, 0)
	sc.advanceTo(start, 1500*time.Millisecond, 1)
	clk.Set(start.Add(3 * time.Second))
	if err := <-sc.done; !errors.Is(err, udsconn.ErrDeadline) || !strings.Contains(err.Error(), "of 3s (limits.udfTimeout)") {
		t.Fatalf("read = %v; want ErrDeadline of 3s", err)
	}
	if n := c.count(failed); n != 0 {
		t.Errorf("%d lines %q", n, failed)
	}
}

// A stream's Allowance, what its calls may take by design, comes on top of
// the deadline.
func TestAllowanceDelaysTheDeadline(t *testing.T) {
	dir := socketDir(t)
	s := startServer(t, dir, make(chan struct{}))
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewManual(start)
	calls := udsconn.NewCalls(10*time.Second, clk)
	c := newClient(t, dir, udsconn.WithCalls(calls))
	c.rd.Allowance = 2 * time.Second
	c.current(t)
	sc := startStuck(t, s, c, clk, calls, func(ctx context.Context) error { _, err := c.read(ctx, 1); return err })
	sc.advanceTo(start, 6999*time.Millisecond, 0)
	sc.advanceTo(start, 7*time.Second, 1)
	sc.advanceTo(start, 11999*time.Millisecond, 1)
	clk.Set(start.Add(12 * time.Second))
	err := <-sc.done
	if !errors.Is(err, udsconn.ErrDeadline) || !strings.Contains(err.Error(), "12s (2s the call may take + limits.udfTimeout 10s)") {
		t.Fatalf("read = %v; want ErrDeadline after 12s", err)
	}
}

// A unary call has the deadline too; its context ends at it.
func TestUnaryCallIsAbandoned(t *testing.T) {
	dir := socketDir(t)
	s := startServer(t, dir, make(chan struct{}))
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewManual(start)
	calls := udsconn.NewCalls(time.Second, clk)
	c := newClient(t, dir, udsconn.WithCalls(calls))
	c.current(t)
	pending := func(ctx context.Context) error {
		return c.conn.Unary(ctx, "PendingFn", 0, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := sourcev1.NewSourceClient(cc).PendingFn(ctx, &emptypb.Empty{})
			return err
		})
	}
	sc := startStuck(t, s, c, clk, calls, pending)
	clk.Set(start.Add(time.Second))
	err := <-sc.done
	if !errors.Is(err, udsconn.ErrDeadline) || !strings.Contains(err.Error(), "source call PendingFn of 0 messages") {
		t.Fatalf("PendingFn = %v; want ErrDeadline naming it", err)
	}
	if err := c.conn.Ready(); err == nil {
		t.Fatal("Ready = nil; want it stuck")
	}
}

// Oldest reports the oldest of several calls to a function, and how many
// there are.
func TestOldestOfSeveral(t *testing.T) {
	dir := socketDir(t)
	s := startServer(t, dir, make(chan struct{}))
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewManual(start)
	calls := udsconn.NewCalls(time.Minute, clk)
	c := newClient(t, dir, udsconn.WithCalls(calls))
	c.current(t)
	first := startStuck(t, s, c, clk, calls, func(ctx context.Context) error { _, err := c.read(ctx, 2); return err })
	clk.Set(start.Add(3 * time.Second))
	other := newClient(t, dir, udsconn.WithCalls(calls))
	other.current(t)
	second := startStuck(t, s, other, clk, calls, func(ctx context.Context) error { _, err := other.read(ctx, 9); return err })
	clk.Set(start.Add(4 * time.Second))
	if got := calls.Oldest(); len(got) != 1 || got[0].Age != 4*time.Second || got[0].Messages != 2 || got[0].Calls != 2 {
		t.Fatalf("Oldest = %+v; want the first read, 4s old, of 2 calls", got)
	}
	if got := calls.Functions(); len(got) != 1 || got[0] != "source" {
		t.Fatalf("Functions = %v", got)
	}
	clk.Set(start.Add(time.Minute))
	if err := <-first.done; !errors.Is(err, udsconn.ErrDeadline) {
		t.Fatalf("first read = %v", err)
	}
	if got := calls.Oldest(); len(got) != 1 || got[0].Age != 57*time.Second || got[0].Messages != 9 {
		t.Fatalf("Oldest = %+v; want the second read, 57s old", got)
	}
	clk.Set(start.Add(time.Minute + 3*time.Second))
	if err := <-second.done; !errors.Is(err, udsconn.ErrDeadline) {
		t.Fatalf("second read = %v", err)
	}
}
