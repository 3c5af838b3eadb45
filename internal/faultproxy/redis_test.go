package faultproxy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluiceflow/sluice/internal/faultproxy"
	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
)

// fastFail bounds how long a command may take to fail under Cut.
const fastFail = time.Second

// proxiedRedis starts a redis-server and a proxy in front of it.
func proxiedRedis(t *testing.T) (*redistest.Server, *faultproxy.Proxy) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	return srv, faultproxy.New(t, srv.Addr)
}

// client returns a go-redis client of addr that does not retry, so that each
// command shows what one attempt sees. It is closed when the test finishes.
func client(t *testing.T, addr string, readTimeout time.Duration) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:        addr,
		MaxRetries:  -1,
		DialTimeout: ioTimeout,
		ReadTimeout: readTimeout,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// bounded returns a context that ends after ioTimeout, so that no command
// can hang a test.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), ioTimeout)
	t.Cleanup(cancel)
	return ctx
}

// infoField returns the value of field in the INFO section sec of srv,
// asked directly, not through the proxy.
func infoField(t *testing.T, srv *redistest.Server, sec, field string) string {
	t.Helper()
	info := fmt.Sprint(srv.Do(t, "INFO", sec))
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", sec, field, info)
	return ""
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestRedisForward(t *testing.T) {
	srv, p := proxiedRedis(t)
	rc := client(t, p.Addr(), 0)
	ctx := bounded(t)
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the proxy: %v", err)
	}
	if got := srv.Do(t, "GET", "k"); got != "v" {
		t.Fatalf("GET k on the server = %v, want v", got)
	}
	if got, err := rc.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k through the proxy = %q, %v; want v", got, err)
	}
	if p.Conns() < 1 || p.Forwarded(faultproxy.ToServer) == 0 || p.Forwarded(faultproxy.ToClient) == 0 {
		t.Errorf("Conns() = %d, Forwarded = %d to the server, %d to the client; want them all above 0",
			p.Conns(), p.Forwarded(faultproxy.ToServer), p.Forwarded(faultproxy.ToClient))
	}
}

func TestRedisCut(t *testing.T) {
	srv, p := proxiedRedis(t)
	rc := client(t, p.Addr(), 0)
	ctx := bounded(t)
	if err := rc.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	// A command in flight: BLPOP waits on the server until the cut.
	blpop := make(chan error, 1)
	go func() { blpop <- rc.BLPop(ctx, 0, "queue").Err() }()
	runtest.WaitFor(t, "BLPOP to block on the server", func() bool {
		return infoField(t, srv, "clients", "blocked_clients") == "1"
	}, runtest.Within(waitTimeout))

	p.Cut()
	start := time.Now()
	select {
	case err := <-blpop:
		if !isConnError(err) {
			t.Errorf("BLPOP in flight: %v, want a connection reset", err)
		}
		if d := time.Since(start); d > fastFail {
			t.Errorf("BLPOP in flight failed after %v, want at most %v", d, fastFail)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("BLPOP in flight still waiting %v after the cut", waitTimeout)
	}
	// The server side was cut too.
	runtest.WaitFor(t, "the server to drop the blocked client", func() bool {
		return infoField(t, srv, "clients", "blocked_clients") == "0"
	}, runtest.Within(waitTimeout))

	// New commands need a new connection, which is reset.
	for _, cmd := range []func() error{
		func() error { return rc.Ping(ctx).Err() },
		func() error { return rc.Set(ctx, "k", "v", 0).Err() },
	} {
		start := time.Now()
		err := cmd()
		if !isConnError(err) {
			t.Errorf("command under cut: %v, want a connection reset", err)
		}
		if d := time.Since(start); d > fastFail {
			t.Errorf("command under cut failed after %v, want at most %v", d, fastFail)
		}
	}
	if p.Refused() == 0 {
		t.Error("Refused() = 0 after commands under cut")
	}

	p.Heal()
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET after Heal: %v", err)
	}
	if got := srv.Do(t, "GET", "k"); got != "v" {
		t.Fatalf("GET k on the server = %v, want v", got)
	}
}

func TestRedisBlackhole(t *testing.T) {
	const readTimeout = 250 * time.Millisecond
	for _, tc := range []struct {
		dir      faultproxy.Direction
		executed bool   // whether the server runs a black-holed command
		lost     string // the bytes of a raw PING the black hole swallows
	}{
		{faultproxy.ToServer, false, "PING\r\n"},
		{faultproxy.ToClient, true, "+PONG\r\n"},
	} {
		t.Run(tc.dir.String(), func(t *testing.T) {
			srv, p := proxiedRedis(t)
			rc := client(t, p.Addr(), readTimeout)
			ctx := bounded(t)
			if err := rc.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			raw := dial(t, p.Addr())
			if _, err := raw.Write([]byte("PING\r\n")); err != nil {
				t.Fatal(err)
			}
			expect(t, raw, "+PONG\r\n")

			p.Blackhole(tc.dir)
			start := time.Now()
			err := rc.Incr(ctx, "n").Err()
			took := time.Since(start)
			if !isTimeout(err) {
				t.Fatalf("INCR under Blackhole(%v): %v, want a timeout", tc.dir, err)
			}
			if took < readTimeout || took > readTimeout+fastFail {
				t.Errorf("INCR timed out after %v, want about the read timeout %v", took, readTimeout)
			}
			want := any(nil)
			if tc.executed {
				want = "1"
			}
			if got := srv.Do(t, "GET", "n"); got != want {
				t.Errorf("GET n on the server = %v, want %v", got, want)
			}

			// The raw connection stays open; its PING or its PONG is lost.
			before := p.Swallowed(tc.dir)
			if _, err := raw.Write([]byte("PING\r\n")); err != nil {
				t.Fatal(err)
			}
			runtest.WaitFor(t, fmt.Sprintf("%q to be swallowed", tc.lost), func() bool {
				return p.Swallowed(tc.dir) == before+int64(len(tc.lost))
			}, runtest.Within(waitTimeout))
			expectNothing(t, raw)

			p.Heal()
			if _, err := raw.Write([]byte("ECHO x\r\n")); err != nil {
				t.Fatal(err)
			}
			expect(t, raw, "$1\r\nx\r\n") // the first reply after Heal, not the lost PONG
			if err := rc.Incr(ctx, "n").Err(); err != nil {
				t.Fatalf("INCR after Heal: %v", err)
			}
		})
	}
}

func TestRedisDelay(t *testing.T) {
	const d = 100 * time.Millisecond
	_, p := proxiedRedis(t)
	for _, tc := range []struct {
		dir         faultproxy.Direction
		delay       time.Duration
		readTimeout time.Duration
		wantRTT     time.Duration // least round trip; 0 when the command must time out
	}{
		{faultproxy.ToServer, d, ioTimeout, d},
		{faultproxy.ToClient, d, ioTimeout, d},
		{faultproxy.Both, d, ioTimeout, 2 * d},
		{faultproxy.ToClient, 3 * d, d, 0},
	} {
		t.Run(fmt.Sprintf("%v/%v/timeout=%v", tc.dir, tc.delay, tc.readTimeout), func(t *testing.T) {
			rc := client(t, p.Addr(), tc.readTimeout)
			ctx := bounded(t)
			if err := rc.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			p.Delay(tc.dir, tc.delay)
			defer p.Heal()
			start := time.Now()
			err := rc.Ping(ctx).Err()
			rtt := time.Since(start)
			if tc.wantRTT == 0 {
				if !isTimeout(err) {
					t.Fatalf("PING with a %v delay and a %v read timeout: %v, want a timeout", tc.delay, tc.readTimeout, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("PING: %v", err)
			}
			if rtt < tc.wantRTT {
				t.Errorf("PING took %v, want at least %v", rtt, tc.wantRTT)
			}
		})
	}
}
