package vertexconfig

// The secrets a vertex's YAML names: a [config.SecretKeySelector] is a file,
// where Numaflow mounts the secret (/var/numaflow/secrets/<name>/<key>) or,
// sluice's addition, a path of its own; a [config.TLS] is a client TLS
// configuration built from such files. Errors name the field of the YAML
// they come from, as a [*config.FieldError], and never hold a secret's value.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluiceflow/sluice/config"
)

// SecretDir is where Numaflow mounts the secrets a vertex names.
const SecretDir = "/var/numaflow/secrets"

// secretFile returns the file of a secret: its own, or Numaflow's mount of it.
func secretFile(s *config.SecretKeySelector) string {
	if s.File != "" {
		return s.File
	}
	return filepath.Join(SecretDir, s.Name, s.Key)
}

// readSecret reads the secret s, named path in the YAML, trimmed of surrounding white
// space. An optional secret whose file does not exist reads as "".
func readSecret(s *config.SecretKeySelector, path string) (string, error) {
	b, err := os.ReadFile(secretFile(s))
	if err != nil {
		if s.Optional != nil && *s.Optional && errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return "", &config.FieldError{Path: path, Err: err}
	}
	return strings.TrimSpace(string(b)), nil
}

// readAuth reads a username and a password from their secrets; a nil a reads as
// no credentials.
func readAuth(a *config.RedisAuth, path string) (user, password string, err error) {
	if a == nil {
		return "", "", nil
	}
	if a.Username != nil {
		if user, err = readSecret(a.Username, path+".username"); err != nil {
			return "", "", err
		}
	}
	if a.Password != nil {
		if password, err = readSecret(a.Password, path+".password"); err != nil {
			return "", "", err
		}
	}
	return user, password, nil
}

// readTLS builds a client TLS configuration from t's secrets, named path in the
// YAML: the CA to trust (else the system's), and a client certificate and key.
// A nil t is no TLS: it returns nil.
func readTLS(t *config.TLS, path string) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c, err := tlsConfig(t)
	if err != nil {
		return nil, &config.FieldError{Path: path, Err: err}
	}
	return c, nil
}

func tlsConfig(t *config.TLS) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CACertSecret != nil {
		file := secretFile(t.CACertSecret)
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("caCertSecret: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caCertSecret: %s holds no PEM certificate", file)
		}
	}
	if (t.CertSecret == nil) != (t.KeySecret == nil) {
		return nil, errors.New("a client certificate needs both certSecret and keySecret")
	}
	if t.CertSecret != nil {
		cert, err := tls.LoadX509KeyPair(secretFile(t.CertSecret), secretFile(t.KeySecret))
		if err != nil {
			return nil, fmt.Errorf("certSecret, keySecret: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
