package vertexconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/selfsigned"
)

// TestHTTPAddrs: HTTPS on the flag's address, else :ports.https, else
// :8443; plain HTTP only with ports.http, on the flag's address, else
// :ports.http.
func TestHTTPAddrs(t *testing.T) {
	tests := []struct {
		yaml, flag, plainFlag string
		https, plain          string
	}{
		{"{}", "", "", ":8443", ""},
		{"{}", "127.0.0.1:0", "127.0.0.1:9", "127.0.0.1:0", ""},
		{"{ports: {https: 9443}}", "", "", ":9443", ""},
		{"{ports: {http: 8090}}", "", "", ":8443", ":8090"},
		{"{ports: {https: 9443, http: 8090}}", "", "", ":9443", ":8090"},
		{"{ports: {https: 9443, http: 8090}}", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:1", "127.0.0.1:2"},
	}
	for _, tt := range tests {
		f := mustParse(t, strings.Replace(minimalMonoVertex, "generator: {}", "http: "+tt.yaml, 1))
		h := f.MonoVertex.Spec.Source.HTTP
		if got := HTTPAddr(tt.flag, h); got != tt.https {
			t.Errorf("%s, flag %q: HTTPAddr = %q, want %q", tt.yaml, tt.flag, got, tt.https)
		}
		if got := PlainHTTPAddr(tt.plainFlag, h); got != tt.plain {
			t.Errorf("%s, flag %q: PlainHTTPAddr = %q, want %q", tt.yaml, tt.plainFlag, got, tt.plain)
		}
	}
}

// TestHTTPCertificate: without tls, a self-signed certificate for the
// loopback names and the host's; with tls, the files' certificate; files
// that cannot be read or do not match are an error naming the field and
// the files.
func TestHTTPCertificate(t *testing.T) {
	cert, from, err := httpCertificate(nil, "spec.source.http.tls")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, h := range []string{"localhost", "127.0.0.1", "::1", host} {
		if err := cert.Leaf.VerifyHostname(h); err != nil {
			t.Errorf("self-signed: %v", err)
		}
	}
	if !strings.HasPrefix(from, "self-signed for localhost, 127.0.0.1, ::1") || !strings.Contains(from, "SHA-256 "+fingerprint(cert.Leaf.Raw)) {
		t.Errorf("self-signed: from %q", from)
	}

	dir := t.TempDir()
	given, err := selfsigned.Certificate(time.Now(), "orders.example.com")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writePEM(t, certFile, "CERTIFICATE", given.Certificate[0])
	key, err := x509.MarshalPKCS8PrivateKey(given.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", key)
	tlsOf := func(c, k string) *config.HTTPSourceTLS {
		return &config.HTTPSourceTLS{CertSecret: &config.SecretKeySelector{File: c}, KeySecret: &config.SecretKeySelector{File: k}}
	}
	got, from, err := httpCertificate(tlsOf(certFile, keyFile), "spec.source.http.tls")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Leaf.Equal(given.Leaf) || !strings.HasPrefix(from, certFile+", expires ") {
		t.Errorf("from files: %v, %q; want the files' certificate", got.Leaf.Subject, from)
	}

	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := x509.MarshalPKCS8PrivateKey(other)
	otherFile := filepath.Join(dir, "other.key")
	writePEM(t, otherFile, "PRIVATE KEY", otherKey)
	missing := filepath.Join(dir, "missing.crt")
	for name, tt := range map[string]struct {
		tls  *config.HTTPSourceTLS
		want string
	}{
		"missing": {tlsOf(missing, keyFile), "spec.source.http.tls: certSecret (" + missing + "), keySecret (" + keyFile +
			"): open " + missing + ": no such file or directory"},
		"not matching": {tlsOf(certFile, otherFile), "spec.source.http.tls: certSecret (" + certFile + "), keySecret (" + otherFile +
			"): tls: private key does not match public key"},
		"not PEM": {tlsOf(keyFile, keyFile), "spec.source.http.tls: certSecret (" + keyFile + "), keySecret (" + keyFile +
			"): tls: failed to find certificate PEM data in certificate input, but did find a private key; PEM inputs may have been switched"},
	} {
		if _, _, err := httpCertificate(tt.tls, "spec.source.http.tls"); err == nil || err.Error() != tt.want {
			t.Errorf("%s: err = %v\nwant %s", name, err, tt.want)
		}
	}
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
