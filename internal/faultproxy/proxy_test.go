package faultproxy_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/faultproxy"
	"github.com/sluiceflow/sluice/internal/runtest"
)

func TestForwardBothWays(t *testing.T) {
	p := faultproxy.New(t, startEcho(t))
	const conns, size = 4, 256 << 10
	cs := make([]*net.TCPConn, conns)
	for i := range cs {
		cs[i] = dial(t, p.Addr())
	}
	runtest.WaitFor(t, "4 open connections", func() bool { return p.Conns() == conns }, runtest.Within(waitTimeout))

	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			if err := echoAll(c, size); err != nil {
				t.Errorf("connection %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	const total = conns * size
	runtest.WaitFor(t, fmt.Sprintf("%d bytes forwarded each way", total), func() bool {
		return p.Forwarded(faultproxy.ToServer) == total && p.Forwarded(faultproxy.ToClient) == total
	}, runtest.Within(waitTimeout))
	if got := p.Forwarded(faultproxy.Both); got != 2*total {
		t.Errorf("Forwarded(Both) = %d, want %d", got, 2*total)
	}
	// Each client half-closed and read the server's FIN, so the proxy has
	// closed every connection.
	runtest.WaitFor(t, "no open connection", func() bool { return p.Conns() == 0 }, runtest.Within(waitTimeout))
}

// echoAll writes size random bytes on c, half-closes it, and checks that it
// reads the same bytes back and then EOF.
func echoAll(c *net.TCPConn, size int) error {
	sent := make([]byte, size)
	_, _ = rand.Read(sent)
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(sent)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(c)
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if !bytes.Equal(got, sent) {
		return fmt.Errorf("read back %d bytes that differ from the %d sent", len(got), len(sent))
	}
	return nil
}

func TestCut(t *testing.T) {
	p := faultproxy.New(t, startEcho(t))
	cs := make([]*net.TCPConn, 3)
	for i := range cs {
		cs[i] = dial(t, p.Addr())
		roundTrip(t, cs[i], "hello")
	}

	p.Cut()
	if n := p.Conns(); n != 0 {
		t.Errorf("Conns() = %d right after Cut, want 0", n)
	}
	for _, c := range cs {
		expectReset(t, c)
	}

	// A new connection is accepted by the kernel, then reset.
	expectDialReset(t, p.Addr())
	if n := p.Refused(); n != 1 {
		t.Errorf("Refused() = %d, want 1", n)
	}

	p.Heal()
	c := dial(t, p.Addr())
	roundTrip(t, c, "again")
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns() = %d after Heal and one new connection, want 1", n)
	}
}

func TestBlackhole(t *testing.T) {
	for _, dir := range []faultproxy.Direction{faultproxy.ToServer, faultproxy.ToClient, faultproxy.Both} {
		t.Run(dir.String(), func(t *testing.T) {
			p := faultproxy.New(t, startEcho(t))
			c := dial(t, p.Addr())
			roundTrip(t, c, "ping")

			p.Blackhole(dir)
			if _, err := c.Write([]byte("lost")); err != nil {
				t.Fatal(err)
			}
			runtest.WaitFor(t, "4 bytes swallowed", func() bool { return p.Swallowed(dir) == 4 }, runtest.Within(waitTimeout))
			expectNothing(t, c)

			// New connections are accepted while black-holed.
			c2 := dial(t, p.Addr())
			runtest.WaitFor(t, "2 open connections", func() bool { return p.Conns() == 2 }, runtest.Within(waitTimeout))

			p.Heal()
			roundTrip(t, c, "back") // "lost" stays lost
			roundTrip(t, c2, "new")
			if n := p.Conns(); n != 2 {
				t.Errorf("Conns() = %d, want 2", n)
			}
		})
	}
}

func TestBlackholePassesClose(t *testing.T) {
	p := faultproxy.New(t, startEcho(t))
	c := dial(t, p.Addr())
	roundTrip(t, c, "ping")
	p.Blackhole(faultproxy.Both)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the closed connection to be gone", func() bool { return p.Conns() == 0 }, runtest.Within(waitTimeout))
}

func TestDelay(t *testing.T) {
	const d = 80 * time.Millisecond
	for _, tc := range []struct {
		dir  faultproxy.Direction
		want time.Duration // least round trip
	}{
		{faultproxy.ToServer, d},
		{faultproxy.ToClient, d},
		{faultproxy.Both, 2 * d},
	} {
		t.Run(tc.dir.String(), func(t *testing.T) {
			p := faultproxy.New(t, startEcho(t))
			c := dial(t, p.Addr())
			roundTrip(t, c, "ping")

			p.Delay(tc.dir, d)
			start := time.Now()
			roundTrip(t, c, "slow")
			if rtt := time.Since(start); rtt < tc.want {
				t.Errorf("round trip took %v, want at least %v", rtt, tc.want)
			}

			p.Heal()
			start = time.Now()
			roundTrip(t, c, "fast")
			// A loose bound: an idle loopback round trip takes well under
			// a millisecond, and a delay left in force would add d.
			if rtt := time.Since(start); rtt >= d {
				t.Errorf("round trip took %v after Heal, want less than %v", rtt, d)
			}
		})
	}
}

// TestDelayKeepsOrder streams numbered messages through the proxy with a
// window of messages in flight, and changes the delay while they flow:
// every message arrives once and in order.
func TestDelayKeepsOrder(t *testing.T) {
	p := faultproxy.New(t, startEcho(t))
	c := dial(t, p.Addr())
	const n, window = 600, 8
	changes := map[uint32]func(){
		100: func() { p.Delay(faultproxy.Both, 20*time.Millisecond) },
		200: func() { p.Delay(faultproxy.ToServer, time.Millisecond) }, // shorter: later bytes must not overtake
		300: func() { p.Delay(faultproxy.ToClient, 0) },
		400: func() { p.Delay(faultproxy.ToServer, 10*time.Millisecond) },
		500: p.Heal,
	}

	credit := make(chan struct{}, window)
	for range window {
		credit <- struct{}{}
	}
	werr := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		var b [4]byte
		for i := range uint32(n) {
			select {
			case <-credit:
			case <-stop:
				werr <- nil
				return
			}
			binary.BigEndian.PutUint32(b[:], i)
			if _, err := c.Write(b[:]); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()

	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	var b [4]byte
	for want := range uint32(n) {
		if _, err := io.ReadFull(c, b[:]); err != nil {
			t.Fatalf("read message %d: %v", want, err)
		}
		if got := binary.BigEndian.Uint32(b[:]); got != want {
			t.Fatalf("read message %d, want %d", got, want)
		}
		if f := changes[want]; f != nil {
			f()
		}
		credit <- struct{}{}
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
}

func TestClose(t *testing.T) {
	p, err := faultproxy.Start(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	roundTrip(t, c, "ping")
	p.Delay(faultproxy.ToClient, time.Hour) // a writer waiting on a delay must not hold Close up
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "\"held\" to reach the server", func() bool { return p.Forwarded(faultproxy.ToServer) == 8 }, runtest.Within(waitTimeout))

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	expectReset(t, c)
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n := p.Conns(); n != 0 {
		t.Errorf("Conns() = %d after Close, want 0", n)
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), ioTimeout); err == nil {
		_ = c.Close()
		t.Errorf("dial %s after Close succeeded", p.Addr())
	}
}

func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	_ = ln.Close()

	p := faultproxy.New(t, down)
	expectDialReset(t, p.Addr())
	if n := p.Conns(); n != 0 {
		t.Errorf("Conns() = %d, want 0", n)
	}
}

func TestStartRejectsBadTarget(t *testing.T) {
	if p, err := faultproxy.Start("no-port"); err == nil {
		_ = p.Close()
		t.Fatal("Start(\"no-port\") succeeded")
	}
}

func TestDirectionString(t *testing.T) {
	for _, tc := range []struct {
		d    faultproxy.Direction
		want string
	}{
		{0, "none"},
		{faultproxy.ToServer, "toServer"},
		{faultproxy.ToClient, "toClient"},
		{faultproxy.Both, "both"},
		{faultproxy.Direction(4), "Direction(4)"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("Direction(%d).String() = %q, want %q", uint8(tc.d), got, tc.want)
		}
	}
}

// TestFaultsUnderLoad switches faults while clients keep making round trips
// and reconnecting: every client finishes once the faults end, and the
// proxy's goroutines all return on Close (checked by goleak).
func TestFaultsUnderLoad(t *testing.T) {
	p := faultproxy.New(t, startEcho(t))
	const clients = 4
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() { churn(p.Addr(), stop) })
	}
	faults := []func(){
		p.Cut,
		func() { p.Blackhole(faultproxy.ToServer) },
		func() { p.Delay(faultproxy.Both, time.Millisecond) },
		func() { p.Blackhole(faultproxy.ToClient) },
		p.Heal,
	}
	for i := range 200 {
		faults[i%len(faults)]()
		if i%len(faults) == len(faults)-1 {
			// Let some traffic through before the next round of faults.
			n := p.Forwarded(faultproxy.Both)
			runtest.WaitFor(t, "bytes to flow after Heal", func() bool { return p.Forwarded(faultproxy.Both) > n }, runtest.Within(waitTimeout))
		}
	}
	close(stop)
	wg.Wait()
	runtest.WaitFor(t, "every connection to close", func() bool { return p.Conns() == 0 }, runtest.Within(waitTimeout))
}

// churn makes round trips on connections to addr, with short timeouts, and
// opens a new connection after any failure, until stop is closed.
func churn(addr string, stop <-chan struct{}) {
	msg := []byte("0123456789")
	buf := make([]byte, len(msg))
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		for err == nil {
			select {
			case <-stop:
				_ = c.Close()
				return
			default:
			}
			_ = c.SetDeadline(time.Now().Add(20 * time.Millisecond))
			if _, err = c.Write(msg); err == nil {
				_, err = io.ReadFull(c, buf)
			}
		}
		_ = c.Close()
	}
}
