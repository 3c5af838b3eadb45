package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

const (
	// reconnectWait is the pause between reconnect attempts (nats.go adds
	// up to 100 ms of jitter).
	reconnectWait = 250 * time.Millisecond
	// dialTimeout bounds one attempt to reach a server.
	dialTimeout = 2 * time.Second
	// apiTimeout bounds a JetStream API request made without a caller's
	// deadline (Reader's consumer lookup, the writer's stream info).
	apiTimeout = 5 * time.Second
)

// Conn is a connection to a NATS server with JetStream, from which buffers
// are created and deleted and their writers and readers made.
//
// The connection reconnects by itself, forever, after a disconnect; calls
// made while it is disconnected fail at once (nothing is queued for later),
// and work again once it is back, without making a new Conn. A Conn is safe
// for concurrent use; its readers and writers share its one TCP connection.
type Conn struct {
	cfg       Config
	url       string // cfg.URL with secrets redacted, for errors and logs
	nc        *nats.Conn
	js        jetstream.JetStream
	log       *zap.Logger
	closeOnce sync.Once
}

// Connect connects to the server in cfg.URL and checks that JetStream is
// enabled for the account. It fails with an error matching [ErrAuth] when
// the server refuses the credentials, [ErrInvalidConfig] for a bad cfg, and
// another error (naming the URL, never a secret) when the server cannot be
// reached or has no JetStream. ctx bounds the attempt.
func Connect(ctx context.Context, cfg Config) (*Conn, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	c := &Conn{cfg: cfg, url: redactURL(cfg.URL), log: cfg.Logger.With(zap.String("url", redactURL(cfg.URL)))}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("jetstream: connect to %s: %w", c.url, err)
	}
	timeout := dialTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(d), time.Millisecond))
	}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		// No reconnect buffer: a publish (a message, an ack) made while
		// disconnected fails at once instead of being sent later without
		// anyone waiting for its outcome.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(c.onDisconnect),
		nats.ReconnectHandler(c.onReconnect),
		nats.ErrorHandler(c.onAsyncError),
	}
	if cfg.User != "" || cfg.Password != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.TLS != nil {
		opts = append(opts, nats.Secure(cfg.TLS.Clone()))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		if isAuthError(err) {
			return nil, fmt.Errorf("%w: connect to %s: %w", ErrAuth, c.url, err)
		}
		return nil, fmt.Errorf("jetstream: connect to %s: %w", c.url, err)
	}
	c.nc = nc
	c.js, err = jetstream.New(nc)
	if err == nil {
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		_, err = c.js.AccountInfo(actx)
		cancel()
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: connect to %s: JetStream not available: %w", c.url, err)
	}
	c.log.Debug("connected", zap.String("server", nc.ConnectedServerName()))
	return c, nil
}

// isAuthError reports whether err is the server refusing credentials.
func isAuthError(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

func (c *Conn) onDisconnect(_ *nats.Conn, err error) {
	if err != nil {
		c.log.Warn("disconnected from NATS; reconnecting", zap.Error(err))
	} else {
		c.log.Debug("disconnected from NATS")
	}
}

func (c *Conn) onReconnect(nc *nats.Conn) {
	c.log.Info("reconnected to NATS", zap.String("server", nc.ConnectedServerName()))
}

func (c *Conn) onAsyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	if sub != nil {
		c.log.Warn("NATS asynchronous error", zap.String("subject", sub.Subject), zap.Error(err))
		return
	}
	c.log.Warn("NATS asynchronous error", zap.Error(err))
}

// Close closes the connection, after sending what is still buffered (acks
// included). Readers and writers made from it fail from then on. Close is
// safe to call twice.
func (c *Conn) Close() error {
	c.closeOnce.Do(c.nc.Close)
	return nil
}

// Connected reports whether the connection is up (false while reconnecting
// and after Close).
func (c *Conn) Connected() bool {
	return c.nc.IsConnected()
}
