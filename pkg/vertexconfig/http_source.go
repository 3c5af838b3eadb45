package vertexconfig

import (
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/selfsigned"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// The http source of a vertex: where it listens, what it serves HTTPS with.

// HTTPAddr is the address the http source h serves HTTPS on: addr when it
// is not "" (vertex run --http-addr), else :ports.https, else
// :[config.DefaultHTTPSPort] (8443, Numaflow's).
func HTTPAddr(addr string, h *config.HTTPSource) string {
	if addr != "" {
		return addr
	}
	port := int32(config.DefaultHTTPSPort)
	if h.Ports != nil && h.Ports.HTTPS != nil {
		port = *h.Ports.HTTPS
	}
	return ":" + strconv.Itoa(int(port))
}

// PlainHTTPAddr is the address the http source h serves plain HTTP on
// besides, "" when it serves HTTPS only: without ports.http. With it, addr
// when it is not "" (vertex run --http-plain-addr), else :ports.http.
func PlainHTTPAddr(addr string, h *config.HTTPSource) string {
	if h.Ports == nil || h.Ports.HTTP == nil {
		return ""
	}
	if addr != "" {
		return addr
	}
	return ":" + strconv.Itoa(int(*h.Ports.HTTP))
}

func httpSource(env vertex.Env, path string, h *config.HTTPSource) (isb.Reader, error) {
	addr, plainAddr := HTTPAddr(env.HTTPAddr, h), PlainHTTPAddr(env.PlainHTTPAddr, h)
	// The queue is the source's own, DefaultHTTPQueue as in Numaflow, not
	// readBatchSize: a batch of one still leaves room for every client
	// waiting on its answer.
	cfg := source.HTTPConfig{Addr: addr, PlainAddr: plainAddr, Vertex: env.Name,
		MaxQueueBytes: HTTPMaxQueueBytes(h), ReadTimeout: env.Limits.ReadTimeout, Logger: env.Log, RetryAfter: env.RetryAfter}
	httpPace(&cfg, h)
	if h.Auth != nil && h.Auth.Token != nil {
		token, err := readSecret(h.Auth.Token, path+".auth.token")
		if err != nil {
			return nil, err
		}
		cfg.Token = token
	}
	cert, certFrom, err := httpCertificate(h.TLS, path+".tls")
	if err != nil {
		return nil, err
	}
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	closeAll := func() {
		for _, ln := range []net.Listener{cfg.Listener, cfg.PlainListener} {
			if ln != nil {
				ln.Close()
			}
		}
	}
	if env.Listen != nil {
		if cfg.Listener, err = env.Listen(addr); err != nil {
			return nil, fmt.Errorf("http source on %s: %w", addr, err)
		}
		if plainAddr != "" {
			if cfg.PlainListener, err = env.Listen(plainAddr); err != nil {
				closeAll()
				return nil, fmt.Errorf("http source, plain HTTP on %s: %w", plainAddr, err)
			}
		}
	}
	hs, err := source.NewHTTP(cfg)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("http source on %s: %w", addr, err)
	}
	env.OnClose(hs.Close)
	env.Log.Info("http source listening", zap.String("scheme", "https"), zap.String("addr", hs.Addr().String()),
		zap.String("path", "/vertices/"+env.Name), zap.String("certificate", certFrom))
	if a := hs.PlainAddr(); a != nil {
		env.Log.Info("http source listening", zap.String("scheme", "http"), zap.String("addr", a.String()),
			zap.String("path", "/vertices/"+env.Name))
	}
	return hs, nil
}

// httpCertificate returns the certificate an http source serves HTTPS with,
// and where it comes from: the files of t, named path in the YAML, or, with
// no t, a self-signed certificate made now for localhost, 127.0.0.1, ::1
// and the host's name, kept in memory only.
func httpCertificate(t *config.HTTPSourceTLS, path string) (tls.Certificate, string, error) {
	if t != nil {
		certFile, keyFile := secretFile(t.CertSecret), secretFile(t.KeySecret)
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, "", &config.FieldError{Path: path,
				Err: fmt.Errorf("certSecret (%s), keySecret (%s): %w", certFile, keyFile, err)}
		}
		return cert, certFile + ", expires " + cert.Leaf.NotAfter.UTC().Format(time.RFC3339), nil
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if name, err := os.Hostname(); err == nil && name != "" && name != "localhost" {
		hosts = append(hosts, name)
	}
	cert, err := selfsigned.Certificate(time.Now(), hosts...)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("%s: %w", path, err)
	}
	return cert, "self-signed for " + strings.Join(hosts, ", ") + ", SHA-256 " + fingerprint(cert.Leaf.Raw), nil
}

// fingerprint is the SHA-256 of a certificate's DER, in hex pairs joined
// by colons, as openssl x509 -fingerprint -sha256 prints it.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	pairs := make([]string, len(sum))
	for i, b := range sum {
		pairs[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(pairs, ":")
}

// httpPace sets in cfg the timeouts and limits of h that are given: the
// source's defaults stand for the others.
func httpPace(cfg *source.HTTPConfig, h *config.HTTPSource) {
	if d := h.ReadHeaderTimeout; d != nil {
		cfg.ReadHeaderTimeout = d.Duration
	}
	if d := h.ReadBodyTimeout; d != nil {
		cfg.ReadBodyTimeout = d.Duration
	}
	if n := h.MinBodyBytesPerSecond; n != nil {
		cfg.MinBodyBytesPerSecond = clampInt64(*n)
	}
	if d := h.IdleTimeout; d != nil {
		cfg.IdleTimeout = d.Duration
	}
	if n := h.MaxConnections; n != nil {
		cfg.MaxConnections = clampInt(*n)
	}
}
