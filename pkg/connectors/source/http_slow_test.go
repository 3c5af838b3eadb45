package source_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// Slow and silent clients, over real TCP on a loopback port: clients that
// open connections and send nothing, send headers and no body, or trickle
// a body.

// dial opens a raw connection to s, closed when the test ends: over TLS,
// its handshake done, when s serves HTTPS.
func (s *httpSource) dial(t *testing.T) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	if s.tls != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: wait}, "tcp", s.addr, s.tls)
	} else {
		c, err = net.Dial("tcp", s.addr)
	}
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// head is the head of a POST to s whose body is length bytes, or chunked
// when length is -1.
func (s *httpSource) head(length int) string {
	framing := "Content-Length: " + strconv.Itoa(length)
	if length < 0 {
		framing = "Transfer-Encoding: chunked"
	}
	return "POST /vertices/" + s.vertex + " HTTP/1.1\r\nHost: sluice\r\n" + framing + "\r\n\r\n"
}

// write writes p to c or fails the test.
func write(t *testing.T, c net.Conn, p string) {
	t.Helper()
	if _, err := io.WriteString(c, p); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// trickle writes piece to c every period, n times or until the connection
// fails or stop is closed; wg is done when it stops.
func trickle(c net.Conn, piece string, period time.Duration, n int, stop <-chan struct{}, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for range n {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := io.WriteString(c, piece); err != nil {
				return
			}
		}
	}()
}

// forward reads and acks what s queues, as a vertex's forwarder does, until
// the test ends.
func forward(t testing.TB, s *httpSource) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]isb.ReadMessage, 20)
		for ctx.Err() == nil {
			n, _ := s.Read(ctx, buf)
			s.Ack(ctx, buf[:n])
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// readAnswer reads the answer on c, with up to wait for it.
func readAnswer(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return resp, string(b)
}

// assertClosed checks that the source has closed c: a read gets EOF, or a
// reset when the client was still sending.
func assertClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	var one [1]byte
	n, err := c.Read(one[:])
	if n > 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	}
}

// assertOpen checks that the source has not closed c: a read waits.
func assertOpen(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var one [1]byte
	if n, err := c.Read(one[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v; want the connection open and silent", n, err)
	}
	c.SetReadDeadline(time.Time{})
}

// TestHTTPSlowClientsDoNotStarve: 500 connections that send nothing, 500
// that send headers and no body, and 30 that trickle a body — all of them
// kept open, the deadlines being long — beside a queue of 20: each of 20
// good clients posting at once is accepted, and the slow ones hold no place
// in the queue, only their connections and the bytes of their first
// buffers. With as many connections open as MaxConnections, the good clients
// take the places of silent ones.
func TestHTTPSlowClientsDoNotStarve(t *testing.T) {
	const (
		silent, headersOnly, tricklers, good = 500, 500, 30, 20
		length                               = 1000
		slow                                 = headersOnly + tricklers
	)
	// A connection is a file in the client and one in the source.
	needFiles(t, 2*(silent+slow+good)+200)
	for _, tt := range []struct {
		name           string
		maxConnections int
	}{
		{"room for every connection", 0},
		{"at MaxConnections", silent + slow},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startHTTP(t, source.HTTPConfig{Queue: 20, ReadHeaderTimeout: time.Minute, ReadBodyTimeout: time.Minute,
				MaxConnections: tt.maxConnections})
			stop := make(chan struct{})
			var wg sync.WaitGroup
			defer wg.Wait()
			defer close(stop)
			for range silent {
				s.dial(t)
			}
			for i := range slow {
				c := s.dial(t)
				write(t, c, s.head(length))
				if i >= headersOnly {
					trickle(c, "x", 100*time.Millisecond, length-1, stop, &wg)
				}
			}
			runtest.WaitFor(t, "the slow clients admitted", func() bool {
				_, b := s.Held()
				st := s.Stats()
				return b == slow*length && st.Connections == silent+slow && st.Waiting == silent
			})

			forward(t, s)
			var answers []<-chan response
			for i := range good {
				answers = append(answers, s.post("good "+strconv.Itoa(i), nil))
			}
			accepted, refused := 0, map[int]int{}
			for _, ch := range answers {
				switch r := <-ch; {
				case r.err != nil:
					t.Errorf("a good request failed: %v", r.err)
				case r.status == http.StatusNoContent:
					accepted++
				default:
					refused[r.status]++
				}
			}
			st := s.Stats()
			t.Logf("good requests: %d accepted, refused %v; %+v", accepted, refused, st)
			if accepted != good {
				t.Fatalf("%d of %d good requests accepted, refused %v", accepted, good, refused)
			}
			// The slow ones are all there, but for the silent ones that made
			// room (one for each good client at most).
			evicted := 0
			if tt.maxConnections > 0 {
				evicted = int(st.ConnectionsEvicted)
				if evicted < 1 || evicted > good {
					t.Errorf("%d connections evicted, want 1 to %d", evicted, good)
				}
			}
			if st.Waiting != silent-evicted || st.BodyTimeouts != 0 || st.ConnectionsRefused != 0 || (tt.maxConnections == 0 && evicted != 0) {
				t.Errorf("Stats() = %+v; want %d silent, none cut", st, silent-evicted)
			}
			assertHeld(t, s, 0, slow*length)

			if err := s.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			if st := s.Stats(); st.Connections != 0 {
				t.Errorf("%d connections open after Close", st.Connections)
			}
			assertHeld(t, s, 0, 0)
		})
	}
}

// pace is the short pace of the tests below: a body has half a second, and
// one more for every 100 bytes.
var pace = source.HTTPConfig{ReadBodyTimeout: 500 * time.Millisecond, MinBodyBytesPerSecond: 100}

// TestHTTPCutsASlowBody: a body that stops or trickles below the pace gets
// 408 once it falls behind, and its connection is closed; its bytes come
// back and the queue goes on taking requests.
func TestHTTPCutsASlowBody(t *testing.T) {
	forSchemes(t, func(t *testing.T, start startFunc) {
		tests := []struct {
			name   string
			length int    // -1: chunked
			piece  string // sent every 50 ms: 20 bytes a second at most
		}{
			{"silent body", 1000, ""},
			{"trickling", 1000, "x"},
			{"trickling chunked", -1, "1\r\nx\r\n"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := start(t, pace)
				forward(t, s)
				stop := make(chan struct{})
				var wg sync.WaitGroup
				defer wg.Wait()
				defer close(stop)
				c := s.dial(t)
				began := time.Now()
				write(t, c, s.head(tt.length))
				if tt.piece != "" {
					trickle(c, tt.piece, 50*time.Millisecond, 1000, stop, &wg)
				}
				resp, body := readAnswer(t, c)
				took := time.Since(began)
				if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "arrived too slowly") {
					t.Fatalf("answer %d %q, want 408", resp.StatusCode, body)
				}
				if !resp.Close {
					t.Error("the 408 does not close the connection")
				}
				// The deadline is half a second after the body began, and 10 ms
				// later for each byte, of which at most 20 come a second.
				if took < pace.ReadBodyTimeout {
					t.Errorf("cut after %v, before the %v every body has", took, pace.ReadBodyTimeout)
				}
				t.Logf("cut after %v: %s", took.Round(time.Millisecond), strings.TrimSpace(body))
				assertClosed(t, c)
				if st := s.Stats(); st.BodyTimeouts != 1 {
					t.Errorf("BodyTimeouts = %d, want 1", st.BodyTimeouts)
				}
				assertHeld(t, s, 0, 0)
				if r := awaitResponse(t, s.post("next", nil)); r.status != http.StatusNoContent {
					t.Fatalf("the next request got %d (%q), want 204", r.status, r.body)
				}
			})
		}
	})
}

// TestHTTPAcceptsASlowSteadyBody: a body that takes three times the grace
// to arrive, at ten times the least rate, is accepted.
func TestHTTPAcceptsASlowSteadyBody(t *testing.T) {
	const pieces, piece = 15, 100 // 1,500 bytes over 1.5 s: 1,000 bytes a second
	s := startHTTP(t, pace)
	forward(t, s)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	c := s.dial(t)
	began := time.Now()
	write(t, c, s.head(pieces*piece))
	trickle(c, strings.Repeat("s", piece), 100*time.Millisecond, pieces, stop, &wg)
	resp, body := readAnswer(t, c)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("answer %d %q, want 204", resp.StatusCode, body)
	}
	took := time.Since(began)
	if took < 3*pace.ReadBodyTimeout {
		t.Errorf("the body arrived in %v, not slower than the %v of grace", took, pace.ReadBodyTimeout)
	}
	t.Logf("accepted after %v", took.Round(time.Millisecond))
	if st := s.Stats(); st.BodyTimeouts != 0 {
		t.Errorf("BodyTimeouts = %d, want 0", st.BodyTimeouts)
	}
	assertHeld(t, s, 0, 0)
}

// TestHTTPRefusedBodyIsPaced: a request refused before its body is read
// (here 401) and whose client trickles the body is not kept open for it:
// the server drops the body under the same pace and closes the connection.
func TestHTTPRefusedBodyIsPaced(t *testing.T) {
	forSchemes(t, func(t *testing.T, start startFunc) {
		cfg := pace
		cfg.Token = "secret"
		s := start(t, cfg)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		defer wg.Wait()
		defer close(stop)
		c := s.dial(t)
		write(t, c, s.head(1000))
		trickle(c, "x", 50*time.Millisecond, 1000, stop, &wg)
		if resp, body := readAnswer(t, c); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("answer %d %q, want 401", resp.StatusCode, body)
		}
		assertClosed(t, c)
		runtest.WaitFor(t, "the connection closed", func() bool { return s.Stats().Connections == 0 })
	})
}

// TestHTTPClosesSilentAndIdleConnections: a connection whose headers do not
// come within ReadHeaderTimeout, and one kept alive with no request for
// IdleTimeout, are closed.
func TestHTTPClosesSilentAndIdleConnections(t *testing.T) {
	forSchemes(t, func(t *testing.T, start startFunc) {
		const timeout = 300 * time.Millisecond
		s := start(t, source.HTTPConfig{ReadHeaderTimeout: timeout, IdleTimeout: timeout})
		began := time.Now()
		silent, partial, idle := s.dial(t), s.dial(t), s.dial(t)
		write(t, partial, "POST /vertices/in HTTP/1.1\r\nHost: slu")
		write(t, idle, "GET /health HTTP/1.1\r\nHost: sluice\r\n\r\n")
		if resp, body := readAnswer(t, idle); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("answer %d %q, want 204", resp.StatusCode, body)
		}
		for name, c := range map[string]net.Conn{"silent": silent, "partial headers": partial, "idle": idle} {
			assertClosed(t, c)
			if took := time.Since(began); took < timeout {
				t.Errorf("%s: closed after %v, before %v", name, took, timeout)
			}
		}
		runtest.WaitFor(t, "no connection open", func() bool { return s.Stats().Connections == 0 })
	})
}

// TestHTTPMaxConnections: at MaxConnections, a new connection closes the one
// that has waited longest for a request — silent since it opened, or idle
// between requests — and when every connection is busy with a request it
// gets 503 with Retry-After; a place given back is taken again.
func TestHTTPMaxConnections(t *testing.T) {
	forSchemes(t, func(t *testing.T, start startFunc) {
		s := start(t, source.HTTPConfig{MaxConnections: 3})
		forward(t, s)
		conns := func(open, waiting int) func() bool {
			return func() bool { st := s.Stats(); return st.Connections == open && st.Waiting == waiting }
		}
		post := func(body string, want int) response {
			t.Helper()
			r := awaitResponse(t, s.post(body, nil))
			if r.status != want {
				t.Fatalf("%s: status %d (%q), want %d", body, r.status, r.body, want)
			}
			return r
		}
		silent := s.dial(t)
		idle := s.dial(t)
		write(t, idle, "GET /health HTTP/1.1\r\nHost: sluice\r\n\r\n")
		if resp, _ := readAnswer(t, idle); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("answer %d, want 204", resp.StatusCode)
		}
		busy := s.dial(t)
		write(t, busy, s.head(10)) // its body never comes: busy with its request
		runtest.WaitFor(t, "3 open, 2 waiting", conns(3, 2))

		// The silent one has waited longest.
		post("good 0", http.StatusNoContent)
		assertClosed(t, silent)
		runtest.WaitFor(t, "2 open, 1 waiting", conns(2, 1))
		// Then the idle one.
		later := s.dial(t)
		runtest.WaitFor(t, "3 open, 2 waiting", conns(3, 2))
		post("good 1", http.StatusNoContent)
		assertClosed(t, idle)
		assertOpen(t, later)
		assertOpen(t, busy)

		// Every connection busy: the next is refused.
		later.Close()
		runtest.WaitFor(t, "1 open", conns(1, 0))
		var busies []net.Conn
		for range 2 {
			c := s.dial(t)
			write(t, c, s.head(10))
			busies = append(busies, c)
		}
		runtest.WaitFor(t, "3 open, 0 waiting", conns(3, 0))
		if r := post("refused", http.StatusServiceUnavailable); r.header.Get("Retry-After") != "1" {
			t.Errorf("503 with Retry-After %q, want 1", r.header.Get("Retry-After"))
		}
		if st := s.Stats(); st.ConnectionsEvicted != 2 || st.ConnectionsRefused != 1 {
			t.Errorf("Stats() = %+v; want 2 evicted, 1 refused", st)
		}

		// A busy one done, its place is free.
		write(t, busies[0], "0123456789")
		if resp, body := readAnswer(t, busies[0]); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("answer %d %q, want 204", resp.StatusCode, body)
		}
		busies[0].Close()
		runtest.WaitFor(t, "2 open", conns(2, 0))
		post("after", http.StatusNoContent)
	})
}
