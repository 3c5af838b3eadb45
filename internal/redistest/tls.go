package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// authority is a throwaway certificate authority generated in memory the
// first time a TLS server is started in the test binary. Every TLS server (and
// sentinel) gets its own certificate signed by it, so TLS replicas and
// sentinels trust their masters without extra configuration.
type authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

var (
	caOnce sync.Once
	caVal  *authority
	caErr  error
)

func testAuthority() (*authority, error) {
	caOnce.Do(func() { caVal, caErr = newAuthority() })
	return caVal, caErr
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "redistest CA", Organization: []string{"redistest"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(48 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// issue signs a new leaf certificate. Server certificates are valid for
// 127.0.0.1, ::1 and localhost.
func (a *authority) issue(cn string, server bool) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"redistest"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(47 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// writeTLSFiles writes the CA certificate, a server certificate/key and a
// client certificate/key into s.Dir and fills in the file fields of s and its
// client-side tls.Config.
func (s *Server) writeTLSFiles() error {
	a, err := testAuthority()
	if err != nil {
		return fmt.Errorf("generate CA: %w", err)
	}
	srvCert, srvKey, err := a.issue("redistest server", true)
	if err != nil {
		return fmt.Errorf("issue server certificate: %w", err)
	}
	cliCert, cliKey, err := a.issue("redistest client", false)
	if err != nil {
		return fmt.Errorf("issue client certificate: %w", err)
	}
	files := []struct {
		field *string
		name  string
		data  []byte
	}{
		{&s.CAFile, "ca.crt", a.certPEM},
		{&s.CertFile, "server.crt", srvCert},
		{&s.KeyFile, "server.key", srvKey},
		{&s.ClientCertFile, "client.crt", cliCert},
		{&s.ClientKeyFile, "client.key", cliKey},
	}
	for _, f := range files {
		p := filepath.Join(s.Dir, f.name)
		if err := os.WriteFile(p, f.data, 0o600); err != nil {
			return err
		}
		*f.field = p
	}
	pair, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(a.cert)
	s.tlsConf = &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{pair},
		ServerName:   "127.0.0.1",
		MinVersion:   tls.VersionTLS12,
	}
	return nil
}
