package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Conn says how to reach Redis. The mode follows from the fields: with
// ClusterAddrs set, Redis is the Redis Cluster those nodes belong to (cluster
// mode); with MasterName set, the master that the sentinels at Endpoints name
// (sentinel mode); otherwise the one server at URL (single mode).
type Conn struct {
	// URL is redis://[user:password@]host:port[/db] or rediss://... (TLS), in
	// single mode.
	URL string
	// DB overrides the URL's database when set.
	DB *int

	// MasterName, when set, selects sentinel mode: the master of that name, as
	// the sentinels at Endpoints (host:port) report it.
	MasterName string
	Endpoints  []string

	// ClusterAddrs, when set, selects cluster mode: the host:port of some
	// nodes of a Redis Cluster, from which the client learns the others. TLS
	// and the Redis credentials apply to every node; DB must be nil or 0.
	ClusterAddrs []string

	// Credentials of the Redis servers and of the sentinels; empty for none.
	Username, Password                 string
	SentinelUsername, SentinelPassword string
	// TLS of the Redis servers and of the sentinels; nil for plain TCP.
	TLS, SentinelTLS *tls.Config

	// DialTimeout bounds connecting (default 2s).
	DialTimeout time.Duration
}

// newClient returns a client for c, and where it connects for messages (never
// a credential). It does not connect.
func newClient(c Conn) (redis.UniversalClient, string, error) {
	if c.DialTimeout <= 0 {
		c.DialTimeout = 2 * time.Second
	}
	if len(c.ClusterAddrs) > 0 {
		return newClusterClient(c)
	}
	if c.MasterName != "" {
		if len(c.Endpoints) == 0 {
			return nil, "", fmt.Errorf("%w: sentinel master %q without endpoints", ErrInvalidConn, c.MasterName)
		}
		opt := &redis.FailoverOptions{
			MasterName: c.MasterName, SentinelAddrs: c.Endpoints,
			Username: c.Username, Password: c.Password,
			SentinelUsername: c.SentinelUsername, SentinelPassword: c.SentinelPassword,
			DialTimeout: c.DialTimeout, MaxRetries: 1, DialerRetries: 1,
			ContextTimeoutEnabled: true,
		}
		if c.DB != nil {
			opt.DB = *c.DB
		}
		// go-redis has one TLS setting for sentinels and servers; a dialer tells
		// them apart by address, so each gets its own.
		if c.TLS != nil || c.SentinelTLS != nil {
			opt.Dialer = tlsDialer(c)
		}
		return redis.NewFailoverClient(opt), fmt.Sprintf("master %q of sentinels %v", c.MasterName, c.Endpoints), nil
	}
	if c.URL == "" {
		return nil, "", fmt.Errorf("%w: neither a URL nor a sentinel master name", ErrInvalidConn)
	}
	opt, err := redis.ParseURL(c.URL)
	if err != nil {
		// The URL may hold a password: the error names neither.
		return nil, "", fmt.Errorf("%w: the URL does not parse: %v", ErrInvalidConn, err)
	}
	if c.DB != nil {
		opt.DB = *c.DB
	}
	if c.Username != "" {
		opt.Username = c.Username
	}
	if c.Password != "" {
		opt.Password = c.Password
	}
	if c.TLS != nil {
		t := c.TLS.Clone()
		if opt.TLSConfig != nil && t.ServerName == "" {
			t.ServerName = opt.TLSConfig.ServerName
		}
		opt.TLSConfig = t
	}
	// A replica syncs again within a sync interval: one try is enough. A
	// sync's deadline bounds its reads and writes too, so that a connection
	// that stops answering fails the sync in time (not after the client's own
	// 3s read timeout, tried twice).
	opt.DialTimeout, opt.MaxRetries, opt.DialerRetries = c.DialTimeout, 1, 1
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), opt.Addr, nil
}

// newClusterClient returns a client of the Redis Cluster at c.ClusterAddrs.
func newClusterClient(c Conn) (redis.UniversalClient, string, error) {
	switch {
	case c.MasterName != "" || c.URL != "":
		return nil, "", fmt.Errorf("%w: cluster addresses with a URL or a sentinel master name", ErrInvalidConn)
	case c.DB != nil && *c.DB != 0:
		return nil, "", fmt.Errorf("%w: database %d in cluster mode, which has only database 0", ErrInvalidConn, *c.DB)
	}
	opt := &redis.ClusterOptions{
		Addrs: c.ClusterAddrs, Username: c.Username, Password: c.Password,
		DialTimeout: c.DialTimeout, MaxRetries: 1, DialerRetries: 1,
		ContextTimeoutEnabled: true,
	}
	if c.TLS != nil {
		opt.TLSConfig = c.TLS.Clone()
	}
	return redis.NewClusterClient(opt), fmt.Sprintf("cluster of %v", c.ClusterAddrs), nil
}

// tlsDialer dials sentinels with c.SentinelTLS and servers with c.TLS.
func tlsDialer(c Conn) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: c.DialTimeout, KeepAlive: 5 * time.Minute}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cfg := c.TLS
		if slices.Contains(c.Endpoints, addr) {
			cfg = c.SentinelTLS
		}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil || cfg == nil {
			return conn, err
		}
		cfg = cfg.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// Errors of the configuration that [Open] finds.
var (
	// ErrAuth: Redis refused the credentials.
	ErrAuth = errors.New("redis refused the credentials")
	// ErrTLS: the TLS handshake failed (certificate, CA, protocol).
	ErrTLS = errors.New("TLS handshake with redis failed")
	// ErrHost: the host name does not resolve.
	ErrHost = errors.New("redis host not found")
	// ErrInvalidConn: the [Conn] cannot be used: no URL, master name or cluster
	// address, a URL that does not parse, sentinel mode without endpoints, or
	// cluster mode with a URL, a master name or a database other than 0.
	ErrInvalidConn = errors.New("invalid redis connection settings")
)

// configError returns the error of a ping, wrapped in [ErrAuth], [ErrTLS] or
// [ErrHost], when it says the configuration is wrong: a wrong password, a TLS
// failure or a host that does not resolve. It returns nil for no error and for
// Redis being away for now (refused, timed out).
func configError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "invalid password"),
		strings.Contains(msg, "invalid username-password"):
		return fmt.Errorf("%w: %v", ErrAuth, err)
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr),
		strings.Contains(msg, "tls:"), strings.Contains(msg, "x509:"):
		return fmt.Errorf("%w: %v", ErrTLS, err)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return fmt.Errorf("%w: %v", ErrHost, err)
	}
	return nil
}
