package strict_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/strict"
)

func TestMain(m *testing.M) {
	if os.Getenv("STRICT_HELPER_ADDR") != "" {
		os.Exit(helperProcess())
	}
	goleak.VerifyTestMain(m)
}

// helperProcess is one of the processes of TestAcrossProcesses: it takes permits
// from 4 goroutines until its deadline and prints each permit's time.
func helperProcess() int {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("STRICT_HELPER_ADDR")})
	defer client.Close()
	l, err := strict.New(client, "strict-test", strict.Config{Interval: 100 * time.Millisecond, MaxReserved: 4})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	until, _ := strconv.ParseInt(os.Getenv("STRICT_HELPER_UNTIL"), 10, 64)
	ctx, cancel := context.WithDeadline(context.Background(), time.UnixMicro(until))
	defer cancel()
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				p, err := l.Wait(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				fmt.Fprintln(out, p.At.UnixMicro())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	out.Flush()
	return 0
}

// TestAcrossProcesses runs 8 goroutines in 2 processes against one limit of one
// permit per 100ms for 10s: at most 101 permits, each at least 100ms after the
// one before on Redis's clock.
func TestAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	until := time.Now().Add(10 * time.Second)
	var procs []*exec.Cmd
	var outs []*strings.Builder
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), "STRICT_HELPER_ADDR="+srv.Addr, "STRICT_HELPER_UNTIL="+strconv.FormatInt(until.UnixMicro(), 10))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		outs = append(outs, out)
	}
	for _, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	var permits []int64
	for _, out := range outs {
		for _, line := range strings.Fields(out.String()) {
			n, err := strconv.ParseInt(line, 10, 64)
			if err != nil {
				t.Fatalf("bad line %q", line)
			}
			permits = append(permits, n)
		}
	}
	slices.Sort(permits)
	if len(permits) > 101 || len(permits) < 90 {
		t.Fatalf("%d permits in 10s at one per 100ms; want at most 101 (and close to it)", len(permits))
	}
	for i := 1; i < len(permits); i++ {
		if gap := time.Duration(permits[i]-permits[i-1]) * time.Microsecond; gap < 100*time.Millisecond {
			t.Fatalf("permits %d and %d are %v apart; want at least 100ms", i-1, i, gap)
		}
	}
}

func newLimiter(t *testing.T, srv *redistest.Server, key string, cfg strict.Config, opts ...strict.Option) *strict.Limiter {
	t.Helper()
	l, err := strict.New(srv.Client(t), key, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type reserved struct {
	p   strict.Permit
	err error
}

// async runs take in a goroutine and returns once it waits on clk for its permit.
func async(t *testing.T, clk *clock.Manual, take func() (strict.Permit, error)) <-chan reserved {
	t.Helper()
	out := make(chan reserved, 1)
	go func() {
		p, err := take()
		out <- reserved{p, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal("the caller is not waiting on the clock for its permit")
	}
	return out
}

func recv(t *testing.T, ch <-chan reserved) reserved {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting caller did not return")
		return reserved{}
	}
}

// Permits an hour apart on Redis's clock: a reserved permit is an hour ahead,
// and the tests wait for it on a manual clock instead.
const hour = time.Hour

func TestAllowAndReserve(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	clk := clock.NewManual(time.Now())
	l := newLimiter(t, srv, "allow", strict.Config{Interval: hour, MaxReserved: 1}, strict.WithClock(clk))
	p1, err := l.Allow(ctx)
	if err != nil {
		t.Fatalf("first Allow: %v", err)
	}
	_, err = l.Allow(ctx)
	var te *ratelimit.ThrottledError
	if !errors.Is(err, ratelimit.ErrRateLimited) || !errors.As(err, &te) || te.Wait <= 0 || te.Wait > hour {
		t.Fatalf("second Allow: %v; want a rate-limit error with the time to the next permit", err)
	}
	// Reserve reserves the next permit, one spacing after the first, and waits for
	// it on the clock.
	res := async(t, clk, func() (strict.Permit, error) { return l.Reserve(ctx) })
	// With one permit reserved ahead already, a second reservation is refused.
	if _, err := l.Reserve(ctx); !errors.Is(err, ratelimit.ErrRateLimited) {
		t.Fatalf("Reserve past MaxReserved: %v; want rate limited", err)
	}
	clk.Advance(hour - time.Minute)
	select {
	case r := <-res:
		t.Fatalf("Reserve returned %+v before its permit was due", r)
	default:
	}
	clk.Advance(time.Minute)
	r := recv(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if gap := r.p.At.Sub(p1.At); gap < hour {
		t.Fatalf("permits %v apart", gap)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers left on the clock", clk.Pending())
	}
}

func TestReserveGivesUpWithTheContext(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	clk := clock.NewManual(time.Now())
	l := newLimiter(t, srv, "cancel", strict.Config{Interval: hour, MaxReserved: 1}, strict.WithClock(clk))
	if _, err := l.Allow(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res := async(t, clk, func() (strict.Permit, error) { return l.Reserve(ctx) })
	cancel()
	if r := recv(t, res); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Reserve cut short = %v; want context.Canceled", r.err)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers left on the clock", clk.Pending())
	}
}

func TestWaitRespectsContext(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	l := newLimiter(t, srv, "ctx", strict.Config{Interval: time.Hour})
	if _, err := l.Allow(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := l.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v; want the context's deadline", err)
	}
}

func TestKPerInterval(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	l := newLimiter(t, srv, "k", strict.Config{Interval: time.Second, Permits: 10, MaxReserved: 20})
	if l.Spacing() != 100*time.Millisecond {
		t.Fatalf("spacing %v", l.Spacing())
	}
	var ats []time.Time
	for range 5 {
		p, err := l.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ats = append(ats, p.At)
	}
	for i := 1; i < len(ats); i++ {
		if d := ats[i].Sub(ats[i-1]); d < 100*time.Millisecond {
			t.Fatalf("permits %v apart; want at least 100ms", d)
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, cfg := range []strict.Config{{}, {Interval: time.Second, Permits: -1}, {Interval: time.Second, MaxReserved: -1},
		{Interval: time.Second, Expiry: -1}, {Interval: time.Nanosecond, Permits: 10}} {
		if _, err := strict.New(nil, "k", cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	if _, err := strict.New(nil, "", strict.Config{Interval: time.Second}); err == nil {
		t.Error("an empty key accepted")
	}
	if _, err := strict.New(nil, "k", strict.Config{Interval: time.Second}, strict.WithClock(nil)); err == nil {
		t.Error("WithClock(nil) accepted")
	}
}

func TestWrap(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	clk := clock.NewManual(time.Now())
	l := newLimiter(t, srv, "wrap", strict.Config{Interval: hour, MaxReserved: 1}, strict.WithClock(clk))
	calls := 0
	f := func(_ context.Context, n int) (int, error) { calls++; return n * 2, nil }
	waiting, failFast := strict.Wrap(l, f), strict.Wrap(l, f, strict.Reject())
	ctx := context.Background()
	if got, err := waiting(ctx, 1); got != 2 || err != nil {
		t.Fatalf("first call: %d, %v", got, err)
	}
	if _, err := failFast(ctx, 2); !errors.Is(err, ratelimit.ErrRateLimited) {
		t.Fatalf("fail-fast call right after: %v; want rate limited", err)
	}
	if calls != 1 {
		t.Fatalf("f called %d times; a rejected call must not reach it", calls)
	}
	res := async(t, clk, func() (strict.Permit, error) {
		got, err := waiting(ctx, 3)
		if got != 6 {
			err = errors.Join(err, fmt.Errorf("waiting call returned %d; want 6", got))
		}
		return strict.Permit{}, err
	})
	if calls != 1 {
		t.Fatal("the waiting call reached f before its permit")
	}
	clk.Advance(hour)
	if r := recv(t, res); r.err != nil {
		t.Fatal(r.err)
	}
	if calls != 2 {
		t.Fatalf("f called %d times; want 2", calls)
	}
}
