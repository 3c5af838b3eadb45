package observe

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// serve starts a server on a free loopback port, over HTTPS when cfg is set,
// and stops it at the end of the test.
func serve(t *testing.T, h Handlers, cfg *tls.Config) string {
	t.Helper()
	var s *Server
	var err error
	if cfg != nil {
		s, err = ListenTLS("127.0.0.1:0", h, cfg, nil)
	} else {
		s, err = Listen("127.0.0.1:0", h, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s.Addr().String()
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// handlers are what the tests serve: a counter, and readiness that ready
// switches.
func handlers(ready *atomic.Bool) Handlers {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "A test counter."})
	c.Add(7)
	reg.MustRegister(c)
	return Handlers{Gatherer: reg, Status: func() any { return map[string]int{"n": 1} },
		PageData: func(since int64) any { return map[string]int64{"since": since} },
		Ready: func() error {
			if !ready.Load() {
				return errors.New("waiting for sourcer-server-info")
			}
			return nil
		}}
}

// TestRoutes checks every route over HTTP and over HTTPS with a self-signed
// certificate: the liveness routes answer 200 at once, /readyz 503 with the
// reason until ready, /metrics, /status, /status/live and the status page
// their content.
func TestRoutes(t *testing.T) {
	cfg, err := SelfSignedTLS(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, tt := range []struct {
		name   string
		cfg    *tls.Config
		scheme string
		client *http.Client
	}{
		{"http", nil, "http", http.DefaultClient},
		{"https", cfg, "https", insecure},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ready atomic.Bool
			base := tt.scheme + "://" + serve(t, handlers(&ready), tt.cfg)
			for _, path := range []string{"/healthz", "/livez", "/sidecar-livez"} {
				if code, body := get(t, tt.client, base+path); code != 200 || body != "ok\n" {
					t.Errorf("%s = %d %q; want 200 ok", path, code, body)
				}
			}
			if code, body := get(t, tt.client, base+"/readyz"); code != 503 || !strings.Contains(body, "sourcer-server-info") {
				t.Errorf("/readyz before ready = %d %q; want 503 naming what it waits for", code, body)
			}
			ready.Store(true)
			if code, _ := get(t, tt.client, base+"/readyz"); code != 200 {
				t.Errorf("/readyz when ready = %d; want 200", code)
			}
			if code, body := get(t, tt.client, base+"/metrics"); code != 200 || !strings.Contains(body, "test_total 7") {
				t.Errorf("/metrics = %d %q; want the counter", code, body)
			}
			if code, body := get(t, tt.client, base+"/status"); code != 200 || !strings.Contains(body, `"n": 1`) {
				t.Errorf("/status = %d %q", code, body)
			}
			if code, body := get(t, tt.client, base+"/status/live?since=0"); code != 200 || !strings.Contains(body, `"since":0`) {
				t.Errorf("/status/live = %d %q", code, body)
			}
			if code, body := get(t, tt.client, base+"/"); code != 200 || !strings.Contains(body, "status/live") {
				t.Errorf("/ = %d; want the status page", code)
			}
		})
	}
}

// TestHTTPSOnly checks that the HTTPS server refuses plain HTTP and that its
// certificate verifies for localhost once trusted.
func TestHTTPSOnly(t *testing.T) {
	cfg, err := SelfSignedTLS(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	addr := serve(t, handlers(&ready), cfg)
	if code, body := get(t, http.DefaultClient, "http://"+addr+"/livez"); code != 400 || !strings.Contains(body, "HTTPS") {
		t.Errorf("plain HTTP = %d %q; want 400 saying to use HTTPS", code, body)
	}
	if _, err := http.Get("https://" + addr + "/livez"); err == nil {
		t.Error("a client that verifies an untrusted certificate connected")
	}
	roots := x509.NewCertPool()
	roots.AddCert(cfg.Certificates[0].Leaf)
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}}}
	if code, _ := get(t, trusting, "https://"+addr+"/livez"); code != 200 {
		t.Errorf("/livez with the certificate trusted = %d; want 200", code)
	}
}

// TestSelfSignedTLS checks the certificate: ECDSA P-256, localhost as subject
// and DNS name, valid from before now for CertValidity, for servers, and a new
// key each time.
func TestSelfSignedTLS(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	a, err := SelfSignedTLS(now)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Certificates) != 1 {
		t.Fatalf("%d certificates; want 1", len(a.Certificates))
	}
	leaf := a.Certificates[0].Leaf
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T; want ECDSA P-256", leaf.PublicKey)
	}
	if leaf.Subject.CommonName != "localhost" || !slices.Equal(leaf.DNSNames, []string{"localhost"}) {
		t.Errorf("subject %q, DNS names %v; want localhost", leaf.Subject.CommonName, leaf.DNSNames)
	}
	if !leaf.NotBefore.Before(now) || !leaf.NotAfter.Equal(now.Add(CertValidity)) {
		t.Errorf("valid %v to %v; want from before %v for %v", leaf.NotBefore, leaf.NotAfter, now, CertValidity)
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Errorf("extended key usage %v; want server auth", leaf.ExtKeyUsage)
	}
	if err := leaf.CheckSignatureFrom(leaf); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	b, err := SelfSignedTLS(now)
	if err != nil {
		t.Fatal(err)
	}
	if b.Certificates[0].Leaf.PublicKey.(*ecdsa.PublicKey).Equal(pub) {
		t.Error("two calls made the same key")
	}
}

// Start serves until stop, which returns once the server is shut down and
// its listener closed.
func TestStart(t *testing.T) {
	s, err := Listen("127.0.0.1:0", handlers(new(atomic.Bool)), nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := s.Start()
	url := "http://" + s.Addr().String() + "/healthz"
	if code, body := get(t, http.DefaultClient, url); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q; want 200 ok", code, body)
	}
	stop()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := c.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("/healthz after stop: %s; want no server", resp.Status)
	}
}
