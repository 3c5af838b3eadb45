package source

import (
	"bufio"
	"container/list"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// How many connections an http source holds, and which it gives up first.

// DefaultHTTPMaxConnections is the MaxConnections of an HTTPConfig that gives
// none. A connection costs the source about 8 KiB of buffers and a
// goroutine besides the bytes of its request, and the process one file
// descriptor.
const DefaultHTTPMaxConnections = 4096

// maxRefusing is how many refused connections are answered at once; more
// are closed without an answer.
const maxRefusing = 64

// refusal is what a connection refused at the limit gets.
var refusal = func() string {
	body := "too many connections: every one is busy with a request\n"
	return "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

// HTTPStats are counts of an [HTTP] source's connections and of the requests
// it cut.
type HTTPStats struct {
	// Connections is how many connections are open, and Waiting how many of
	// them wait for a request: idle between requests, or silent since they
	// opened. The others are busy with a request.
	Connections, Waiting int
	// ConnectionsRefused counts the connections refused at MaxConnections,
	// every open one being busy with a request: they got 503 Service
	// Unavailable with Retry-After.
	ConnectionsRefused uint64
	// ConnectionsEvicted counts the connections closed at MaxConnections to
	// make room for a new one: those that had waited longest for a request,
	// idle between requests or silent since they opened.
	ConnectionsEvicted uint64
	// BodyTimeouts counts the requests whose body did not arrive at the pace
	// of ReadBodyTimeout and MinBodyBytesPerSecond: they got 408 Request
	// Timeout.
	BodyTimeouts uint64
	// Rejoined counts the requests that carried the X-Numaflow-Id of a
	// message still in flight and waited for it instead of being a second
	// message (a client retrying after a 504).
	Rejoined uint64
}

// Stats returns the source's counts.
func (h *HTTP) Stats() HTTPStats {
	open, waiting := h.conns.count()
	return HTTPStats{Connections: open, Waiting: waiting, ConnectionsRefused: h.conns.refused.Load(),
		ConnectionsEvicted: h.conns.evicted.Load(), BodyTimeouts: h.bodyTimeouts.Load(),
		Rejoined: h.rejoined.Load()}
}

// connLimit holds the connections of an [HTTP] source, on all its
// listeners, to at most max open. At max, a new connection closes the open
// one that has waited longest for a request (idle between requests, or
// silent since it opened) to make room; when every open connection is busy
// with a request, the new one is refused: it gets 503 Service Unavailable
// with Retry-After and is closed. The server reports each connection's
// state to state. A connLimit is safe for concurrent use.
type connLimit struct {
	max int

	open     counter // changed with mu held
	mu       sync.Mutex
	waiting  list.List // of *limitedConn, the longest waiting first
	refusing sync.WaitGroup
	answers  atomic.Int32 // refused connections being answered
	refused  atomic.Uint64
	evicted  atomic.Uint64
}

// limitedConn is a connection of a connLimit.
type limitedConn struct {
	net.Conn
	l *connLimit
	// Guarded by l.mu: the connection's place in l.waiting while it waits
	// for a request, and whether it is closed.
	waiting *list.Element
	closed  bool
}

// limitedListener is a listener of an [HTTP] source under its connLimit.
// With tls set, it serves HTTPS: a connection refused at the limit gets its
// 503 over TLS.
type limitedListener struct {
	net.Listener
	l   *connLimit
	tls *tls.Config
}

// Accept returns the next connection the limit has room for, refusing those
// it has none for.
func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := ll.l.take(c); lc != nil {
			return lc, nil
		}
		if ll.tls != nil {
			c = tls.Server(c, ll.tls)
		}
		ll.l.refuse(c)
	}
}

// take makes room for c, closing the connection that has waited longest if
// it must, or returns nil when every open connection is busy.
func (l *connLimit) take(c net.Conn) *limitedConn {
	l.mu.Lock()
	var evict *limitedConn
	if l.open.value() >= l.max {
		front := l.waiting.Front()
		if front == nil {
			l.mu.Unlock()
			return nil
		}
		evict = front.Value.(*limitedConn)
		l.forgetLocked(evict)
	}
	l.open.add(1)
	l.mu.Unlock()
	if evict != nil {
		l.evicted.Add(1)
		evict.Conn.Close()
	}
	return &limitedConn{Conn: c, l: l}
}

// refuse answers c's request 503 and closes it, in a goroutine of its own,
// or closes it at once when maxRefusing are being answered. A TLS
// connection has its handshake under the same deadline as the request.
func (l *connLimit) refuse(c net.Conn) {
	l.refused.Add(1)
	if l.answers.Add(1) > maxRefusing {
		l.answers.Add(-1)
		c.Close()
		return
	}
	l.refusing.Add(1)
	go func() {
		defer l.refusing.Done()
		defer l.answers.Add(-1)
		defer c.Close()
		// The answer comes after the request's head: a client gets no
		// answer to a request it has not sent.
		c.SetDeadline(time.Now().Add(2 * lingerTime))
		r := bufio.NewReader(c)
		if _, err := http.ReadRequest(r); err != nil {
			return
		}
		if _, err := io.WriteString(c, refusal); err == nil {
			linger(c, r)
		}
	}()
}

// state follows the server's view of c: a connection waits for a request
// when it is new or idle, and is busy otherwise.
func (l *connLimit) state(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.closed {
		return
	}
	switch wait := s == http.StateNew || s == http.StateIdle; {
	case wait && lc.waiting == nil:
		lc.waiting = l.waiting.PushBack(lc)
	case !wait && lc.waiting != nil:
		l.waiting.Remove(lc.waiting)
		lc.waiting = nil
	}
}

// forgetLocked takes c out of the count. l.mu is held.
func (l *connLimit) forgetLocked(c *limitedConn) {
	c.closed = true
	if c.waiting != nil {
		l.waiting.Remove(c.waiting)
		c.waiting = nil
	}
	l.open.add(-1)
}

// count returns how many connections are open, and how many of them wait
// for a request.
func (l *connLimit) count() (open, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open.value(), l.waiting.Len()
}

// wait waits, up to d, for the refused connections' answers and for every
// connection to be closed: the server closes its own, and the source those
// it took over to answer 408.
func (l *connLimit) wait(d time.Duration) {
	l.refusing.Wait()
	l.open.wait(d)
}

// Close closes the connection and gives its place back.
func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	if !c.closed {
		c.l.forgetLocked(c)
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as the server does before it
// closes a connection whose client may still be sending.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// counter counts what is open, and lets one wait until none is. A counter
// is safe for concurrent use.
type counter struct {
	mu   sync.Mutex
	n    int
	none chan struct{} // closed when n falls to 0, for wait
}

// add adds d to the count.
func (c *counter) add(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += d
	if c.n == 0 && c.none != nil {
		close(c.none)
		c.none = nil
	}
}

// value returns the count.
func (c *counter) value() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// wait waits, up to d, until the count is 0.
func (c *counter) wait(d time.Duration) {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return
	}
	if c.none == nil {
		c.none = make(chan struct{})
	}
	none := c.none
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-none:
	case <-t.C:
	}
}
