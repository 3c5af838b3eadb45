package source_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// upload is a request whose body the test controls: how long it says it is,
// whether it waits to be asked for its body, and what the client sent.
type upload struct {
	body   io.Reader
	length int64 // -1: chunked
	expect bool  // Expect: 100-continue
	close  bool  // Connection: close
	token  string
}

// sent is an upload on its way: its answer, a channel closed when the server
// asked for the body (100 Continue), and the body bytes the client sent.
type sent struct {
	answer    <-chan response
	continued <-chan struct{}
	sent      *atomic.Int64
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// send posts u to s with a client of its own that waits for 100 Continue
// before it sends a body it was asked to hold back.
func (s *httpSource) send(t *testing.T, u upload) sent {
	t.Helper()
	tr := s.transport()
	tr.DisableKeepAlives = false
	t.Cleanup(tr.CloseIdleConnections)
	n := new(atomic.Int64)
	continued := make(chan struct{})
	req, err := http.NewRequest(http.MethodPost, s.base+"/vertices/"+s.vertex, io.NopCloser(countingReader{u.body, n}))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = u.length
	req.Close = u.close
	if u.expect {
		req.Header.Set("Expect", "100-continue")
	}
	if u.token != "" {
		req.Header.Set("Authorization", "Bearer "+u.token)
	}
	req = req.WithContext(httptrace.WithClientTrace(context.Background(),
		&httptrace.ClientTrace{Got100Continue: func() { close(continued) }}))
	ch := make(chan response, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr, Timeout: 2 * wait}).Do(req)
		if err != nil {
			ch <- response{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- response{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
	}()
	return sent{answer: ch, continued: continued, sent: n}
}

// admitted waits until the server has asked for the body of u: it took u's
// place and bytes.
func (u sent) admitted(t *testing.T) {
	t.Helper()
	select {
	case <-u.continued:
	case r := <-u.answer:
		t.Fatalf("answered %d (%q, %v) before asking for the body", r.status, r.body, r.err)
	case <-time.After(wait):
		t.Fatal("the body was never asked for")
	}
}

// refused checks that u got status, with Retry-After when it is 429, and that
// the client sent at most sentMax bytes of its body.
func (u sent) refused(t *testing.T, status int, sentMax int64) response {
	t.Helper()
	r := awaitResponse(t, u.answer)
	if r.status != status {
		t.Fatalf("status %d (%q), want %d", r.status, r.body, status)
	}
	if ra := r.header.Get("Retry-After"); (ra != "") != (status == http.StatusTooManyRequests) {
		t.Errorf("status %d with Retry-After %q", status, ra)
	}
	if n := u.sent.Load(); n > sentMax {
		t.Errorf("the client sent %d bytes of the body, want at most %d", n, sentMax)
	}
	return r
}

// chunked hides the length of a body, so that it is sent chunked.
func chunked(b []byte) io.Reader { return io.MultiReader(bytes.NewReader(b)) }

// assertHeld checks what the source holds.
func assertHeld(t *testing.T, s *httpSource, messages int, bytes int64) {
	t.Helper()
	if m, b := s.Held(); m != messages || b != bytes {
		t.Fatalf("Held() = %d messages, %d bytes; want %d, %d", m, b, messages, bytes)
	}
}

const kib = 1 << 10

// hold posts a body of n bytes that arrives whole, and waits until its
// message is queued: it holds a place in the queue until it is read, and n
// bytes until it is acked.
func (s *httpSource) hold(t *testing.T, n int) sent {
	t.Helper()
	m, b := s.Held()
	u := s.send(t, upload{body: bytes.NewReader(make([]byte, n)), length: int64(n), token: "secret"})
	runtest.WaitFor(t, "the message queued", func() bool {
		m2, b2 := s.Held()
		return m2 == m+1 && b2 == b+int64(n)
	})
	return u
}

// TestHTTPAdmitsByCount: a request is refused 429 without its body being sent
// while Queue messages wait to be read; a body being read holds no place,
// and takes one once it has arrived, or gets 429 if the queue has filled
// meanwhile; a message read frees its place, before its ack.
func TestHTTPAdmitsByCount(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{Queue: 1})
	body, w := io.Pipe()
	a := s.send(t, upload{body: body, length: 3, expect: true})
	a.admitted(t)
	assertHeld(t, s, 0, 3)

	// Being read, a holds no place: b takes it.
	b := s.hold(t, 1)
	s.send(t, upload{body: bytes.NewReader(make([]byte, 10)), length: 10, expect: true}).
		refused(t, http.StatusTooManyRequests, 0)

	// a's body arrives with the queue full.
	w.Write([]byte("abc"))
	w.Close()
	a.refused(t, http.StatusTooManyRequests, 3)
	assertHeld(t, s, 1, 1)

	msgs := readMessages(t, s, 1)
	assertHeld(t, s, 0, 1)
	c := s.send(t, upload{body: bytes.NewReader([]byte("c")), length: 1})
	msgs = append(msgs, readMessages(t, s, 1)...)
	if string(msgs[1].Value) != "c" {
		t.Fatalf("Value = %q", msgs[1].Value)
	}
	s.Ack(context.Background(), msgs)
	for _, u := range []sent{b, c} {
		if r := awaitResponse(t, u.answer); r.status != http.StatusNoContent {
			t.Fatalf("status %d (%q), want 204", r.status, r.body)
		}
	}
	assertHeld(t, s, 0, 0)
}

// TestHTTPAdmitsByBytes: the Content-Length of a request must fit in what is
// left of MaxQueueBytes; a body takes up to 32 KiB at admission and more as
// it arrives, and a message holds its bytes until it is acked.
func TestHTTPAdmitsByBytes(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{MaxQueueBytes: 100 * kib})
	body, w := io.Pipe()
	a := s.send(t, upload{body: body, length: 60 * kib, expect: true})
	a.admitted(t)
	// Nothing of it has arrived: a holds its first 32 KiB.
	assertHeld(t, s, 0, 32*kib)
	w.Write(make([]byte, 40*kib))
	runtest.WaitFor(t, "a's buffer grown to its length", func() bool { _, b := s.Held(); return b == 60*kib })

	// Being read, a counts.
	s.send(t, upload{body: bytes.NewReader(make([]byte, 60*kib)), length: 60 * kib, expect: true}).
		refused(t, http.StatusTooManyRequests, 0)
	go func() {
		w.Write(make([]byte, 20*kib))
		w.Close()
	}()
	msgs := readMessages(t, s, 1)
	// Read and not acked, a still counts.
	assertHeld(t, s, 0, 60*kib)
	s.send(t, upload{body: bytes.NewReader(make([]byte, 60*kib)), length: 60 * kib, expect: true}).
		refused(t, http.StatusTooManyRequests, 0)
	// What fits is taken.
	b := s.send(t, upload{body: bytes.NewReader(make([]byte, 40*kib)), length: 40 * kib, expect: true})
	msgs = append(msgs, readMessages(t, s, 1)...)
	assertHeld(t, s, 0, 100*kib)

	s.Ack(context.Background(), msgs[:1])
	if r := awaitResponse(t, a.answer); r.status != http.StatusNoContent {
		t.Fatalf("status %d (%q), want 204", r.status, r.body)
	}
	assertHeld(t, s, 0, 40*kib)
	c := s.send(t, upload{body: bytes.NewReader(make([]byte, 60*kib)), length: 60 * kib, expect: true})
	msgs = append(msgs, readMessages(t, s, 1)...)
	s.Ack(context.Background(), msgs[1:])
	for _, u := range []sent{b, c} {
		if r := awaitResponse(t, u.answer); r.status != http.StatusNoContent {
			t.Fatalf("status %d (%q), want 204", r.status, r.body)
		}
	}
	assertHeld(t, s, 0, 0)
}

// TestHTTPBodiesTakeBytesAsTheyArrive: two bodies admitted beside each other
// hold their first 32 KiB each, not their lengths; the one that needs more
// room when there is none left gets 429 and gives its bytes back.
func TestHTTPBodiesTakeBytesAsTheyArrive(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{MaxQueueBytes: 100 * kib})
	bodyA, wA := io.Pipe()
	defer wA.Close()
	a := s.send(t, upload{body: bodyA, length: 60 * kib, expect: true})
	a.admitted(t)
	bodyB, wB := io.Pipe()
	defer wB.Close()
	b := s.send(t, upload{body: bodyB, length: 60 * kib, expect: true})
	b.admitted(t)
	assertHeld(t, s, 0, 64*kib)

	go wA.Write(make([]byte, 60*kib))
	runtest.WaitFor(t, "a queued", func() bool { m, _ := s.Held(); return m == 1 })
	assertHeld(t, s, 1, 92*kib)
	go wB.Write(make([]byte, 60*kib))
	b.refused(t, http.StatusTooManyRequests, 60*kib)
	assertHeld(t, s, 1, 60*kib)

	msgs := readMessages(t, s, 1)
	s.Ack(context.Background(), msgs)
	if r := awaitResponse(t, a.answer); r.status != http.StatusNoContent {
		t.Fatalf("status %d (%q), want 204", r.status, r.body)
	}
	assertHeld(t, s, 0, 0)
}

// TestHTTPRefusesBeforeReading: every refusal decided from the headers comes
// before the body is asked for, authentication first.
func TestHTTPRefusesBeforeReading(t *testing.T) {
	tests := []struct {
		name   string
		cfg    source.HTTPConfig
		full   bool // a message of 8 KiB holds the one place of the queue
		length int64
		token  string
		want   int
	}{
		{"no token, with room", source.HTTPConfig{Token: "secret"}, false, 1 << 20, "", http.StatusUnauthorized},
		{"wrong token, queue full", source.HTTPConfig{Token: "secret", Queue: 1}, true, 1 << 20, "secreT", http.StatusUnauthorized},
		{"wrong token, body too large", source.HTTPConfig{Token: "secret", MaxBodyBytes: kib}, false, 1 << 20, "secreT", http.StatusUnauthorized},
		{"right token, queue full", source.HTTPConfig{Token: "secret", Queue: 1}, true, 1 << 20, "secret", http.StatusTooManyRequests},
		{"no room for the bytes", source.HTTPConfig{MaxQueueBytes: 64 * kib}, true, 60 * kib, "", http.StatusTooManyRequests},
		{"over MaxBodyBytes", source.HTTPConfig{MaxBodyBytes: kib}, false, kib + 1, "", http.StatusRequestEntityTooLarge},
		{"over MaxQueueBytes", source.HTTPConfig{MaxQueueBytes: 64 * kib}, false, 64*kib + 1, "", http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startHTTP(t, tt.cfg)
			if tt.full {
				s.hold(t, 8*kib)
			}
			m, b := s.Held()
			u := s.send(t, upload{body: bytes.NewReader(make([]byte, tt.length)), length: tt.length, expect: true, token: tt.token})
			r := u.refused(t, tt.want, 0)
			if tt.want == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("401 with WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
			}
			assertHeld(t, s, m, b)
		})
	}
}

// TestHTTPRefusesAClientSendingItsBody: a client that sends its body at once
// and asked to close the connection still reads the 429, with its body small
// (read and dropped) or large (left unread).
func TestHTTPRefusesAClientSendingItsBody(t *testing.T) {
	forSchemes(t, func(t *testing.T, start startFunc) {
		for _, size := range []int64{10, 64 * kib, 4 << 20} {
			for _, length := range []int64{size, -1} {
				t.Run(strconv.FormatInt(size, 10)+"/"+strconv.FormatInt(length, 10), func(t *testing.T) {
					s := start(t, source.HTTPConfig{Queue: 1})
					s.hold(t, 1)
					u := s.send(t, upload{body: bytes.NewReader(make([]byte, size)), length: length, close: true})
					u.refused(t, http.StatusTooManyRequests, size)
				})
			}
		}
	})
}

// TestHTTPChunked: a body of unknown length is admitted with 32 KiB and takes
// more as it is read, while the queue has room for it.
func TestHTTPChunked(t *testing.T) {
	tests := []struct {
		name     string
		cfg      source.HTTPConfig
		heldBy   int // a message waiting to be read holds this many bytes
		size     int
		want     int
		wantHeld int64 // after the request is answered, or its message read
	}{
		{"empty", source.HTTPConfig{}, 0, 0, http.StatusNoContent, 0},
		{"under the first 32 KiB", source.HTTPConfig{}, 0, 5, http.StatusNoContent, 5},
		{"exactly 32 KiB", source.HTTPConfig{}, 0, 32 * kib, http.StatusNoContent, 32 * kib},
		{"grows", source.HTTPConfig{}, 0, 100 * kib, http.StatusNoContent, 100 * kib},
		{"grows to a full buffer", source.HTTPConfig{}, 0, 128 * kib, http.StatusNoContent, 128 * kib},
		{"fits beside another", source.HTTPConfig{MaxQueueBytes: 100 * kib}, 60 * kib, 32 * kib, http.StatusNoContent, 92 * kib},
		{"no room to grow", source.HTTPConfig{MaxQueueBytes: 100 * kib}, 60 * kib, 40 * kib, http.StatusTooManyRequests, 60 * kib},
		{"no room to begin", source.HTTPConfig{MaxQueueBytes: 100 * kib}, 80 * kib, 5, http.StatusTooManyRequests, 80 * kib},
		{"at MaxBodyBytes", source.HTTPConfig{MaxBodyBytes: 50 * kib}, 0, 50 * kib, http.StatusNoContent, 50 * kib},
		{"over MaxBodyBytes", source.HTTPConfig{MaxBodyBytes: 50 * kib}, 0, 50*kib + 1, http.StatusRequestEntityTooLarge, 0},
		{"over MaxQueueBytes", source.HTTPConfig{MaxQueueBytes: 50 * kib}, 0, 50*kib + 1, http.StatusRequestEntityTooLarge, 0},
		{"MaxBodyBytes under 32 KiB", source.HTTPConfig{MaxBodyBytes: 10}, 0, 11, http.StatusRequestEntityTooLarge, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startHTTP(t, tt.cfg)
			if tt.heldBy > 0 {
				s.hold(t, tt.heldBy)
			}
			want := make([]byte, tt.size)
			for i := range want {
				want[i] = byte(i * 7)
			}
			u := s.send(t, upload{body: chunked(want), length: -1})
			if tt.want != http.StatusNoContent {
				u.refused(t, tt.want, int64(tt.size))
				_, b := s.Held()
				if b != tt.wantHeld {
					t.Fatalf("Held() = %d bytes after the refusal, want %d", b, tt.wantHeld)
				}
				return
			}
			msgs := readMessages(t, s, 1)
			if tt.heldBy > 0 {
				msgs = readMessages(t, s, 1) // after the holder's
			}
			if !bytes.Equal(msgs[0].Value, want) {
				t.Fatalf("Value has %d bytes, not the %d sent", len(msgs[0].Value), tt.size)
			}
			if _, b := s.Held(); b != tt.wantHeld {
				t.Fatalf("Held() = %d bytes, want %d", b, tt.wantHeld)
			}
			s.Ack(context.Background(), msgs)
			if r := awaitResponse(t, u.answer); r.status != http.StatusNoContent {
				t.Fatalf("status %d (%q), want 204", r.status, r.body)
			}
			if _, b := s.Held(); b != int64(tt.heldBy) {
				t.Fatalf("Held() = %d bytes after the ack, want %d", b, tt.heldBy)
			}
		})
	}
}

// TestHTTPRetryAfterFollowsTheClock: Retry-After is what RetryAfter says at the
// time of the refusal, in whole seconds rounded up; here the time to the next
// epoch of a manual clock, as the vertex computes it.
func TestHTTPRetryAfterFollowsTheClock(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	until := clk.Now().Add(2500 * time.Millisecond) // paused until
	s := startHTTP(t, source.HTTPConfig{Queue: 1, RetryAfter: func() time.Duration { return until.Sub(clk.Now()) }})
	s.hold(t, 1)
	for _, tt := range []struct {
		advance time.Duration
		want    string
	}{{0, "3"}, {time.Second, "2"}, {time.Second, "1"}, {400 * time.Millisecond, "1"}, {time.Second, "1"}} {
		clk.Advance(tt.advance)
		r := s.send(t, upload{body: bytes.NewReader([]byte("x")), length: 1, expect: true}).refused(t, http.StatusTooManyRequests, 0)
		if got := r.header.Get("Retry-After"); got != tt.want {
			t.Errorf("at %v: Retry-After %q, want %q", clk.Now().Sub(time.Unix(1_700_000_000, 0)), got, tt.want)
		}
	}
}

// TestHTTPHeldUnderConcurrentPosts: whatever the mix of sizes and reads, the
// bytes held never pass MaxQueueBytes and all come back once acked.
func TestHTTPHeldUnderConcurrentPosts(t *testing.T) {
	const maxBytes = 256 * kib
	s := startHTTP(t, source.HTTPConfig{MaxQueueBytes: maxBytes, Queue: 8})
	var us []sent
	for i := range 24 {
		size := (i%6 + 1) * 20 * kib
		length := int64(size)
		if i%2 == 1 {
			length = -1
		}
		us = append(us, s.send(t, upload{body: chunked(make([]byte, size)), length: length}))
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]isb.ReadMessage, 3)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, b := s.Held(); b > maxBytes {
				t.Errorf("Held() = %d bytes > %d", b, maxBytes)
			}
			n, _ := s.Read(context.Background(), buf)
			s.Ack(context.Background(), buf[:n])
		}
	}()
	accepted := 0
	for _, u := range us {
		switch r := awaitResponse(t, u.answer); r.status {
		case http.StatusNoContent:
			accepted++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("status %d (%q)", r.status, r.body)
		}
	}
	if accepted == 0 {
		t.Error("nothing accepted")
	}
	close(stop)
	<-done
	assertHeld(t, s, 0, 0)
}
