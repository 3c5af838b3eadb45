package vertexconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/config"
)

func file(t *testing.T, content string) *config.SecretKeySelector {
	path := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return &config.SecretKeySelector{File: path}
}

func TestReadSecret(t *testing.T) {
	if got, err := readSecret(file(t, " pass\n"), "x"); got != "pass" || err != nil {
		t.Fatalf("Read = %q, %v", got, err)
	}
	missing := &config.SecretKeySelector{Name: "no-such-secret", Key: "password"}
	if got := secretFile(missing); got != "/var/numaflow/secrets/no-such-secret/password" {
		t.Fatalf("Path = %q", got)
	}
	_, err := readSecret(missing, "spec.x.password")
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Path != "spec.x.password" || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing secret: %v", err)
	}
	yes := true
	missing.Optional = &yes
	if got, err := readSecret(missing, "x"); got != "" || err != nil {
		t.Fatalf("missing optional secret: %q, %v", got, err)
	}
	user, pass, err := readAuth(&config.RedisAuth{Username: file(t, "u"), Password: file(t, "p")}, "a")
	if user != "u" || pass != "p" || err != nil {
		t.Fatalf("Auth = %q, %q, %v", user, pass, err)
	}
}

func TestReadTLS(t *testing.T) {
	if c, err := readTLS(nil, "x"); c != nil || err != nil {
		t.Fatalf("no TLS: %v, %v", c, err)
	}
	c, err := readTLS(&config.TLS{InsecureSkipVerify: true}, "x")
	if err != nil || !c.InsecureSkipVerify || c.RootCAs != nil {
		t.Fatalf("insecure: %+v, %v", c, err)
	}
	for _, tt := range []struct {
		name string
		tls  *config.TLS
		want string
	}{
		{"not a CA", &config.TLS{CACertSecret: file(t, "nothing")}, "holds no PEM certificate"},
		{"no CA file", &config.TLS{CACertSecret: &config.SecretKeySelector{File: "/nonexistent"}}, "caCertSecret"},
		{"cert without key", &config.TLS{CertSecret: file(t, "x")}, "needs both certSecret and keySecret"},
		{"bad pair", &config.TLS{CertSecret: file(t, "x"), KeySecret: file(t, "y")}, "certSecret, keySecret"},
	} {
		_, err := readTLS(tt.tls, "spec.tls")
		var fe *config.FieldError
		if !errors.As(err, &fe) || fe.Path != "spec.tls" || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want spec.tls: ...%s", tt.name, err, tt.want)
		}
	}
}
