package source

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
)

// Errors of the [NATS] and [JetStream] sources.
var (
	// ErrNATSConfig is matched by errors for a NATSConfig or JetStreamConfig
	// field that is missing or out of range; the error names the field.
	ErrNATSConfig = errors.New("invalid NATS source config")
	// ErrNATSAuth is matched by the error of a source whose server refused
	// its credentials. Retrying with the same configuration will not help.
	ErrNATSAuth = errors.New("the NATS server refused the credentials")
	// ErrNATSNotConnected is matched by errors of calls made while the
	// connection is down and reconnecting; they work again once it is back.
	// It is the ErrNotConnected of the JetStream buffers (pkg/isb/jetstream)
	// too.
	ErrNATSNotConnected = jsconsumer.ErrNotConnected
	// ErrNATSClosed is returned by calls on a closed source.
	ErrNATSClosed = errors.New("the NATS source is closed")
)

// NATSAuth is how a NATS or JetStream source authenticates; at most one of the
// three is set.
type NATSAuth struct {
	User, Password string // basic
	Token          string
	NKeySeed       string // the nkey seed (SU...) the user signs with
}

// DefaultNATSPort is the port of a NATS URL that gives none.
const DefaultNATSPort = "4222"

const (
	// natsDialTimeout bounds one attempt to reach a server.
	natsDialTimeout = 5 * time.Second
	// natsReconnectWait is the pause between reconnect attempts (nats.go
	// adds up to 100 ms of jitter).
	natsReconnectWait = 250 * time.Millisecond
	// natsConnName is the connection name the server shows.
	natsConnName = "sluice"
	// defaultNATSReadTimeout is the read timeout of a config that gives none.
	defaultNATSReadTimeout = time.Second
)

// natsConn is what connectNATS needs: the fields the two sources share.
type natsConn struct {
	kind string // "nats" or "jetstream", for errors
	url  string
	tls  *tls.Config
	auth NATSAuth
	log  *zap.Logger
}

// normalizeNATSURL turns a URL list as Numaflow accepts it — comma-separated,
// each nats://, tls://, ws:// or wss://, or a bare host or host:port — into
// one nats.go takes: a bare host becomes nats://host:4222, a host:port
// nats://host:port.
func normalizeNATSURL(urls string) (string, error) {
	var out []string
	for u := range strings.SplitSeq(urls, ",") {
		u = strings.TrimSpace(u)
		switch {
		case u == "":
			continue
		case strings.Contains(u, "://"):
		case isHostPort(u):
			u = "nats://" + u
		default:
			u = "nats://" + net.JoinHostPort(strings.Trim(u, "[]"), DefaultNATSPort)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return "", fmt.Errorf("%w: url is empty", ErrNATSConfig)
	}
	return strings.Join(out, ","), nil
}

// isHostPort reports whether s is host:port with a numeric port.
func isHostPort(s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil || port == "" {
		return false
	}
	return strings.Trim(port, "0123456789") == ""
}

// redactNATSURL returns urls with any password or token embedded in them
// replaced by "xxxxx", for errors and logs.
func redactNATSURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(p)
		switch {
		case err != nil:
			if strings.Contains(p, "@") {
				p = "<unparsable url with credentials>"
			}
		case u.User != nil:
			u.User = url.User("xxxxx") // a lone user part may be a token
			p = u.String()
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

// options returns the nats.go options of a's method, or an error naming the
// field at fault (never its value).
func (a NATSAuth) options() ([]nats.Option, error) {
	basic, token, nkey := a.User != "" || a.Password != "", a.Token != "", a.NKeySeed != ""
	if btoi(basic)+btoi(token)+btoi(nkey) > 1 {
		return nil, fmt.Errorf("%w: auth: at most one of basic (user and password), token and nkey may be set", ErrNATSConfig)
	}
	switch {
	case basic:
		return []nats.Option{nats.UserInfo(a.User, a.Password)}, nil
	case token:
		return []nats.Option{nats.Token(a.Token)}, nil
	case nkey:
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(a.NKeySeed)))
		if err != nil {
			return nil, fmt.Errorf("%w: auth.nkey: not an nkey seed: %w", ErrNATSConfig, err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("%w: auth.nkey: %w", ErrNATSConfig, err)
		}
		return []nats.Option{nats.Nkey(pub, kp.Sign)}, nil
	}
	return nil, nil
}

// method names a's method for errors.
func (a NATSAuth) method() string {
	switch {
	case a.User != "" || a.Password != "":
		return "auth.basic"
	case a.Token != "":
		return "auth.token"
	case a.NKeySeed != "":
		return "auth.nkey"
	}
	return "no auth configured"
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// connect connects to the server, reconnecting forever after a disconnect.
// Its errors name the URL (redacted) and match ErrNATSAuth when the server
// refuses the credentials; they never hold a secret.
func (c natsConn) connect(extra ...nats.Option) (*nats.Conn, error) {
	urls, err := normalizeNATSURL(c.url)
	if err != nil {
		return nil, err
	}
	auth, err := c.auth.options()
	if err != nil {
		return nil, err
	}
	log := c.log.With(zap.String("url", redactNATSURL(urls)))
	opts := append([]nats.Option{
		nats.Name(natsConnName),
		nats.Timeout(natsDialTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(natsReconnectWait),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS; reconnecting", zap.Error(err))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to NATS", zap.String("server", nc.ConnectedServerName()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("NATS asynchronous error", zap.String("subject", sub.Subject), zap.Error(err))
				return
			}
			log.Warn("NATS asynchronous error", zap.Error(err))
		}),
	}, auth...)
	if c.tls != nil {
		opts = append(opts, nats.Secure(c.tls.Clone()))
	}
	nc, err := nats.Connect(urls, append(opts, extra...)...)
	if err != nil {
		if isNATSAuthError(err) {
			return nil, fmt.Errorf("%s source: connect to %s: %w (%s): %w", c.kind, redactNATSURL(urls), ErrNATSAuth, c.auth.method(), err)
		}
		return nil, fmt.Errorf("%s source: connect to %s: %w", c.kind, redactNATSURL(urls), err)
	}
	return nc, nil
}

// isNATSAuthError reports whether err is the server refusing credentials.
func isNATSAuthError(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// natsHeaders returns the first value of each header in h, or nil when there
// are none.
func natsHeaders(h nats.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			out[k] = v[0]
		}
	}
	return out
}
