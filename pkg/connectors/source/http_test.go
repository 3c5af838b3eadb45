package source_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/selfsigned"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// httpSource is an HTTP source on 127.0.0.1 and a client for it.
type httpSource struct {
	*source.HTTP
	vertex string
	addr   string // where it is dialled
	base   string
	// tls is what its clients trust, the source's certificate; nil when it
	// serves plain HTTP.
	tls    *tls.Config
	client *http.Client
}

// testCert is the certificate the tests' sources serve HTTPS with, made
// once, as a vertex makes its own, and clientTLS what their clients trust:
// that certificate, for 127.0.0.1.
var testCert = sync.OnceValues(func() (tls.Certificate, error) {
	return selfsigned.Certificate(time.Now(), "localhost", "127.0.0.1", "::1")
})

func clientTLS(t testing.TB) *tls.Config {
	t.Helper()
	cert, err := testCert()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert.Leaf)
	return &tls.Config{RootCAs: roots}
}

// startHTTP starts a source on 127.0.0.1 that serves HTTPS with testCert,
// as a vertex's does, or with cfg.TLS when it is set.
func startHTTP(t testing.TB, cfg source.HTTPConfig) *httpSource {
	t.Helper()
	if cfg.TLS == nil {
		cert, err := testCert()
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	return startSource(t, cfg)
}

// startPlainHTTP starts a source on 127.0.0.1 that serves plain HTTP only.
func startPlainHTTP(t testing.TB, cfg source.HTTPConfig) *httpSource {
	t.Helper()
	cfg.TLS = nil
	return startSource(t, cfg)
}

func startSource(t testing.TB, cfg source.HTTPConfig) *httpSource {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	if cfg.Vertex == "" {
		cfg.Vertex = "in"
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 50 * time.Millisecond
	}
	h, err := source.NewHTTP(cfg)
	if err != nil {
		t.Fatalf("NewHTTP = %v", err)
	}
	s := &httpSource{HTTP: h, vertex: cfg.Vertex, addr: h.Addr().String(), base: "http://" + h.Addr().String()}
	if cfg.TLS != nil {
		s.base, s.tls = "https://"+h.Addr().String(), clientTLS(t)
	}
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: s.transport()}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		s.client.CloseIdleConnections()
	})
	return s
}

// startFunc starts a source: startHTTP or startPlainHTTP.
type startFunc func(testing.TB, source.HTTPConfig) *httpSource

// forSchemes runs test on a source that serves HTTPS and on one that serves
// plain HTTP: the tests of what the source does with a connection run on
// both.
func forSchemes(t *testing.T, test func(*testing.T, startFunc)) {
	t.Run("https", func(t *testing.T) { test(t, startHTTP) })
	t.Run("http", func(t *testing.T) { test(t, startPlainHTTP) })
}

// plain is a client of s's plain HTTP address.
func (s *httpSource) plain() *httpSource {
	p := &httpSource{HTTP: s.HTTP, vertex: s.vertex, addr: s.PlainAddr().String(), base: "http://" + s.PlainAddr().String()}
	p.client = &http.Client{Timeout: 30 * time.Second, Transport: p.transport()}
	return p
}

// transport is a client transport for s, one connection a request.
func (s *httpSource) transport() *http.Transport {
	return &http.Transport{DisableKeepAlives: true, TLSClientConfig: s.tls, ExpectContinueTimeout: wait}
}

// response is what a request got.
type response struct {
	req    string // the body of the request answered
	status int
	header http.Header
	body   string
	err    error
}

// do sends a request in a goroutine; the channel gets its response.
func (s *httpSource) do(method, path, body string, header http.Header) <-chan response {
	ch := make(chan response, 1)
	go func() {
		req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
		if err != nil {
			ch <- response{req: body, err: err}
			return
		}
		for name, values := range header {
			for _, v := range values {
				req.Header.Add(name, v)
			}
		}
		resp, err := s.client.Do(req)
		if err != nil {
			ch <- response{req: body, err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- response{req: body, status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
	}()
	return ch
}

func (s *httpSource) post(body string, header http.Header) <-chan response {
	return s.do(http.MethodPost, "/vertices/"+s.vertex, body, header)
}

func awaitResponse(t *testing.T, ch <-chan response) response {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("request failed: %v", r.err)
		}
		return r
	case <-time.After(wait):
		t.Fatal("no response")
		return response{}
	}
}

// assertPending fails if ch already has a response.
func assertPending(t *testing.T, ch <-chan response) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("request answered %d (%q, %v) while its message is not acked", r.status, r.body, r.err)
	default:
	}
}

// readMessages reads until it has n messages, or fails after a while.
func readMessages(t *testing.T, r isb.Reader, n int) []isb.ReadMessage {
	t.Helper()
	var got []isb.ReadMessage
	deadline := time.Now().Add(wait)
	for len(got) < n {
		if time.Now().After(deadline) {
			t.Fatalf("read %d messages, want %d", len(got), n)
		}
		buf := make([]isb.ReadMessage, n-len(got))
		k, err := r.Read(context.Background(), buf)
		if err != nil {
			t.Fatalf("Read = %v", err)
		}
		got = append(got, buf[:k]...)
	}
	return got
}

// assertEmpty checks that a Read finds nothing.
func assertEmpty(t *testing.T, r isb.Reader) {
	t.Helper()
	buf := make([]isb.ReadMessage, 10)
	if n, err := r.Read(context.Background(), buf); n != 0 || err != nil {
		t.Fatalf("Read = %d, %v; want nothing", n, err)
	}
}

func TestHTTPMessage(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{Token: "secret"})
	header := http.Header{
		"Authorization":         {"Bearer secret"},
		"X-Numaflow-Keys":       {"k1,k2"},
		"X-Numaflow-Event-Time": {"1700000000123"},
		"X-Numaflow-Id":         {"msg-1"},
		"X-Custom":              {"v"},
		"X-Multi":               {"a", "b"},
		"Content-Type":          {"application/json"},
	}
	ch := s.post(`{"hello":"world"}`, header)
	msgs := readMessages(t, s, 1)
	m := msgs[0]
	if string(m.Value) != `{"hello":"world"}` {
		t.Errorf("Value = %q", m.Value)
	}
	if !slices.Equal(m.Keys, []string{"k1", "k2"}) {
		t.Errorf("Keys = %q, want [k1 k2]", m.Keys)
	}
	if want := time.UnixMilli(1700000000123); !m.EventTime.Equal(want) {
		t.Errorf("EventTime = %v, want %v", m.EventTime, want)
	}
	if m.ID != "msg-1" {
		t.Errorf("ID = %q, want msg-1", m.ID)
	}
	wantHeaders := map[string]string{"X-Custom": "v", "X-Multi": "a,b", "Content-Type": "application/json"}
	for name, v := range wantHeaders {
		if m.Headers[name] != v {
			t.Errorf("Headers[%s] = %q, want %q (headers %v)", name, m.Headers[name], v, m.Headers)
		}
	}
	for _, name := range []string{"Authorization", "X-Numaflow-Keys", "X-Numaflow-Event-Time"} {
		if v, ok := m.Headers[name]; ok {
			t.Errorf("Headers has %s: %q", name, v)
		}
	}

	// The request waits for the ack.
	assertPending(t, ch)
	if err := s.Ack(context.Background(), msgs); err != nil {
		t.Fatalf("Ack = %v", err)
	}
	r := awaitResponse(t, ch)
	if r.status != http.StatusNoContent {
		t.Fatalf("status %d (%q), want 204", r.status, r.body)
	}
	if got := r.header.Get("X-Numaflow-Id"); got != "msg-1" {
		t.Errorf("response X-Numaflow-Id = %q, want msg-1", got)
	}
}

func TestHTTPHeadersExcludeNumaflow(t *testing.T) {
	// As in Numaflow, the headers that become fields (keys, event time) and the
	// token are left out; the rest, X-Numaflow-Id among them, pass through.
	s := startHTTP(t, source.HTTPConfig{})
	ch := s.post("x", http.Header{"X-Numaflow-Id": {"id-1"}, "X-Numaflow-Other": {"o"}, "X-Kept": {"k"},
		"X-Numaflow-Keys": {"a"}, "X-Numaflow-Event-Time": {"1700000000000"}})
	msgs := readMessages(t, s, 1)
	h := msgs[0].Headers
	for _, gone := range []string{"X-Numaflow-Keys", "X-Numaflow-Event-Time", "Authorization"} {
		if _, ok := h[gone]; ok {
			t.Errorf("Headers has %s", gone)
		}
	}
	for _, kept := range []string{"X-Numaflow-Id", "X-Numaflow-Other", "X-Kept"} {
		if _, ok := h[kept]; !ok {
			t.Errorf("Headers lacks %s: %v", kept, h)
		}
	}
	s.Ack(context.Background(), msgs)
	awaitResponse(t, ch)
}

func TestHTTPDefaults(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{})
	before := time.Now()
	ch := s.post("", nil)
	msgs := readMessages(t, s, 1)
	after := time.Now()
	m := msgs[0]
	if len(m.Value) != 0 {
		t.Errorf("Value = %q, want empty", m.Value)
	}
	if m.Keys != nil {
		t.Errorf("Keys = %q, want none", m.Keys)
	}
	if m.EventTime.Before(before.Truncate(time.Millisecond)) || m.EventTime.After(after) {
		t.Errorf("EventTime = %v, want the time of the request (%v to %v)", m.EventTime, before, after)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(m.ID) {
		t.Errorf("ID = %q, want 32 hex digits", m.ID)
	}
	s.Ack(context.Background(), msgs)
	r := awaitResponse(t, ch)
	if r.status != http.StatusNoContent || r.header.Get("X-Numaflow-Id") != m.ID {
		t.Fatalf("status %d, X-Numaflow-Id %q; want 204, %q", r.status, r.header.Get("X-Numaflow-Id"), m.ID)
	}
}

func TestHTTPIDsAreUnique(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{})
	var chs []<-chan response
	for range 20 {
		chs = append(chs, s.post("x", nil))
	}
	msgs := readMessages(t, s, 20)
	seen := map[string]bool{}
	for _, m := range msgs {
		if seen[m.ID] {
			t.Fatalf("ID %q given twice", m.ID)
		}
		seen[m.ID] = true
	}
	s.Ack(context.Background(), msgs)
	for _, ch := range chs {
		if r := awaitResponse(t, ch); r.status != http.StatusNoContent {
			t.Fatalf("status %d, want 204", r.status)
		}
	}
}

func TestHTTPKeysAndEventTime(t *testing.T) {
	tests := []struct {
		name      string
		header    http.Header
		wantKeys  []string
		wantEvent time.Time
	}{
		{"one key", http.Header{"X-Numaflow-Keys": {"k"}}, []string{"k"}, time.Time{}},
		{"empty key in between", http.Header{"X-Numaflow-Keys": {"a,,b"}}, []string{"a", "", "b"}, time.Time{}},
		{"epoch zero", http.Header{"X-Numaflow-Event-Time": {"0"}}, nil, time.UnixMilli(0)},
		{"before 1970", http.Header{"X-Numaflow-Event-Time": {"-1500"}}, nil, time.UnixMilli(-1500)},
		{"milliseconds", http.Header{"X-Numaflow-Event-Time": {"1700000000999"}}, nil, time.UnixMilli(1700000000999)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startHTTP(t, source.HTTPConfig{})
			ch := s.post("x", tt.header)
			msgs := readMessages(t, s, 1)
			if !slices.Equal(msgs[0].Keys, tt.wantKeys) {
				t.Errorf("Keys = %q, want %q", msgs[0].Keys, tt.wantKeys)
			}
			if !tt.wantEvent.IsZero() && !msgs[0].EventTime.Equal(tt.wantEvent) {
				t.Errorf("EventTime = %v, want %v", msgs[0].EventTime, tt.wantEvent)
			}
			s.Ack(context.Background(), msgs)
			if r := awaitResponse(t, ch); r.status != http.StatusNoContent {
				t.Fatalf("status %d, want 204", r.status)
			}
		})
	}
}

func TestHTTPStatus(t *testing.T) {
	tests := []struct {
		name     string
		cfg      source.HTTPConfig
		method   string
		path     string
		body     string
		header   http.Header
		want     int
		wantAuth bool // a WWW-Authenticate header
	}{
		{"health", source.HTTPConfig{}, http.MethodGet, "/health", "", nil, http.StatusNoContent, false},
		{"health needs no token", source.HTTPConfig{Token: "secret"}, http.MethodGet, "/health", "", nil, http.StatusNoContent, false},
		{"wrong vertex", source.HTTPConfig{}, http.MethodPost, "/vertices/other", "x", nil, http.StatusNotFound, false},
		{"no vertex", source.HTTPConfig{}, http.MethodPost, "/vertices/", "x", nil, http.StatusNotFound, false},
		{"unknown path", source.HTTPConfig{}, http.MethodPost, "/in", "x", nil, http.StatusNotFound, false},
		{"GET a vertex", source.HTTPConfig{}, http.MethodGet, "/vertices/in", "", nil, http.StatusMethodNotAllowed, false},
		{"missing token", source.HTTPConfig{Token: "secret"}, http.MethodPost, "/vertices/in", "x", nil, http.StatusUnauthorized, true},
		{"wrong token", source.HTTPConfig{Token: "secret"}, http.MethodPost, "/vertices/in", "x",
			http.Header{"Authorization": {"Bearer secreT"}}, http.StatusUnauthorized, true},
		{"token prefix", source.HTTPConfig{Token: "secret"}, http.MethodPost, "/vertices/in", "x",
			http.Header{"Authorization": {"Bearer secre"}}, http.StatusUnauthorized, true},
		{"token without Bearer", source.HTTPConfig{Token: "secret"}, http.MethodPost, "/vertices/in", "x",
			http.Header{"Authorization": {"secret"}}, http.StatusUnauthorized, true},
		{"basic auth", source.HTTPConfig{Token: "secret"}, http.MethodPost, "/vertices/in", "x",
			http.Header{"Authorization": {"Basic c2VjcmV0"}}, http.StatusUnauthorized, true},
		{"event time not a number", source.HTTPConfig{}, http.MethodPost, "/vertices/in", "x",
			http.Header{"X-Numaflow-Event-Time": {"yesterday"}}, http.StatusBadRequest, false},
		{"event time in seconds with a fraction", source.HTTPConfig{}, http.MethodPost, "/vertices/in", "x",
			http.Header{"X-Numaflow-Event-Time": {"1700000000.5"}}, http.StatusBadRequest, false},
		{"event time as RFC 3339", source.HTTPConfig{}, http.MethodPost, "/vertices/in", "x",
			http.Header{"X-Numaflow-Event-Time": {"2024-01-02T03:04:05Z"}}, http.StatusBadRequest, false},
		{"body over the limit", source.HTTPConfig{MaxBodyBytes: 1024}, http.MethodPost, "/vertices/in",
			strings.Repeat("x", 1025), nil, http.StatusRequestEntityTooLarge, false},
		{"body far over the limit", source.HTTPConfig{MaxBodyBytes: 16}, http.MethodPost, "/vertices/in",
			strings.Repeat("x", 4096), nil, http.StatusRequestEntityTooLarge, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startHTTP(t, tt.cfg)
			r := awaitResponse(t, s.do(tt.method, tt.path, tt.body, tt.header))
			if r.status != tt.want {
				t.Fatalf("status %d (%q), want %d", r.status, r.body, tt.want)
			}
			if got := r.header.Get("WWW-Authenticate"); (got == "Bearer") != tt.wantAuth {
				t.Errorf("WWW-Authenticate = %q", got)
			}
			// Nothing was queued.
			assertEmpty(t, s)
		})
	}
}

func TestHTTPAccepted(t *testing.T) {
	tests := []struct {
		name   string
		cfg    source.HTTPConfig
		body   string
		header http.Header
	}{
		{"right token", source.HTTPConfig{Token: "secret"}, "x", http.Header{"Authorization": {"Bearer secret"}}},
		{"no token needed", source.HTTPConfig{}, "x", http.Header{"Authorization": {"Bearer anything"}}},
		{"body at the limit", source.HTTPConfig{MaxBodyBytes: 1024}, strings.Repeat("x", 1024), nil},
		{"vertex with a dash", source.HTTPConfig{Vertex: "my-in"}, "x", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startHTTP(t, tt.cfg)
			ch := s.post(tt.body, tt.header)
			msgs := readMessages(t, s, 1)
			if string(msgs[0].Value) != tt.body {
				t.Errorf("Value has %d bytes, want %d", len(msgs[0].Value), len(tt.body))
			}
			if _, ok := msgs[0].Headers["Authorization"]; ok {
				t.Error("Headers has Authorization")
			}
			assertPending(t, ch)
			s.Ack(context.Background(), msgs)
			if r := awaitResponse(t, ch); r.status != http.StatusNoContent {
				t.Fatalf("status %d (%q), want 204", r.status, r.body)
			}
		})
	}
}

func TestHTTPQueueFull(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter func() time.Duration
		want       string
	}{
		{"default", nil, "1"},
		{"whole seconds", func() time.Duration { return 3 * time.Second }, "3"},
		{"rounded up", func() time.Duration { return 1500 * time.Millisecond }, "2"},
		{"just over a second", func() time.Duration { return time.Second + time.Millisecond }, "2"},
		{"under a second is one", func() time.Duration { return 10 * time.Millisecond }, "1"},
		{"zero is one", func() time.Duration { return 0 }, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const queue, extra = 3, 2
			s := startHTTP(t, source.HTTPConfig{Queue: queue, RetryAfter: tt.retryAfter})
			var chs []<-chan response
			for range queue + extra {
				chs = append(chs, s.post("x", nil))
			}
			answers := fanIn(chs...)
			// The requests that do not fit are turned away at once; the others
			// wait for their acks.
			turnedAway := 0
			for turnedAway < extra {
				select {
				case r := <-answers:
					if r.err != nil {
						t.Fatal(r.err)
					}
					if r.status != http.StatusTooManyRequests {
						t.Fatalf("status %d (%q) before any ack, want 429", r.status, r.body)
					}
					if got := r.header.Get("Retry-After"); got != tt.want {
						t.Fatalf("Retry-After = %q, want %q", got, tt.want)
					}
					turnedAway++
				case <-time.After(wait):
					t.Fatalf("%d requests turned away, want %d", turnedAway, extra)
				}
			}
			// The queue holds exactly its size. A request that fitted may still
			// be on its way into it when the others are turned away: read until
			// the queue's size has come, for a bounded time.
			buf := make([]isb.ReadMessage, 10)
			n := 0
			for deadline := time.Now().Add(wait); n < queue && time.Now().Before(deadline); {
				m, err := s.Read(context.Background(), buf[n:])
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				n += m
			}
			if n != queue {
				t.Fatalf("read %d; want %d", n, queue)
			}
			assertEmpty(t, s)
			s.Ack(context.Background(), buf[:n])
			for range queue {
				select {
				case r := <-answers:
					if r.err != nil || r.status != http.StatusNoContent {
						t.Fatalf("status %d, %v after ack; want 204", r.status, r.err)
					}
				case <-time.After(wait):
					t.Fatal("acked request not answered")
				}
			}
		})
	}
}

// fanIn returns a channel that gets every response of chs as it comes. Every
// request is answered in the end (by an ack, a refusal or Close), so none of its
// goroutines outlives the test.
func fanIn(chs ...<-chan response) <-chan response {
	out := make(chan response, len(chs))
	for _, ch := range chs {
		go func() { out <- <-ch }()
	}
	return out
}

func TestHTTPReadAtMostBuffer(t *testing.T) {
	const queue = 3
	s := startHTTP(t, source.HTTPConfig{Queue: queue})
	var chs []<-chan response
	for range queue + 1 {
		chs = append(chs, s.post("x", nil))
	}
	answers := fanIn(chs...)
	// Once one request is turned away the queue is full.
	if r := awaitResponse(t, answers); r.status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", r.status)
	}
	var all []isb.ReadMessage
	for _, tc := range []struct {
		bufLen, want int
	}{{2, 2}, {2, 1}, {2, 0}} {
		buf := make([]isb.ReadMessage, tc.bufLen)
		n, err := s.Read(context.Background(), buf)
		if err != nil || n != tc.want {
			t.Fatalf("Read into %d = %d, %v; want %d", tc.bufLen, n, err, tc.want)
		}
		all = append(all, buf[:n]...)
	}
	if n, _ := s.Read(context.Background(), nil); n != 0 {
		t.Fatalf("Read into an empty buffer = %d", n)
	}
	s.Ack(context.Background(), all)
	for range queue {
		if r := awaitResponse(t, answers); r.status != http.StatusNoContent {
			t.Fatalf("status %d after ack, want 204", r.status)
		}
	}
}

func TestHTTPReadTimeout(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
	}{
		{"50ms", 50 * time.Millisecond},
		{"10ms", 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startHTTP(t, source.HTTPConfig{ReadTimeout: tt.timeout})
			start := time.Now()
			assertEmpty(t, s)
			if d := time.Since(start); d < tt.timeout || d > wait {
				t.Fatalf("empty Read took %v, want about %v", d, tt.timeout)
			}
		})
	}
}

func TestHTTPReadCancelled(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{ReadTimeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		n, _ := s.Read(ctx, make([]isb.ReadMessage, 1))
		done <- n
	}()
	cancel()
	select {
	case n := <-done:
		if n != 0 {
			t.Fatalf("Read = %d, want 0", n)
		}
	case <-time.After(wait):
		t.Fatal("Read did not return on cancel")
	}
}

func TestHTTPReadWakesOnPost(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{ReadTimeout: time.Hour})
	done := make(chan []isb.ReadMessage, 1)
	go func() {
		buf := make([]isb.ReadMessage, 5)
		n, _ := s.Read(context.Background(), buf)
		done <- buf[:n]
	}()
	ch := s.post("woken", nil)
	select {
	case msgs := <-done:
		if len(msgs) != 1 || string(msgs[0].Value) != "woken" {
			t.Fatalf("Read %+v", msgs)
		}
		s.Ack(context.Background(), msgs)
	case <-time.After(wait):
		t.Fatal("Read did not return when a message was posted")
	}
	if r := awaitResponse(t, ch); r.status != http.StatusNoContent {
		t.Fatalf("status %d, want 204", r.status)
	}
}

func TestHTTPClose(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{Queue: 1})
	// inFlight is read and not acked; acked is read and acked just before Close.
	inFlight := s.post("in flight", nil)
	msgs := readMessages(t, s, 1)
	acked := s.post("acked", nil)
	ackedMsgs := readMessages(t, s, 1)
	// queued waits in the queue, unread; a third request is turned away.
	queued := fanIn(s.post("first", nil), s.post("second", nil))
	if r := awaitResponse(t, queued); r.status != http.StatusTooManyRequests {
		t.Fatalf("%s request: status %d, want 429", r.req, r.status)
	}

	if err := s.Ack(context.Background(), ackedMsgs); err != nil {
		t.Fatal(err)
	}
	if r := awaitResponse(t, acked); r.status != http.StatusNoContent {
		t.Fatalf("acked request: status %d, want 204", r.status)
	}
	assertPending(t, inFlight)

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for name, ch := range map[string]<-chan response{"in flight": inFlight, "queued": queued} {
		if r := awaitResponse(t, ch); r.status != http.StatusServiceUnavailable {
			t.Errorf("%s request: status %d (%q), want 503", name, r.status, r.body)
		}
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close = %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Close did not return")
	}
	// An ack after Close answers no one and does not fail.
	if err := s.Ack(context.Background(), msgs); err != nil {
		t.Fatalf("Ack after Close = %v", err)
	}
	// The server is gone.
	if r := <-s.do(http.MethodGet, "/health", "", nil); r.err == nil {
		t.Fatalf("GET /health after Close answered %d", r.status)
	}
	// Close twice is fine (the cleanup closes again).
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func TestHTTPCloseAfterAck(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{})
	ch := s.post("x", nil)
	msgs := readMessages(t, s, 1)
	s.Ack(context.Background(), msgs)
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	// Acked before Close: answered 204 whichever the handler saw first.
	if r := awaitResponse(t, ch); r.status != http.StatusNoContent {
		t.Fatalf("status %d, want 204", r.status)
	}
}

func TestHTTPRequestTimeout(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{RequestTimeout: 50 * time.Millisecond})
	r := awaitResponse(t, s.post("late", nil))
	if r.status != http.StatusGatewayTimeout {
		t.Fatalf("status %d (%q), want 504", r.status, r.body)
	}
	// The message was accepted: it may still be read and written.
	msgs := readMessages(t, s, 1)
	if string(msgs[0].Value) != "late" {
		t.Fatalf("Read %q, want late", msgs[0].Value)
	}
	if err := s.Ack(context.Background(), msgs); err != nil {
		t.Fatalf("Ack after the timeout = %v", err)
	}
}

func TestHTTPAckTwice(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{})
	ch := s.post("x", nil)
	msgs := readMessages(t, s, 1)
	s.Ack(context.Background(), msgs)
	awaitResponse(t, ch)
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("second Ack panicked: %v", p)
		}
	}()
	if err := s.Ack(context.Background(), msgs); err != nil {
		t.Fatalf("second Ack = %v", err)
	}
}

func TestHTTPAckIgnoresForeignHandles(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{})
	if err := s.Ack(context.Background(), []isb.ReadMessage{{}, {Handle: "x"}, {Handle: 1}}); err != nil {
		t.Fatalf("Ack = %v", err)
	}
}

func TestHTTPListenError(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{})
	if h, err := source.NewHTTP(source.HTTPConfig{Addr: s.Addr().String(), Vertex: "in"}); err == nil {
		h.Close()
		t.Fatal("NewHTTP on a busy address succeeded")
	}
	if h, err := source.NewHTTP(source.HTTPConfig{Addr: "127.0.0.1:notaport"}); err == nil {
		h.Close()
		t.Fatal("NewHTTP on a bad address succeeded")
	}
}

func TestHTTPConcurrentPosts(t *testing.T) {
	const n = 50
	s := startHTTP(t, source.HTTPConfig{Queue: n})
	var chs []<-chan response
	for i := range n {
		chs = append(chs, s.post(strconv.Itoa(i), http.Header{"X-Numaflow-Id": {"id-" + strconv.Itoa(i)}}))
	}
	// Read and ack in small batches while the requests come in.
	done := make(chan struct{})
	go func() {
		defer close(done)
		got := 0
		buf := make([]isb.ReadMessage, 4)
		deadline := time.Now().Add(wait)
		for got < n && time.Now().Before(deadline) {
			k, _ := s.Read(context.Background(), buf)
			for _, m := range buf[:k] {
				if m.ID != "id-"+string(m.Value) {
					t.Errorf("message %q has ID %q", m.Value, m.ID)
				}
			}
			s.Ack(context.Background(), buf[:k])
			got += k
		}
	}()
	for i, ch := range chs {
		if r := awaitResponse(t, ch); r.status != http.StatusNoContent || r.header.Get("X-Numaflow-Id") != "id-"+strconv.Itoa(i) {
			t.Fatalf("request %d: status %d, id %q", i, r.status, r.header.Get("X-Numaflow-Id"))
		}
	}
	<-done
}

// TestHTTPRetryWaitsForTheMessageInFlight: a client that posts again, with
// the X-Numaflow-Id its 504 gave, a message still in flight gets that
// message's answer and makes no second message; an id posted again after its
// message was acked is a new message.
func TestHTTPRetryWaitsForTheMessageInFlight(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{RequestTimeout: 100 * time.Millisecond})
	late := awaitResponse(t, s.post("late", nil))
	id := late.header.Get("X-Numaflow-Id")
	if late.status != http.StatusGatewayTimeout || id == "" {
		t.Fatalf("first post: %d with id %q (%q), want 504 with the message's id", late.status, id, late.body)
	}
	msgs := readMessages(t, s, 1) // read, not yet acked: in flight

	// Retries until one has joined the message in flight, each answered 504
	// as the message is still not written; none is read as a message.
	deadline := time.Now().Add(wait)
	for s.Stats().Rejoined == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no retry joined the message in flight")
		}
		r := awaitResponse(t, s.post("again", http.Header{"X-Numaflow-Id": {id}}))
		if r.status != http.StatusGatewayTimeout || r.header.Get("X-Numaflow-Id") != id {
			t.Fatalf("retry: %d with id %q (%q), want 504 with id %q", r.status, r.header.Get("X-Numaflow-Id"), r.body, id)
		}
	}
	assertEmpty(t, s)
	if n, bytes := s.Held(); n != 0 || bytes != int64(len("late")) {
		t.Errorf("Held = %d messages, %d bytes; want 0 and the first message's %d", n, bytes, len("late"))
	}
	if err := s.Ack(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	if n, bytes := s.Held(); n != 0 || bytes != 0 {
		t.Errorf("Held after the ack = %d messages, %d bytes; want none", n, bytes)
	}

	// Acked: the same id is a message again.
	after := s.post("after", http.Header{"X-Numaflow-Id": {id}})
	got := readMessages(t, s, 1)
	if string(got[0].Value) != "after" || got[0].ID != id {
		t.Fatalf("read %q with id %q, want after with id %q", got[0].Value, got[0].ID, id)
	}
	if err := s.Ack(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if r := awaitResponse(t, after); r.status != http.StatusNoContent {
		t.Fatalf("post after the ack: %d (%q), want 204", r.status, r.body)
	}
}

// TestHTTPRetryAnsweredWithTheMessage: a retry waiting for a message in
// flight is answered 204 when that message is acked.
func TestHTTPRetryAnsweredWithTheMessage(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{RequestTimeout: time.Minute})
	first := s.post("one", http.Header{"X-Numaflow-Id": {"order-7"}})
	msgs := readMessages(t, s, 1)
	retry := s.post("one", http.Header{"X-Numaflow-Id": {"order-7"}})
	runtest.WaitFor(t, "the retry to join the message in flight", func() bool { return s.Stats().Rejoined == 1 })
	assertPending(t, retry)
	assertEmpty(t, s)
	if err := s.Ack(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan response{first, retry} {
		if r := awaitResponse(t, ch); r.status != http.StatusNoContent || r.header.Get("X-Numaflow-Id") != "order-7" {
			t.Fatalf("answer %d with id %q (%q), want 204 with order-7", r.status, r.header.Get("X-Numaflow-Id"), r.body)
		}
	}
}
