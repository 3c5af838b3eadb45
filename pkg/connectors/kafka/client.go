package kafka

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ClientConfig is what both the source and the sink connect with.
type ClientConfig struct {
	// Brokers are the bootstrap brokers, host:port.
	Brokers []string
	// TLS, when set, encrypts the connections; nil is plaintext, unless the
	// property security.protocol asks for ssl or sasl_ssl (then the system's
	// roots verify the brokers).
	TLS *tls.Config
	// SASL, when set, authenticates the connections.
	SASL *SASL
	// Properties are the flat librdkafka-style properties (see ParseProperties).
	Properties Properties
	// Logger receives the client's warnings and errors (its info lines too
	// when debug is enabled). nil logs nothing.
	Logger *zap.Logger
}

// SASL is how the client authenticates.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (OAUTH
	// is taken for OAUTHBEARER, as Numaflow does). GSSAPI is not supported.
	Mechanism string
	// User and Password are the credentials of PLAIN and SCRAM.
	User, Password string
	// OAuth is the token endpoint of OAUTHBEARER.
	OAuth *OAuth
}

// OAuth is an OAuth 2.0 client-credentials grant: the token for OAUTHBEARER is
// fetched from TokenEndpoint (https only) with ClientID and ClientSecret as
// HTTP basic credentials, and kept until shortly before it expires.
type OAuth struct {
	ClientID, ClientSecret, TokenEndpoint string
	// HTTPClient fetches the token (nil: a client with a 30s timeout and the
	// system's roots).
	HTTPClient *http.Client
}

// The SASL mechanisms, as SASL.Mechanism names them.
const (
	// MechanismPlain sends the user and the password (use it over TLS).
	MechanismPlain = "PLAIN"
	// MechanismScramSHA256 proves the password with SCRAM and SHA-256.
	MechanismScramSHA256 = "SCRAM-SHA-256"
	// MechanismScramSHA512 proves the password with SCRAM and SHA-512.
	MechanismScramSHA512 = "SCRAM-SHA-512"
	// MechanismOAuthBearer sends an OAuth 2.0 bearer token.
	MechanismOAuthBearer = "OAUTHBEARER"
)

// options returns the options every client of role has: the brokers, TLS,
// SASL, the client id and the logger, with the watch of its connections.
func (c *ClientConfig) options(role Role) ([]kgo.Opt, *connWatch, error) {
	if len(c.Brokers) == 0 {
		return nil, nil, configErr(role, "brokers", "", "is required")
	}
	for _, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			return nil, nil, configErr(role, "brokers", "", "must not hold an empty address")
		}
	}
	tlsCfg, mech, err := c.security(role)
	if err != nil {
		return nil, nil, err
	}
	watch := &connWatch{role: role, sasl: c.SASL}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ClientID("sluice-kafka-" + role.String()), kgo.WithHooks(watch)}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	if id, ok := c.Properties.get("client.id"); ok {
		opts = append(opts, kgo.ClientID(id))
	}
	if c.Logger != nil {
		opts = append(opts, kgo.WithLogger(kgoLogger{c.Logger.With(zap.String("kafka", role.String()))}))
	}
	return opts, watch, nil
}

// security reconciles the TLS and SASL given with security.protocol, and
// returns the TLS config and the SASL mechanism to use.
func (c *ClientConfig) security(role Role) (*tls.Config, sasl.Mechanism, error) {
	tlsCfg := c.TLS
	proto, set := c.Properties.get("security.protocol")
	proto = strings.ToLower(proto)
	field := "config property security.protocol"
	switch {
	case !set:
	case (proto == "plaintext" || proto == "sasl_plaintext") && c.TLS != nil:
		return nil, nil, configErr(role, field, proto, "contradicts the tls given")
	case (proto == "plaintext" || proto == "ssl") && c.SASL != nil:
		return nil, nil, configErr(role, field, proto, "contradicts the sasl given")
	case strings.HasPrefix(proto, "sasl_") && c.SASL == nil:
		return nil, nil, configErr(role, field, proto, "needs sasl (a mechanism and its credentials)")
	case (proto == "ssl" || proto == "sasl_ssl") && tlsCfg == nil:
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.SASL == nil {
		return tlsCfg, nil, nil
	}
	mech, err := c.SASL.mechanism(role)
	return tlsCfg, mech, err
}

// mechanism returns the franz-go mechanism of s. Errors never hold a secret.
func (s *SASL) mechanism(role Role) (sasl.Mechanism, error) {
	name := strings.ToUpper(strings.TrimSpace(s.Mechanism))
	switch name {
	case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
		if s.User == "" {
			return nil, configErr(role, "sasl user", "", "is required for "+name)
		}
		if s.Password == "" {
			return nil, configErr(role, "sasl password", "", "is required for "+name)
		}
	}
	switch name {
	case MechanismPlain:
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism(), nil
	case MechanismScramSHA256:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism(), nil
	case MechanismScramSHA512:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism(), nil
	case MechanismOAuthBearer, "OAUTH":
		src, err := newTokenSource(role, s.OAuth)
		if err != nil {
			return nil, err
		}
		return oauth.Oauth(src.auth), nil
	case "GSSAPI":
		return nil, configErr(role, "sasl mechanism", name, "is not supported (Kerberos); use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	case "":
		return nil, configErr(role, "sasl mechanism", "", "is required")
	}
	return nil, configErr(role, "sasl mechanism", s.Mechanism, "must be PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
}

// checkEndpoint reports whether raw is an https URL with a host.
func checkEndpoint(role Role, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return configErr(role, "sasl oauth tokenEndpoint", raw, "must be an https URL")
	}
	return nil
}

// millisOf returns the checked millisecond property name as a duration, or
// def when it is not set.
func (p Properties) millisOf(name string, def time.Duration) time.Duration {
	if _, ok := p.get(name); !ok {
		return def
	}
	return time.Duration(p.int(name, 0)) * time.Millisecond
}

// kgoLogger passes the client's log lines to zap: warnings and errors, and
// the informational lines (rebalances, connections) when debug is enabled.
type kgoLogger struct{ log *zap.Logger }

func (l kgoLogger) Level() kgo.LogLevel {
	if l.log.Core().Enabled(zapcore.DebugLevel) {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		fields = append(fields, zap.Any(fmt.Sprint(keyvals[i]), keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		l.log.Error(msg, fields...)
	case kgo.LogLevelWarn:
		l.log.Warn(msg, fields...)
	default:
		l.log.Debug(msg, fields...)
	}
}
