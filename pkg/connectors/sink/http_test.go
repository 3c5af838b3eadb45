package sink_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// newServer starts an HTTP server on loopback, closed at the end of the test.
func newServer(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newHTTPSink returns an HTTP sink, closed at the end of the test (before the
// servers started earlier).
func newHTTPSink(t testing.TB, cfg sink.HTTPConfig) *sink.HTTP {
	t.Helper()
	s, err := sink.NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// messages returns n messages valued "0" to "n-1".
func messages(n int) []isb.Message {
	msgs := make([]isb.Message, n)
	for i := range msgs {
		msgs[i] = isb.Message{ID: "m" + strconv.Itoa(i), Value: []byte(strconv.Itoa(i)), EventTime: et}
	}
	return msgs
}

// write writes msgs with s and returns their errors.
func write(t *testing.T, s *sink.HTTP, msgs []isb.Message) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := unset(len(msgs))
	if err := s.Write(ctx, msgs, errs); err != nil {
		t.Fatalf("Write = %v; want per-message errors only", err)
	}
	return errs
}

type outcome int

const (
	written outcome = iota
	retried
	throttled
	rejected
)

func (o outcome) String() string {
	return [...]string{"written", "retried", "throttled", "rejected"}[o]
}

func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return written
	case errors.Is(err, isb.ErrThrottled):
		return throttled
	case errors.Is(err, isb.ErrRejected):
		return rejected
	}
	return retried
}

// TestHTTPStatuses: 2xx is written; 429 and 503 throttled; 4xx but 408
// rejected, with the status and the start of the body; 408, 5xx and
// redirects retried, redirects not followed.
func TestHTTPStatuses(t *testing.T) {
	var redirected atomic.Int64
	target := newServer(t, func(w http.ResponseWriter, r *http.Request) { redirected.Add(1) })
	tests := []struct {
		code int
		want outcome
	}{
		{200, written}, {201, written}, {202, written}, {204, written},
		{408, retried}, {500, retried}, {502, retried}, {504, retried}, {301, retried}, {302, retried}, {307, retried},
		{429, throttled}, {503, throttled},
		{400, rejected}, {401, rejected}, {403, rejected}, {404, rejected}, {413, rejected}, {422, rejected},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.code), func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Location", target.URL)
				w.WriteHeader(tt.code)
				if tt.code != 204 {
					fmt.Fprintf(w, "answer %d", tt.code)
				}
			})
			s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL + "/in"})
			err := write(t, s, messages(1))[0]
			if got := outcomeOf(err); got != tt.want {
				t.Fatalf("%d: %v (%v); want %v", tt.code, got, err, tt.want)
			}
			if err != nil && !strings.Contains(err.Error(), strconv.Itoa(tt.code)) {
				t.Fatalf("error %q does not name the status", err)
			}
			if tt.want == rejected && !strings.Contains(err.Error(), fmt.Sprintf("answer %d", tt.code)) {
				t.Fatalf("error %q does not quote the body", err)
			}
		})
	}
	if n := redirected.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests; want none", n)
	}
}

func TestHTTPRejectionQuotesAtMost512BytesOfTheBody(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, strings.Repeat("a", 512)+strings.Repeat("b", 10000))
	})
	err := write(t, newHTTPSink(t, sink.HTTPConfig{URL: srv.URL}), messages(1))[0]
	if !errors.Is(err, isb.ErrRejected) || !strings.Contains(err.Error(), strings.Repeat("a", 512)) || strings.Contains(err.Error(), "ab") {
		t.Fatalf("error %q; want a rejection quoting the first 512 bytes", err)
	}
}

// TestHTTPRetryAfter: Retry-After in seconds or as an HTTP date, measured
// against the sink's clock, capped at MaxRetryAfter; 0 when absent or invalid.
func TestHTTPRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name, value string
		code        int
		want        time.Duration
	}{
		{"seconds", "7", 429, 7 * time.Second},
		{"seconds with 503", "2", 503, 2 * time.Second},
		{"zero", "0", 429, 0},
		{"HTTP date", now.Add(30 * time.Second).Format(http.TimeFormat), 429, 30 * time.Second},
		{"HTTP date in the past", now.Add(-time.Minute).Format(http.TimeFormat), 503, 0},
		{"absent", "", 429, 0},
		{"invalid", "soon", 429, 0},
		{"negative", "-5", 429, 0},
		{"capped", "3600", 429, time.Minute},
		{"HTTP date capped", now.Add(time.Hour).Format(http.TimeFormat), 429, time.Minute},
		{"overflowing", "99999999999999999999999", 429, 0},
		{"beyond a Duration", "9999999999999", 429, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.value != "" {
					w.Header().Set("Retry-After", tt.value)
				}
				w.WriteHeader(tt.code)
			})
			s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, MaxRetryAfter: time.Minute, Clock: clock.NewManual(now)})
			var te *isb.ThrottledError
			if err := write(t, s, messages(1))[0]; !errors.As(err, &te) || te.RetryAfter != tt.want {
				t.Fatalf("error %v; want a ThrottledError with RetryAfter %v", err, tt.want)
			}
			if want := map[int]isb.SignalKind{429: isb.SignalHTTP429, 503: isb.SignalHTTP503}[tt.code]; te.Signal != want {
				t.Errorf("Signal %v; want %v", te.Signal, want)
			}
		})
	}
}

// TestHTTPThrottleStopsTheBatch: once an answer is 429, the requests of the
// Write not yet sent are not sent, and get the same error.
func TestHTTPThrottleStopsTheBatch(t *testing.T) {
	t.Run("one at a time", func(t *testing.T) {
		var requests atomic.Int64
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if requests.Add(1) == 3 {
				w.Header().Set("Retry-After", "4")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		errs := write(t, newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, Concurrency: 1}), messages(10))
		if n := requests.Load(); n != 3 {
			t.Fatalf("%d requests; want 3, the last one throttled", n)
		}
		for i, err := range errs {
			var te *isb.ThrottledError
			if ok := errors.As(err, &te); (i < 2 && err != nil) || (i >= 2 && (!ok || te.RetryAfter != 4*time.Second)) {
				t.Fatalf("message %d: %v; want nil before the third, then throttled for 4s", i, err)
			}
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		var requests atomic.Int64
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			w.WriteHeader(http.StatusTooManyRequests)
		})
		errs := write(t, newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, Concurrency: 4}), messages(100))
		if n := requests.Load(); n > 4 {
			t.Fatalf("%d requests; want at most the 4 started before the first answer", n)
		}
		for i, err := range errs {
			if !errors.Is(err, isb.ErrThrottled) {
				t.Fatalf("message %d: %v; want throttled", i, err)
			}
		}
	})
}

// request is what a test server saw of a request.
type request struct {
	method string
	header http.Header
	body   []byte
}

// recorder is a handler that records requests and answers 204.
type recorder struct {
	mu   sync.Mutex
	reqs []request
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, request{r.Method, r.Header.Clone(), body})
	rec.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (rec *recorder) requests() []request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]request(nil), rec.reqs...)
}

// TestHTTPPerMessageRequest: the payload is the body; the headers are the
// http source's, the message's (but those of the connection) and the
// configured ones, which win.
func TestHTTPPerMessageRequest(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, rec.ServeHTTP)
	s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, Method: http.MethodPut,
		Header: http.Header{"x-override": {"configured"}, "Authorization": {"Bearer s3cret"}}})
	msg := isb.Message{ID: "in-0-7", Keys: []string{"k1", "k2"}, Value: []byte("payload\x00\xff"), EventTime: et,
		Headers: map[string]string{"X-Custom": "1", "x-override": "message", "Connection": "close",
			"X-Numaflow-Id": "stale", "Content-Type": "text/plain"}}
	if err := write(t, s, []isb.Message{msg})[0]; err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests; want 1", len(reqs))
	}
	r := reqs[0]
	if r.method != http.MethodPut || string(r.body) != "payload\x00\xff" {
		t.Fatalf("%s with body %q; want PUT with the payload", r.method, r.body)
	}
	for name, want := range map[string]string{
		"X-Numaflow-Id": "in-0-7", "X-Numaflow-Keys": "k1,k2", "X-Numaflow-Event-Time": "1700000000123",
		"X-Custom": "1", "X-Override": "configured", "Authorization": "Bearer s3cret", "Content-Type": "text/plain",
	} {
		if got := r.header.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("header %s: %q; want %q", name, got, want)
		}
	}
	if c := r.header.Get("Connection"); c == "close" {
		t.Error("the message's Connection header was sent")
	}
}

func TestHTTPMessageWithoutKeys(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, rec.ServeHTTP)
	s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL})
	msg := isb.Message{ID: "x", EventTime: et, Headers: map[string]string{"X-Numaflow-Keys": "stale"}}
	if err := write(t, s, []isb.Message{msg})[0]; err != nil {
		t.Fatal(err)
	}
	if r := rec.requests()[0]; r.header.Get("X-Numaflow-Keys") != "" || len(r.body) != 0 {
		t.Fatalf("keys %q, body %q; want neither", r.header.Get("X-Numaflow-Keys"), r.body)
	}
}

// TestHTTPHeaderThatCannotBeSent: a message whose header or keys cannot be
// sent in HTTP is rejected, and the others of the batch are sent.
func TestHTTPHeaderThatCannotBeSent(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, rec.ServeHTTP)
	s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL})
	msgs := messages(4)
	msgs[1].Headers = map[string]string{"X-A": "line1\nline2"}
	msgs[2].Keys = []string{"a\rb"}
	msgs[3].Headers = map[string]string{"bad name": "v"}
	errs := write(t, s, msgs)
	if errs[0] != nil || !errors.Is(errs[1], isb.ErrRejected) || !errors.Is(errs[2], isb.ErrRejected) || !errors.Is(errs[3], isb.ErrRejected) {
		t.Fatalf("errors %v; want the first written and the others rejected", errs)
	}
	if n := len(rec.requests()); n != 1 {
		t.Fatalf("%d requests; want 1", n)
	}
}

// TestHTTPChainsToTheHTTPSource: what the sink sends, sluice's http source
// reads as the same message, and the sink's request is answered once the
// source acks it.
func TestHTTPChainsToTheHTTPSource(t *testing.T) {
	src, err := source.NewHTTP(source.HTTPConfig{Addr: "127.0.0.1:0", Vertex: "in", ReadTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	s := newHTTPSink(t, sink.HTTPConfig{URL: "http://" + src.Addr().String() + "/vertices/in"})
	msg := isb.Message{ID: "in-0-7", Keys: []string{"k1", "k2"}, Value: []byte(`{"v":7}`), EventTime: et,
		Headers: map[string]string{"X-Trace": "abc"}}
	done := make(chan error, 1)
	go func() {
		errs := []error{errUnset}
		s.Write(context.Background(), []isb.Message{msg}, errs)
		done <- errs[0]
	}()
	buf := make([]isb.ReadMessage, 1)
	if n, err := src.Read(context.Background(), buf); n != 1 || err != nil {
		t.Fatalf("source read %d, %v", n, err)
	}
	got := buf[0].Message
	if got.ID != msg.ID || strings.Join(got.Keys, ",") != "k1,k2" || string(got.Value) != `{"v":7}` ||
		!got.EventTime.Equal(et) || got.Headers["X-Trace"] != "abc" {
		t.Fatalf("the source read %+v; want %+v", got, msg)
	}
	select {
	case err := <-done:
		t.Fatalf("Write returned %v before the source acked", err)
	default:
	}
	src.Ack(context.Background(), buf)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Write did not return after the ack")
	}
}

// batchItem is an element of a batch as a receiver decodes it.
type batchItem struct {
	ID        string            `json:"id"`
	Keys      []string          `json:"keys"`
	EventTime string            `json:"eventTime"`
	Headers   map[string]string `json:"headers"`
	Value     []byte            `json:"value"`
}

// TestHTTPBatch: a batch is one JSON request that decodes to the messages,
// and its answer is every message's.
func TestHTTPBatch(t *testing.T) {
	rec := &recorder{}
	srv := newServer(t, rec.ServeHTTP)
	s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, Batch: true, Header: http.Header{"X-Api-Key": {"k"}}})
	odd := "quote \" backslash \\ newline \n tab \t nul \x00 esc \x1b del \x7f é \u2028 😀"
	msgs := []isb.Message{
		{ID: "a", Keys: []string{"k1", odd}, Value: []byte("v1"), EventTime: et,
			Headers: map[string]string{"X-A": "1", odd: odd}},
		{ID: odd, Value: []byte{0, 1, 0xfe, 0xff}, EventTime: et.In(time.FixedZone("X", 7200)).Add(999 * time.Microsecond)},
		{ID: "bad utf-8 \xff\xfe", Keys: []string{}, EventTime: time.UnixMilli(0)},
	}
	errs := write(t, s, msgs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	reqs := rec.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests; want 1 for the batch", len(reqs))
	}
	r := reqs[0]
	if ct, key := r.header.Get("Content-Type"), r.header.Get("X-Api-Key"); ct != "application/json" || key != "k" {
		t.Fatalf("Content-Type %q, X-Api-Key %q", ct, key)
	}
	var got []batchItem
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	want := []batchItem{
		{ID: "a", Keys: []string{"k1", odd}, EventTime: "2023-11-14T22:13:20.123Z", Headers: map[string]string{"X-A": "1", odd: odd}, Value: []byte("v1")},
		{ID: odd, Keys: []string{}, EventTime: "2023-11-14T22:13:20.123Z", Headers: map[string]string{}, Value: []byte{0, 1, 0xfe, 0xff}},
		{ID: "bad utf-8 \ufffd\ufffd", Keys: []string{}, EventTime: "1970-01-01T00:00:00.000Z", Headers: map[string]string{}, Value: []byte{}},
	}
	if g, w := fmt.Sprintf("%q", got), fmt.Sprintf("%q", want); g != w {
		t.Fatalf("batch decoded to\n%s\nwant\n%s", g, w)
	}
}

func TestHTTPBatchStatusIsEveryMessages(t *testing.T) {
	for _, tt := range []struct {
		code int
		want outcome
	}{{429, throttled}, {400, rejected}, {500, retried}} {
		t.Run(strconv.Itoa(tt.code), func(t *testing.T) {
			var requests atomic.Int64
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				w.WriteHeader(tt.code)
			})
			errs := write(t, newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, Batch: true}), messages(50))
			for i, err := range errs {
				if outcomeOf(err) != tt.want {
					t.Fatalf("message %d: %v; want %v", i, err, tt.want)
				}
			}
			if n := requests.Load(); n != 1 {
				t.Fatalf("%d requests; want 1", n)
			}
		})
	}
}

func TestHTTPEmptyWriteSendsNothing(t *testing.T) {
	var requests atomic.Int64
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { requests.Add(1) })
	for _, batch := range []bool{false, true} {
		write(t, newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, Batch: batch}), nil)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests for empty writes", n)
	}
}

// TestHTTPTimeout: a request without an answer within Timeout fails, to be
// retried.
func TestHTTPTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release) // before the server's Close, which waits for its handlers
	s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, Timeout: 50 * time.Millisecond})
	start := time.Now()
	err := write(t, s, messages(1))[0]
	if outcomeOf(err) != retried || !strings.Contains(err.Error(), "no answer within 50ms") {
		t.Fatalf("error %v; want a failure to retry that names the timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Write took %v with a timeout of 50ms", d)
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	err = write(t, newHTTPSink(t, sink.HTTPConfig{URL: "http://" + addr}), messages(1))[0]
	if outcomeOf(err) != retried {
		t.Fatalf("error %v; want a failure to retry", err)
	}
}

// TestHTTPTLS: an https endpoint is reached with its CA in the TLS config,
// and refused without it.
func TestHTTPTLS(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewUnstartedServer(rec)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted client's handshake fails, as it should
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, TLS: &tls.Config{RootCAs: pool}})
	if err := write(t, s, messages(1))[0]; err != nil {
		t.Fatal(err)
	}
	untrusted := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL})
	if err := write(t, untrusted, messages(1))[0]; outcomeOf(err) != retried || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v; want a certificate error", err)
	}
	if n := len(rec.requests()); n != 1 {
		t.Fatalf("%d requests; want the trusted one", n)
	}
}

// TestHTTPConcurrencyIsBounded: at most Concurrency requests of a Write are
// in flight, they reach that many, and they reuse their connections.
func TestHTTPConcurrencyIsBounded(t *testing.T) {
	const concurrency = 4
	var inFlight, most, arrived, conns atomic.Int64
	gate := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if arrived.Add(1) == concurrency {
			close(gate) // the first ones wait until as many as allowed are in flight
		}
		select {
		case <-gate:
		case <-time.After(5 * time.Second):
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, Concurrency: concurrency})
	for range 3 {
		for i, err := range write(t, s, messages(100)) {
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
	}
	if m := most.Load(); m != concurrency {
		t.Fatalf("at most %d requests in flight; want %d", m, concurrency)
	}
	if c := conns.Load(); c > concurrency {
		t.Fatalf("%d connections for 300 requests; want at most %d, reused", c, concurrency)
	}
}

// TestHTTPDoesNotKeepPayloads: an endpoint that answers before it has read
// the body leaves the transport writing it after the answer; once Write has
// returned, the payload is not read again (the race detector would see it).
func TestHTTPDoesNotKeepPayloads(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	})
	s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL})
	msgs := []isb.Message{{ID: "big", Value: make([]byte, 8<<20), EventTime: et}}
	for range 3 {
		if err := write(t, s, msgs)[0]; !errors.Is(err, isb.ErrRejected) {
			t.Fatalf("error %v; want rejected", err)
		}
		for i := range msgs[0].Value {
			msgs[0].Value[i]++ // the message is the caller's again
		}
	}
}

func TestHTTPCloseTwice(t *testing.T) {
	s, err := sink.NewHTTP(sink.HTTPConfig{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNewHTTPConfigErrors(t *testing.T) {
	tests := []struct {
		name  string
		cfg   sink.HTTPConfig
		field string
	}{
		{"no url", sink.HTTPConfig{}, "url"},
		{"relative url", sink.HTTPConfig{URL: "/vertices/in"}, "url"},
		{"no host", sink.HTTPConfig{URL: "http:///in"}, "url"},
		{"other scheme", sink.HTTPConfig{URL: "ftp://user:hunter2@host/in"}, "url"},
		{"unparsable url", sink.HTTPConfig{URL: "http://user:hunter2@host:port:x/%zz"}, "url"},
		{"method", sink.HTTPConfig{URL: "http://h", Method: "GE T"}, "method"},
		{"header name", sink.HTTPConfig{URL: "http://h", Header: http.Header{"X A": {"v"}}}, "header"},
		{"header value", sink.HTTPConfig{URL: "http://h", Header: http.Header{"X-Key": {"hunter2\n"}}}, "header"},
		{"timeout", sink.HTTPConfig{URL: "http://h", Timeout: -time.Second}, "timeout"},
		{"concurrency", sink.HTTPConfig{URL: "http://h", Concurrency: -1}, "concurrency"},
		{"maxRetryAfter", sink.HTTPConfig{URL: "http://h", MaxRetryAfter: -time.Second}, "maxRetryAfter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sink.NewHTTP(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %v; want one naming %s", err, tt.field)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q shows a secret", err)
			}
		})
	}
}

// BenchmarkHTTPSink writes batches of 500 messages of 100 bytes to a local
// server that answers 204: one request per message, 16 at a time, and one
// request per batch.
func BenchmarkHTTPSink(b *testing.B) {
	const batch = 500
	for _, bm := range []struct {
		name string
		cfg  sink.HTTPConfig
	}{
		{"per-message/concurrency=16", sink.HTTPConfig{Concurrency: 16}},
		{"batch=500", sink.HTTPConfig{Batch: true}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			var requests atomic.Int64
			srv := newServer(b, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				requests.Add(1)
				w.WriteHeader(http.StatusNoContent)
			})
			cfg := bm.cfg
			cfg.URL = srv.URL
			s := newHTTPSink(b, cfg)
			msgs := make([]isb.Message, batch)
			for i := range msgs {
				msgs[i] = isb.Message{ID: "in-0-" + strconv.Itoa(i), Keys: []string{"k"}, Value: make([]byte, 100), EventTime: et,
					Headers: map[string]string{"X-Trace": "0af7651916cd43dd8448eb211c80319c"}}
			}
			errs := make([]error, batch)
			for b.Loop() {
				s.Write(context.Background(), msgs, errs)
				if errs[0] != nil {
					b.Fatal(errs[0])
				}
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*batch)/secs, "msgs/s")
			b.ReportMetric(float64(requests.Load())/secs, "requests/s")
		})
	}
}

// TestHTTPHonoursRetryAfterAcrossWrites: after a 429 with Retry-After: 2,
// a Write sends nothing until the two seconds have passed (its messages
// are throttled for what is left, with no signal), then sends again, fewer
// at a time.
func TestHTTPHonoursRetryAfterAcrossWrites(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var requests, refuse atomic.Int64
	refuse.Store(1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if refuse.Load() == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	s := newHTTPSink(t, sink.HTTPConfig{URL: srv.URL, Concurrency: 1, Clock: clk})
	write(t, s, messages(3))
	refuse.Store(0)
	clk.Advance(time.Second)
	for i, err := range write(t, s, messages(3)) {
		var te *isb.ThrottledError
		if !errors.As(err, &te) || te.RetryAfter != time.Second || te.Signal != isb.SignalUnknown {
			t.Fatalf("message %d during the Retry-After: %v; want throttled for 1s, no signal", i, err)
		}
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d requests during the Retry-After; want only the first", n)
	}
	clk.Advance(time.Second)
	for i, err := range write(t, s, messages(3)) {
		if err != nil {
			t.Fatalf("message %d after the Retry-After: %v", i, err)
		}
	}
}
