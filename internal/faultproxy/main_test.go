package faultproxy_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	waitTimeout = 5 * time.Second        // every wait on a condition gives up after this
	ioTimeout   = 5 * time.Second        // deadline of reads and writes that must succeed
	quiet       = 100 * time.Millisecond // how long a read waits to show that nothing arrives
)

// startEcho starts a TCP server on 127.0.0.1 that writes back what it reads
// and closes a connection after the client's FIN. It stops, and its
// goroutines have returned, when the test finishes.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					_ = c.Close()
				}()
				_, _ = io.Copy(c, c)
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// dial connects to addr; the connection is closed when the test finishes.
func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip writes msg on c and reads back as many bytes.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	expect(t, c, msg)
}

// expect reads len(want) bytes from c and checks they are want.
func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %q back: %v", want, err)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// expectNothing checks that nothing arrives on c for a while and that c is
// still open.
func expectNothing(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(quiet))
	var b [64]byte
	n, err := c.Read(b[:])
	if n > 0 {
		t.Fatalf("read %q, want nothing", b[:n])
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read error %v, want a timeout on an open connection", err)
	}
}

// expectReset checks that the next read on c fails with a reset (or, on a
// connection that was reset before the client wrote anything, EOF) within
// waitTimeout.
func expectReset(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	var b [64]byte
	n, err := c.Read(b[:])
	if n > 0 || !isConnError(err) {
		t.Fatalf("read %q, %v; want a connection reset", b[:n], err)
	}
}

// expectDialReset checks that a new connection to addr is reset: either
// connecting fails with a reset, or the first read does.
func expectDialReset(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		if !isConnError(err) {
			t.Fatalf("dial %s: %v; want a connection reset", addr, err)
		}
		return
	}
	defer c.Close()
	expectReset(t, c)
}

// isConnError reports whether err says the connection was reset or closed
// by the peer, as opposed to a timeout.
func isConnError(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
