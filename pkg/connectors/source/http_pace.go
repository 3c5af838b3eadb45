package source

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// How long an http source lets a client take to send a request: its
// headers, then its body at a pace, then, between requests on a connection
// kept alive, the wait for the next.

// Defaults of an HTTPConfig's pace: a slow mobile client keeps to them, a
// client that holds a request open by sending a byte now and then does not.
const (
	// DefaultHTTPReadHeaderTimeout is the ReadHeaderTimeout of an HTTPConfig
	// that gives none.
	DefaultHTTPReadHeaderTimeout = 10 * time.Second
	// DefaultHTTPReadBodyTimeout is the ReadBodyTimeout of an HTTPConfig that
	// gives none.
	DefaultHTTPReadBodyTimeout = 10 * time.Second
	// DefaultHTTPMinBodyBytesPerSecond is the MinBodyBytesPerSecond of an
	// HTTPConfig that gives none: 500 bytes a second is 4 kbit/s, a tenth of
	// the slowest mobile data link (GPRS).
	DefaultHTTPMinBodyBytesPerSecond = 500
	// DefaultHTTPIdleTimeout is the IdleTimeout of an HTTPConfig that gives
	// none.
	DefaultHTTPIdleTimeout = 60 * time.Second
)

// errSlowBody is matched by the error of a body that did not arrive at the
// source's pace: 408 Request Timeout.
var errSlowBody = errors.New("the body arrived too slowly")

// lingerTime is how long the source, having answered a client that is still
// sending, reads and drops what it sends before it closes the connection: a
// connection closed with unread bytes is reset, and a reset can take the
// answer with it before the client reads it.
const lingerTime = 500 * time.Millisecond

// pace makes every request's body arrive at the source's pace, whatever
// handler takes it: the body of a request refused before it is read is
// dropped by the server after the handler, under the same deadline.
func (h *HTTP) pace(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.handling.add(1)
		defer h.handling.add(-1)
		// A request without a body has net/http's background read begun,
		// which must not get a deadline.
		if r.ContentLength != 0 {
			p := &pacedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), length: r.ContentLength, start: time.Now(),
				grace: h.cfg.ReadBodyTimeout, rate: h.cfg.MinBodyBytesPerSecond}
			p.extend()
			// The server looks at the Body of its own request, r, to decide
			// what to do with what is left of it: the handler gets a copy.
			r = r.WithContext(r.Context())
			r.Body = p
		}
		next.ServeHTTP(w, r)
	})
}

// pacedBody is a request's body read under a deadline that its bytes push
// back: grace after the body began plus one second for every rate bytes
// read. A body that keeps up with rate is never cut; one that stops is cut
// grace plus its bytes' seconds after it began; t seconds after it began, a
// body has sent at least rate × (t − grace) bytes. A read past the deadline
// returns an error matching errSlowBody.
type pacedBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	length int64 // the Content-Length, -1 for a chunked body
	start  time.Time
	grace  time.Duration
	rate   int64

	read int64
	set  time.Time // the deadline in force
	err  error     // the end of the body: io.EOF or what stopped it
}

// Read reads from the body under its deadline. Once the body has ended it
// reads nothing and leaves the connection's deadline alone: net/http takes
// it off for its background read, which a deadline would end.
func (p *pacedBody) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	p.extend()
	n, err := p.ReadCloser.Read(b)
	p.read += int64(n)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			of := ""
			if p.length > 0 {
				of = " of " + strconv.FormatInt(p.length, 10)
			}
			err = fmt.Errorf("%w: %d%s bytes in %v, where %v and one second for every %d bytes are allowed",
				errSlowBody, p.read, of, time.Since(p.start).Round(time.Millisecond), p.grace, p.rate)
		}
		p.err = err
	}
	return n, err
}

// extend sets the connection's read deadline for the bytes read so far.
func (p *pacedBody) extend() {
	earned := time.Duration(p.read/p.rate)*time.Second + time.Duration(p.read%p.rate)*time.Second/time.Duration(p.rate)
	if d := p.start.Add(p.grace + earned); !d.Equal(p.set) {
		p.set = d
		p.rc.SetReadDeadline(d) // an HTTP/1 connection always can
	}
}

// tooSlow answers a request whose body missed its pace: 408 Request Timeout,
// and the connection is closed. On an HTTP/1 connection the source writes
// the answer itself, half-closes the connection and drops what the client
// still sends for lingerTime, so that the client reads the answer.
func (h *HTTP) tooSlow(w http.ResponseWriter, err error) {
	h.bodyTimeouts.Add(1)
	msg := err.Error() + "\n"
	conn, rw, herr := http.NewResponseController(w).Hijack()
	if herr != nil {
		w.Header().Set("Connection", "close")
		http.Error(w, err.Error(), http.StatusRequestTimeout)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(lingerTime))
	fmt.Fprintf(rw, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"X-Content-Type-Options: nosniff\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
	if rw.Flush() != nil {
		return
	}
	linger(conn, rw)
}

// linger half-closes conn and reads and drops what comes on r, its reader,
// until the client closes or the connection's read deadline.
func linger(conn net.Conn, r io.Reader) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(r, dropBytes))
}
