package kafka

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// roundTrip writes value with a sink of client and reads it back with a
// source of client in a group of its own.
func roundTrip(t *testing.T, client ClientConfig, topic, value string) {
	t.Helper()
	sink, err := NewSink(SinkConfig{Client: client, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make([]error, 1)
	if err := sink.Write(ctx, []isb.Message{{Value: []byte(value)}}, errs); err != nil || errs[0] != nil {
		t.Fatalf("Write = %v, %v", err, errs[0])
	}
	client.Properties = fastGroup()
	src, err := NewSource(ctx, SourceConfig{Client: client, Topics: []string{topic}, Group: "g-" + value, ReadTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	buf := make([]isb.ReadMessage, 10)
	for ctx.Err() == nil {
		n, err := src.Read(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range buf[:n] {
			if string(m.Value) == value {
				return
			}
		}
	}
	t.Fatalf("%q not read back in 10s", value)
}

func TestSASL(t *testing.T) {
	c := newCluster(t, kfake.EnableSASL(), kfake.SeedTopics(1, "t"),
		kfake.Superuser(MechanismPlain, "plain-user", "plain-pass"),
		kfake.Superuser(MechanismScramSHA256, "scram256-user", "scram256-pass"),
		kfake.Superuser(MechanismScramSHA512, "scram512-user", "scram512-pass"))
	for _, tc := range []struct{ mech, user, pass string }{
		{MechanismPlain, "plain-user", "plain-pass"},
		{MechanismScramSHA256, "scram256-user", "scram256-pass"},
		{MechanismScramSHA512, "scram512-user", "scram512-pass"},
	} {
		t.Run(tc.mech, func(t *testing.T) {
			roundTrip(t, ClientConfig{Brokers: c.ListenAddrs(), SASL: &SASL{Mechanism: tc.mech, User: tc.user, Password: tc.pass}}, "t", tc.mech)
		})
		t.Run(tc.mech+" wrong password", func(t *testing.T) {
			client := ClientConfig{Brokers: c.ListenAddrs(), SASL: &SASL{Mechanism: tc.mech, User: tc.user, Password: "wrong-pass"}}
			checkRefused(t, client)
		})
	}
}

// checkRefused checks that the sink and the source of client fail with an
// authentication error that does not hold the password.
func checkRefused(t *testing.T, client ClientConfig) {
	t.Helper()
	sinkClient := client
	sinkClient.Properties = Properties{"message.timeout.ms": "1000"}
	sink, err := NewSink(SinkConfig{Client: sinkClient, Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	errs := make([]error, 1)
	err = sink.Write(ctx, []isb.Message{{Value: []byte("x")}}, errs)
	if err == nil {
		err = errs[0]
	}
	checkAuthErr(t, "sink Write", err, client.SASL.Password)
	checkAuthErr(t, "sink Ping", sink.Ping(ctx), client.SASL.Password)

	client.Properties = fastGroup()
	src, err := NewSource(ctx, SourceConfig{Client: client, Topics: []string{"t"}, Group: "g", ReadTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for ctx.Err() == nil {
		n, err := src.Read(ctx, make([]isb.ReadMessage, 1))
		if n > 0 {
			t.Fatal("a source with a wrong password read a message")
		}
		if err != nil {
			checkAuthErr(t, "source Read", err, client.SASL.Password)
			return
		}
	}
	t.Fatal("the source's reads never reported the failed authentication")
}

func checkAuthErr(t *testing.T, what string, err error, secret string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded with a wrong password", what)
	}
	t.Logf("%s: %v", what, err)
	if !strings.Contains(err.Error(), "SASL") || strings.Contains(err.Error(), secret) {
		t.Fatalf("%s error = %q; want a SASL error without the password", what, err)
	}
}

// selfSigned returns a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	c := newCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), kfake.SeedTopics(1, "t"))
	t.Run("trusted", func(t *testing.T) {
		roundTrip(t, ClientConfig{Brokers: c.ListenAddrs(), TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			Properties: Properties{"security.protocol": "SSL"}}, "t", "over-tls")
	})
	t.Run("untrusted", func(t *testing.T) {
		// ssl without a tls config verifies with the system's roots, which do
		// not hold the test's certificate.
		sink := newTestSink(t, c.ListenAddrs(), "t", false, Properties{"security.protocol": "ssl"})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sink.Ping(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("Ping = %v; want a certificate error", err)
		}
	})
}

// tokenServer is an https token endpoint that grants client-id with
// client-secret the tokens token-1, token-2... valid 100s, and counts its calls.
func tokenServer(t *testing.T) (*OAuth, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		id, secret, ok := r.BasicAuth()
		if r.Method != http.MethodPost || r.FormValue("grant_type") != "client_credentials" || !ok {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if id != "client-id" || secret != "client-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "unknown client"})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": "token-" + strconv.Itoa(int(n)), "token_type": "Bearer", "expires_in": 100})
	}))
	t.Cleanup(srv.Close)
	return &OAuth{ClientID: "client-id", ClientSecret: "client-secret", TokenEndpoint: srv.URL + "/token", HTTPClient: srv.Client()}, &calls
}

func TestOAuthMechanism(t *testing.T) {
	cfg, _ := tokenServer(t)
	mech, err := (&SASL{Mechanism: "OAUTHBEARER", OAuth: cfg}).mechanism(RoleSource)
	if err != nil {
		t.Fatal(err)
	}
	_, first, err := mech.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(first), "auth=Bearer token-1") || mech.Name() != "OAUTHBEARER" {
		t.Fatalf("first message %q of %s; want the bearer token", first, mech.Name())
	}
}

func TestOAuthTokenCachedUntilDue(t *testing.T) {
	cfg, calls := tokenServer(t)
	src, err := newTokenSource(RoleSource, cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	src.now = func() time.Time { return now }
	for i, step := range []struct {
		advance time.Duration
		token   string
	}{{0, "token-1"}, {79 * time.Second, "token-1"}, {2 * time.Second, "token-2"}} {
		now = now.Add(step.advance)
		tok, err := src.Token(context.Background())
		if err != nil || tok != step.token {
			t.Fatalf("step %d: Token = %q, %v; want %q", i, tok, err, step.token)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the endpoint was called %d times; want 2", n)
	}
}

func TestOAuthTokenRefused(t *testing.T) {
	cfg, _ := tokenServer(t)
	cfg.ClientSecret = "wrong-secret"
	src, err := newTokenSource(RoleSource, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Token(context.Background())
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("Token = %v; want a 401 invalid_client error without the secret", err)
	}
}
