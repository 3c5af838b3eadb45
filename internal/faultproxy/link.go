package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// link is one proxied connection: the client's connection to the proxy, the
// proxy's connection to the target, and a pipe each way. Each pipe is a
// reader, which applies the black hole and stamps each read with the time it
// is due, and a writer, which waits until then and delivers it.
type link struct {
	client, server *net.TCPConn
	pipes          [len(directions)]pipe

	done    chan struct{} // closed by end
	endOnce sync.Once
}

// pipe carries the bytes of one direction.
type pipe struct {
	src, dst *net.TCPConn
	st       *dirState
	q        chan chunk // closed by the reader when it stops
}

// chunk is one read, due for delivery at due (zero: at once).
type chunk struct {
	b   []byte
	due time.Time
}

func newLink(client, server *net.TCPConn, dirs *[len(directions)]dirState) *link {
	l := &link{client: client, server: server, done: make(chan struct{})}
	for i, d := range directions {
		src, dst := client, server
		if d == ToClient {
			src, dst = server, client
		}
		l.pipes[i] = pipe{src: src, dst: dst, st: &dirs[i], q: make(chan chunk, queueChunks)}
	}
	return l
}

// run forwards both ways until both sides have closed their half, or until
// an error or end resets the link; then it closes both connections.
func (l *link) run() {
	var wg sync.WaitGroup
	for i := range l.pipes {
		pp := &l.pipes[i]
		wg.Go(func() { l.read(pp) })
		wg.Go(func() { l.write(pp) })
	}
	wg.Wait()
	l.end(false)
}

// end closes both connections, once: with an RST if rst, else with a FIN.
// It wakes every goroutine of the link.
func (l *link) end(rst bool) {
	l.endOnce.Do(func() {
		close(l.done)
		if rst {
			reset(l.client)
			reset(l.server)
			return
		}
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// read reads pp.src until EOF or an error and queues what it reads for the
// writer, unless a black hole swallows it. On EOF it closes the queue, and
// the writer passes the FIN on; on any other error it resets the link.
func (l *link) read(pp *pipe) {
	defer close(pp.q)
	buf := make([]byte, readBufSize)
	for {
		n, err := pp.src.Read(buf)
		if n > 0 && !l.queue(pp, buf[:n]) {
			return
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			l.end(true)
			return
		}
	}
}

// queue hands b, read just now, to the writer with the delay in force, or
// counts it as swallowed. It reports false if the link has ended.
func (l *link) queue(pp *pipe, b []byte) bool {
	if pp.st.blackhole.Load() {
		pp.st.swallowed.Add(int64(len(b)))
		return true
	}
	c := chunk{b: bytes.Clone(b)}
	if d := time.Duration(pp.st.delay.Load()); d > 0 {
		c.due = time.Now().Add(d)
	}
	select {
	case pp.q <- c:
		return true
	case <-l.done:
		return false
	}
}

// write delivers the queued reads in order, each when it is due. When the
// reader has seen EOF it half-closes pp.dst; a failed write resets the link.
func (l *link) write(pp *pipe) {
	wait := time.NewTimer(0)
	defer wait.Stop()
	for c := range pp.q {
		if d := time.Until(c.due); !c.due.IsZero() && d > 0 {
			wait.Reset(d)
			select {
			case <-wait.C:
			case <-l.done:
				return
			}
		}
		if _, err := pp.dst.Write(c.b); err != nil {
			l.end(true)
			return
		}
		pp.st.forwarded.Add(int64(len(c.b)))
	}
	select {
	case <-l.done: // the reader stopped because the link ended
	default:
		_ = pp.dst.CloseWrite()
	}
}
