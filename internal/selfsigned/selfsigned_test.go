package selfsigned_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/selfsigned"
)

// TestCertificate checks the certificate: ECDSA P-256, the first host as
// subject, DNS names and IP addresses as given, valid from before now for
// Validity, for servers, one that verifies itself for each host, and a new
// key each time.
func TestCertificate(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	hosts := []string{"localhost", "127.0.0.1", "::1", "vertex-0"}
	a, err := selfsigned.Certificate(now, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	leaf := a.Leaf
	key, ok := a.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Fatalf("private key %T; want ECDSA P-256", a.PrivateKey)
	}
	if leaf.Subject.CommonName != "localhost" || !slices.Equal(leaf.DNSNames, []string{"localhost", "vertex-0"}) {
		t.Errorf("subject %q, DNS names %q; want localhost and localhost, vertex-0", leaf.Subject.CommonName, leaf.DNSNames)
	}
	if len(leaf.IPAddresses) != 2 || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || !leaf.IPAddresses[1].Equal(net.IPv6loopback) {
		t.Errorf("IP addresses %v; want 127.0.0.1 and ::1", leaf.IPAddresses)
	}
	if !leaf.NotBefore.Before(now) || !leaf.NotAfter.Equal(now.Add(selfsigned.Validity)) {
		t.Errorf("valid %v to %v; want from before %v for %v", leaf.NotBefore, leaf.NotAfter, now, selfsigned.Validity)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("extended key usage %v; want server auth", leaf.ExtKeyUsage)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	for _, h := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: h, Roots: roots, CurrentTime: now}); err != nil {
			t.Errorf("verify for %s: %v", h, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots, CurrentTime: now}); err == nil {
		t.Error("verifies for example.com, a host it was not made for")
	}
	b, err := selfsigned.Certificate(now, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	if b.PrivateKey.(*ecdsa.PrivateKey).Equal(key) || leaf.SerialNumber.Cmp(b.Leaf.SerialNumber) == 0 {
		t.Error("two certificates share a key or a serial number")
	}
}

// TestCertificateNeedsAHost: without a host, no certificate.
func TestCertificateNeedsAHost(t *testing.T) {
	if _, err := selfsigned.Certificate(time.Now()); err == nil || err.Error() != "self-signed certificate: no host to be valid for" {
		t.Fatalf("err = %v", err)
	}
}
