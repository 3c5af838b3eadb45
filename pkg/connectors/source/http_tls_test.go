package source_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// HTTPS, and plain HTTP beside it.

// TestHTTPServesHTTPSAndPlainHTTP: a source with TLS and a plain address
// takes messages on both into one queue, and answers /health on both.
func TestHTTPServesHTTPSAndPlainHTTP(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{PlainAddr: "127.0.0.1:0"})
	if s.PlainAddr() == nil || s.PlainAddr().String() == s.Addr().String() {
		t.Fatalf("PlainAddr() = %v beside Addr() %v; want an address of its own", s.PlainAddr(), s.Addr())
	}
	plain := s.plain()
	secure, clear := s.post("over https", nil), plain.post("over http", nil)
	got := map[string]bool{}
	for _, m := range readMessages(t, s, 2) {
		got[string(m.Value)] = true
		s.Ack(context.Background(), []isb.ReadMessage{m})
	}
	if !got["over https"] || !got["over http"] {
		t.Fatalf("read %v; want both messages", got)
	}
	for name, ch := range map[string]<-chan response{"https": secure, "http": clear} {
		if r := awaitResponse(t, ch); r.status != http.StatusNoContent {
			t.Errorf("%s: status %d (%q), want 204", name, r.status, r.body)
		}
	}
	for _, src := range []*httpSource{s, plain} {
		if r := awaitResponse(t, src.do(http.MethodGet, "/health", "", nil)); r.status != http.StatusNoContent {
			t.Errorf("GET %s/health: %d, want 204", src.base, r.status)
		}
	}
	if p := startHTTP(t, source.HTTPConfig{}); p.PlainAddr() != nil {
		t.Errorf("PlainAddr() = %v without a PlainAddr; want nil", p.PlainAddr())
	}
}

// TestHTTPSRefusesPlainHTTP: a plain HTTP request to the HTTPS address gets
// 400, saying so, and its connection is closed; nothing is queued.
func TestHTTPSRefusesPlainHTTP(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	write(t, c, s.head(5)+"hello")
	resp, body := readAnswer(t, c)
	if resp.StatusCode != http.StatusBadRequest || body != "Client sent an HTTP request to an HTTPS server.\n" {
		t.Fatalf("answer %d %q; want 400 saying the server is HTTPS", resp.StatusCode, body)
	}
	assertClosed(t, c)
	assertEmpty(t, s)
}

// TestHTTPSIsHTTP1: a client that offers HTTP/2 gets HTTP/1.1, whose
// connections the limits on slow clients are made for, over TLS 1.2 or
// later.
func TestHTTPSIsHTTP1(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{})
	cfg := s.tls.Clone()
	cfg.NextProtos = []string{"h2", "http/1.1"}
	c, err := tls.Dial("tcp", s.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := c.ConnectionState()
	c.Close()
	if st.NegotiatedProtocol != "http/1.1" || st.Version < tls.VersionTLS12 {
		t.Errorf("negotiated %q over %s; want http/1.1 over TLS 1.2 or later", st.NegotiatedProtocol, tls.VersionName(st.Version))
	}
	tr := s.transport()
	tr.ForceAttemptHTTP2 = true
	resp, err := (&http.Client{Transport: tr, Timeout: wait}).Get(s.base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.StatusCode != http.StatusNoContent {
		t.Errorf("GET /health: %s %d; want HTTP/1.1 204", resp.Proto, resp.StatusCode)
	}
	old := s.tls.Clone()
	old.MaxVersion = tls.VersionTLS11
	if c, err := tls.Dial("tcp", s.Addr().String(), old); err == nil {
		c.Close()
		t.Error("a TLS 1.1 client was served")
	}
}

// TestHTTPSUntrustedClient: a client that does not trust the certificate
// fails its handshake, and the source serves the next client.
func TestHTTPSUntrustedClient(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{})
	forward(t, s)
	c := &http.Client{Timeout: wait, Transport: &http.Transport{DisableKeepAlives: true}}
	_, err := c.Post(s.base+"/vertices/in", "text/plain", strings.NewReader("x"))
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("untrusted: %v; want an unknown authority", err)
	}
	if r := awaitResponse(t, s.post("trusted", nil)); r.status != http.StatusNoContent {
		t.Fatalf("trusted: status %d (%q), want 204", r.status, r.body)
	}
	runtest.WaitFor(t, "no connection open", func() bool { return s.Stats().Connections == 0 })
}

// TestHTTPSHandshakeTimeout: a connection that never begins its handshake is
// closed after ReadHeaderTimeout, and one at MaxConnections makes room for
// a client that does.
func TestHTTPSHandshakeTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := startHTTP(t, source.HTTPConfig{ReadHeaderTimeout: timeout, MaxConnections: 1})
	forward(t, s)
	began := time.Now()
	silent, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	runtest.WaitFor(t, "1 open, waiting", func() bool { st := s.Stats(); return st.Connections == 1 && st.Waiting == 1 })
	assertClosed(t, silent)
	if took := time.Since(began); took < timeout {
		t.Errorf("closed after %v, before %v", took, timeout)
	}
	silent, err = net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	runtest.WaitFor(t, "1 open, waiting", func() bool { st := s.Stats(); return st.Connections == 1 && st.Waiting == 1 })
	if r := awaitResponse(t, s.post("good", nil)); r.status != http.StatusNoContent {
		t.Fatalf("status %d (%q), want 204", r.status, r.body)
	}
	assertClosed(t, silent)
	if st := s.Stats(); st.ConnectionsEvicted != 1 {
		t.Errorf("Stats() = %+v; want 1 evicted", st)
	}
}

// TestHTTPListenersShareMaxConnections: MaxConnections counts the
// connections of both addresses; one refused on the HTTPS address gets its
// 503 over TLS.
func TestHTTPListenersShareMaxConnections(t *testing.T) {
	s := startHTTP(t, source.HTTPConfig{PlainAddr: "127.0.0.1:0", MaxConnections: 2})
	plain := s.plain()
	for _, src := range []*httpSource{s, plain} {
		write(t, src.dial(t), src.head(10)) // busy: its body never comes
	}
	runtest.WaitFor(t, "2 open, none waiting", func() bool { st := s.Stats(); return st.Connections == 2 && st.Waiting == 0 })
	r := awaitResponse(t, s.post("refused", nil))
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q; want 503 and 1", r.status, r.header.Get("Retry-After"))
	}
	if st := s.Stats(); st.ConnectionsRefused != 1 {
		t.Errorf("Stats() = %+v; want 1 refused", st)
	}
}

// TestHTTPPlainAddrInUse: NewHTTP fails when the plain address cannot be
// listened on, saying which, and leaves no listener open.
func TestHTTPPlainAddrInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h, err := source.NewHTTP(source.HTTPConfig{Listener: ln, PlainAddr: held.Addr().String(), Vertex: "in"})
	if err == nil {
		h.Close()
		t.Fatal("NewHTTP on a busy plain address succeeded")
	}
	if !strings.HasPrefix(err.Error(), "plain HTTP: listen tcp "+held.Addr().String()) {
		t.Errorf("err = %v; want it to name the plain address", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the given listener: Accept = %v; want it closed", err)
	}
}
