package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	dialTimeout = 5 * time.Second       // connecting to the target for one accepted client
	acceptPause = 10 * time.Millisecond // after an accept error other than a closed listener
	readBufSize = 32 << 10              // one read from either side
	queueChunks = 64                    // reads held per direction while a delay runs
	listenAddr  = "127.0.0.1:0"
)

// Proxy is a TCP proxy on the loopback interface that forwards every
// connection it accepts to one target and can break them on demand: [Proxy.Cut]
// resets them, [Proxy.Blackhole] swallows the bytes of one direction,
// [Proxy.Delay] holds them back, and [Proxy.Heal] ends every fault. Faults
// apply at once to the open connections and to new ones.
//
// Make one with [Start] (or [New] in a test) and stop it with [Proxy.Close],
// which closes every connection and waits for every goroutine of the proxy.
// The zero value is not usable. A Proxy is safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	stop   context.CancelFunc // ends the dials in progress; called by Close
	wg     sync.WaitGroup     // the accept loop and every connection's goroutines

	dirs    [len(directions)]dirState // faults and counters, indexed like directions
	refused atomic.Int64

	closeOnce sync.Once
	closeErr  error

	mu     sync.Mutex
	cut    bool
	closed bool
	links  map[*link]struct{} // the open proxied connections
}

// Start listens on a free port of 127.0.0.1 and forwards every connection it
// accepts to target, a host:port, until [Proxy.Close]. Each accepted
// connection dials target; if that fails, the client's connection is reset.
func Start(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen on %s: %w", listenAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, target: target, stop: cancel, links: make(map[*link]struct{})}
	p.wg.Go(func() { p.acceptLoop(ctx) })
	return p, nil
}

// New is [Start] for a test: it fails the test if the proxy does not start
// and closes the proxy when the test finishes.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("faultproxy: close %s: %v", p.Addr(), err)
		}
	})
	return p
}

// Addr returns the address clients connect to: 127.0.0.1:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the host:port every connection is forwarded to.
func (p *Proxy) Target() string { return p.target }

// Close stops accepting, resets every open connection and waits until every
// goroutine of the proxy has returned. Calling Close again does nothing and
// returns the first call's error.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		links := p.takeLinks()
		p.mu.Unlock()
		p.stop()
		if err := p.ln.Close(); err != nil {
			p.closeErr = fmt.Errorf("faultproxy: close listener %s: %w", p.Addr(), err)
		}
		for _, l := range links {
			l.end(true)
		}
		p.wg.Wait()
	})
	return p.closeErr
}

// Conns returns the number of open proxied connections: accepted, connected
// to the target and neither closed nor cut.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Forwarded returns the number of bytes delivered in dir since Start (for
// Both, the sum of the two directions).
func (p *Proxy) Forwarded(dir Direction) int64 {
	var n int64
	for i, d := range directions {
		if dir&d != 0 {
			n += p.dirs[i].forwarded.Load()
		}
	}
	return n
}

// Swallowed returns the number of bytes a black hole in dir has dropped since
// Start (for Both, the sum of the two directions).
func (p *Proxy) Swallowed(dir Direction) int64 {
	var n int64
	for i, d := range directions {
		if dir&d != 0 {
			n += p.dirs[i].swallowed.Load()
		}
	}
	return n
}

// Refused returns the number of connections accepted while cut, and reset at
// once, since Start.
func (p *Proxy) Refused() int64 { return p.refused.Load() }

// acceptLoop accepts until the listener is closed; each connection is served
// in a goroutine of its own, owned by p.wg.
func (p *Proxy) acceptLoop(ctx context.Context) {
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: try again shortly.
			pause.Reset(acceptPause)
			select {
			case <-ctx.Done():
				return
			case <-pause.C:
			}
			continue
		}
		client := c.(*net.TCPConn)
		if p.isCut() {
			p.refuse(client)
			continue
		}
		p.wg.Go(func() { p.serve(ctx, client) })
	}
}

// serve connects client to the target and forwards between them until either
// side ends the connection, the proxy cuts it or the proxy closes.
func (p *Proxy) serve(ctx context.Context, client *net.TCPConn) {
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", p.target)
	if err != nil {
		reset(client)
		return
	}
	l := newLink(client, c.(*net.TCPConn), &p.dirs)
	if !p.add(l) {
		l.end(true)
		return
	}
	l.run()
	p.remove(l)
}

// add registers l unless the proxy is cut or closed; a link made while the
// proxy was cut counts as refused.
func (p *Proxy) add(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if p.cut {
		p.refused.Add(1)
		return false
	}
	p.links[l] = struct{}{}
	return true
}

func (p *Proxy) remove(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

// takeLinks empties the set of open connections and returns them. p.mu is held.
func (p *Proxy) takeLinks() []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	clear(p.links)
	return links
}

func (p *Proxy) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// refuse resets a connection accepted while cut.
func (p *Proxy) refuse(c *net.TCPConn) {
	p.refused.Add(1)
	reset(c)
}

// reset closes c with an RST rather than a FIN, so that its peer reads
// "connection reset by peer".
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}
