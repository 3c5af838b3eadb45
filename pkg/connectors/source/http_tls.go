package source

import (
	"crypto/tls"
	"log"
	"strings"

	"go.uber.org/zap"
)

// How an http source serves HTTPS.

// serverTLS is the TLS configuration an http source serves with, made from
// the caller's cfg: HTTP/1.1 only, whose connections the source's limits on
// slow clients and connections are made for (an HTTP/2 connection carries
// many requests, each without a connection of its own to cut), and TLS 1.2
// at least.
func serverTLS(cfg *tls.Config) *tls.Config {
	c := cfg.Clone()
	c.NextProtos = []string{"http/1.1"}
	c.MinVersion = max(c.MinVersion, tls.VersionTLS12)
	return c
}

// serverLog is the error log of an http source's server: a failed TLS
// handshake (a client that does not trust the certificate, a plain HTTP
// request to the HTTPS port, a probe that connects and leaves) is logged at
// debug level, since it is the client's to report and a busy port may see
// many; anything else the server reports is a warning.
func serverLog(l *zap.Logger) *log.Logger {
	return log.New(serverLogWriter{l}, "", 0)
}

type serverLogWriter struct{ log *zap.Logger }

func (w serverLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		w.log.Debug(msg)
	} else {
		w.log.Warn(msg)
	}
	return len(p), nil
}
