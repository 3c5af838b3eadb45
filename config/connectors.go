package config

import (
	"fmt"
	"net/url"
	"strings"
)

// KafkaSource reads a Kafka topic in a consumer group (Numaflow's
// source.kafka).
type KafkaSource struct {
	Brokers []string `yaml:"brokers"`
	// Topic is a topic, or several separated by commas.
	Topic         string `yaml:"topic"`
	ConsumerGroup string `yaml:"consumerGroup"`
	TLS           *TLS   `yaml:"tls"`
	// Config is the flat client configuration: one librdkafka-style
	// `key: value` per line.
	Config string `yaml:"config"`
	SASL   *SASL  `yaml:"sasl"`
	// KafkaVersion is Numaflow's; sluice's client negotiates the version with
	// the brokers and ignores it.
	KafkaVersion string `yaml:"kafkaVersion"`
}

// KafkaSink writes to a Kafka topic (Numaflow's sink.kafka).
type KafkaSink struct {
	Brokers []string `yaml:"brokers"`
	Topic   string   `yaml:"topic"`
	// SetKey makes the message's keys the record's key.
	SetKey bool   `yaml:"setKey"`
	TLS    *TLS   `yaml:"tls"`
	Config string `yaml:"config"`
	SASL   *SASL  `yaml:"sasl"`
}

// SASL is how a Kafka client authenticates: a mechanism and its block.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (GSSAPI
	// is Numaflow's too, not sluice's).
	Mechanism   *string     `yaml:"mechanism"`
	GSSAPI      Unsupported `yaml:"gssapi"`
	Plain       *SASLPlain  `yaml:"plain"`
	SCRAMSHA256 *SASLPlain  `yaml:"scramsha256"`
	SCRAMSHA512 *SASLPlain  `yaml:"scramsha512"`
	OAuth       *SASLOAuth  `yaml:"oauth"`
}

// Block returns the name of the block that configures the SASL mechanism, and
// that block when it is a user and a password (PLAIN and SCRAM); ok is false
// for a mechanism sluice does not speak.
func (s *SASL) Block() (name string, plain *SASLPlain, ok bool) {
	if s.Mechanism == nil {
		return "", nil, false
	}
	switch *s.Mechanism {
	case "PLAIN":
		return "plain", s.Plain, true
	case "SCRAM-SHA-256":
		return "scramsha256", s.SCRAMSHA256, true
	case "SCRAM-SHA-512":
		return "scramsha512", s.SCRAMSHA512, true
	case "OAUTHBEARER":
		return "oauth", nil, true
	}
	return "", nil, false
}

// SASLPlain is a user and a password from secrets.
type SASLPlain struct {
	UserSecret     *SecretKeySelector `yaml:"userSecret"`
	PasswordSecret *SecretKeySelector `yaml:"passwordSecret"`
	// Handshake is Numaflow's; the client always sends the SASL handshake.
	Handshake bool `yaml:"handshake"`
}

// SASLOAuth gets OAUTHBEARER tokens from a token endpoint with the client
// credentials grant.
type SASLOAuth struct {
	ClientID      *SecretKeySelector `yaml:"clientID"`
	ClientSecret  *SecretKeySelector `yaml:"clientSecret"`
	TokenEndpoint string             `yaml:"tokenEndpoint"`
}

// NatsSource subscribes to a NATS subject, at most once (Numaflow's
// source.nats).
type NatsSource struct {
	URL     string    `yaml:"url"`
	Subject string    `yaml:"subject"`
	Queue   string    `yaml:"queue"`
	TLS     *TLS      `yaml:"tls"`
	Auth    *NatsAuth `yaml:"auth"`
}

// JetStreamSource reads a JetStream stream through a durable pull consumer,
// at least once (Numaflow's source.jetstream).
type JetStreamSource struct {
	URL    string `yaml:"url"`
	Stream string `yaml:"stream"`
	// Consumer is an existing durable consumer to read through; unset, the
	// vertex keeps a durable of its own.
	Consumer string `yaml:"consumer"`
	// DeliverPolicy is where a new consumer starts: all (default), last, new,
	// last_per_subject, by_start_sequence N or by_start_time T (a
	// jsconsumer.DeliverFrom's text).
	DeliverPolicy  string    `yaml:"deliver_policy"`
	FilterSubjects []string  `yaml:"filter_subjects"`
	TLS            *TLS      `yaml:"tls"`
	Auth           *NatsAuth `yaml:"auth"`
}

// NatsAuth is one way to authenticate to NATS: basic, token or nkey.
type NatsAuth struct {
	Basic *BasicAuth         `yaml:"basic"`
	Token *SecretKeySelector `yaml:"token"`
	// NKey is the secret holding the user's nkey seed.
	NKey *SecretKeySelector `yaml:"nkey"`
}

// BasicAuth is a user and a password from secrets.
type BasicAuth struct {
	User     *SecretKeySelector `yaml:"user"`
	Password *SecretKeySelector `yaml:"password"`
}

// HTTPSink calls an HTTP endpoint with each message, or with each batch
// (sluice's addition).
type HTTPSink struct {
	URL string `yaml:"url"`
	// Method is the request method (default POST).
	Method string `yaml:"method"`
	// Headers are sent with every request.
	Headers map[string]string `yaml:"headers"`
	// HeaderSecrets are headers whose values are read from secrets, such as
	// Authorization.
	HeaderSecrets map[string]*SecretKeySelector `yaml:"headerSecrets"`
	// Batch sends each batch in one request, as a JSON array, instead of a
	// request per message.
	Batch bool `yaml:"batch"`
	// Timeout bounds each request (default 10s).
	Timeout *Duration `yaml:"timeout"`
	// Concurrency is how many requests of a batch are in flight at once
	// (default 16; one request per message only).
	Concurrency *int32 `yaml:"concurrency"`
	// MaxRetryAfter caps the wait a Retry-After asks for (default 5m).
	MaxRetryAfter *Duration `yaml:"maxRetryAfter"`
	TLS           *TLS      `yaml:"tls"`
}

func (c *checker) kafkaSource(path string, k *KafkaSource) {
	c.kafkaClient(path, k.Brokers, k.TLS, k.SASL)
	if strings.Trim(k.Topic, ", ") == "" {
		c.required(path + ".topic")
	}
	if k.ConsumerGroup == "" {
		c.required(path + ".consumerGroup")
	}
}

func (c *checker) kafkaSink(path string, k *KafkaSink) {
	c.kafkaClient(path, k.Brokers, k.TLS, k.SASL)
	switch {
	case k.Topic == "":
		c.required(path + ".topic")
	case strings.Contains(k.Topic, ","):
		c.add(path+".topic", "(%q) names one topic", k.Topic)
	}
}

func (c *checker) kafkaClient(path string, brokers []string, t *TLS, s *SASL) {
	if len(brokers) == 0 {
		c.required(path + ".brokers")
	}
	for i, b := range brokers {
		c.hostPort(fmt.Sprintf("%s.brokers[%d]", path, i), b)
	}
	if t != nil {
		c.tls(path+".tls", t)
	}
	if s != nil {
		c.sasl(path+".sasl", s)
	}
}

func (c *checker) sasl(path string, s *SASL) {
	if s.GSSAPI.IsSet() {
		c.add(path+".gssapi", "GSSAPI (Kerberos) is not supported by sluice; use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	}
	if s.Mechanism == nil {
		c.required(path + ".mechanism")
		return
	}
	block, plain, ok := s.Block()
	if !ok {
		if *s.Mechanism != "GSSAPI" || !s.GSSAPI.IsSet() {
			c.add(path+".mechanism", "(%q) must be PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", *s.Mechanism)
		}
		return
	}
	blocks := map[string]bool{"plain": s.Plain != nil, "scramsha256": s.SCRAMSHA256 != nil,
		"scramsha512": s.SCRAMSHA512 != nil, "oauth": s.OAuth != nil}
	if !blocks[block] {
		c.add(path+"."+block, "is required with mechanism %s", *s.Mechanism)
	}
	for _, b := range sortedKeys(blocks) {
		if blocks[b] && b != block {
			c.add(path+"."+b, "is not used with mechanism %s; remove it", *s.Mechanism)
		}
	}
	if plain != nil {
		c.secretRequired(path+"."+block+".userSecret", plain.UserSecret)
		c.secretRequired(path+"."+block+".passwordSecret", plain.PasswordSecret)
	}
	if o := s.OAuth; o != nil && block == "oauth" {
		c.secretRequired(path+".oauth.clientID", o.ClientID)
		c.secretRequired(path+".oauth.clientSecret", o.ClientSecret)
		if u, err := url.Parse(o.TokenEndpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			c.add(path+".oauth.tokenEndpoint", "(%q) must be an https:// URL", o.TokenEndpoint)
		} else {
			c.urlPort(path+".oauth.tokenEndpoint", o.TokenEndpoint, u)
		}
	}
}

// secretRequired checks a secret that must be given.
func (c *checker) secretRequired(path string, s *SecretKeySelector) {
	if s == nil {
		c.required(path)
		return
	}
	c.secret(path, s)
}

// tls checks that a TLS block's secrets are well formed and that a client
// certificate comes with its key.
func (c *checker) tls(path string, t *TLS) {
	for name, s := range map[string]*SecretKeySelector{"caCertSecret": t.CACertSecret, "certSecret": t.CertSecret, "keySecret": t.KeySecret} {
		if s != nil {
			c.secret(path+"."+name, s)
		}
	}
	switch {
	case t.CertSecret != nil && t.KeySecret == nil:
		c.add(path+".keySecret", "is required with certSecret")
	case t.CertSecret == nil && t.KeySecret != nil:
		c.add(path+".certSecret", "is required with keySecret")
	}
}

func (c *checker) natsSource(path string, n *NatsSource) {
	c.natsURL(path+".url", n.URL)
	if n.Subject == "" {
		c.required(path + ".subject")
	}
	c.natsConn(path, n.TLS, n.Auth)
}

func (c *checker) jetStreamSource(path string, j *JetStreamSource) {
	c.natsURL(path+".url", j.URL)
	if j.Stream == "" {
		c.required(path + ".stream")
	}
	for i, s := range j.FilterSubjects {
		if s == "" {
			c.add(fmt.Sprintf("%s.filter_subjects[%d]", path, i), "must not be empty")
		}
	}
	c.natsConn(path, j.TLS, j.Auth)
}

// natsURL checks a NATS URL as Numaflow takes it: nats://, tls:// or a bare
// host[:port], several separated by commas.
func (c *checker) natsURL(path, s string) {
	if s == "" {
		c.required(path)
		return
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if !strings.Contains(part, "://") {
			part = "nats://" + part
		}
		u, err := url.Parse(part)
		if err != nil || u.Hostname() == "" || (u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss") {
			c.add(path, "(%q) must be nats://host:port, tls://host:port or host[:port]", s)
			return
		}
		if !c.urlPort(path, s, u) {
			return
		}
	}
}

func (c *checker) natsConn(path string, t *TLS, a *NatsAuth) {
	if t != nil {
		c.tls(path+".tls", t)
	}
	if a == nil {
		return
	}
	var set []string
	if a.Basic != nil {
		set = append(set, "basic")
		c.secretRequired(path+".auth.basic.user", a.Basic.User)
		c.secretRequired(path+".auth.basic.password", a.Basic.Password)
	}
	if a.Token != nil {
		set = append(set, "token")
		c.secret(path+".auth.token", a.Token)
	}
	if a.NKey != nil {
		set = append(set, "nkey")
		c.secret(path+".auth.nkey", a.NKey)
	}
	switch {
	case len(set) == 0:
		c.add(path+".auth", "set one of basic, token or nkey")
	case len(set) > 1:
		c.add(path+".auth", "sets %s; set one", strings.Join(set, " and "))
	}
}

func (c *checker) httpSink(path string, h *HTTPSink) {
	if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.add(path+".url", "(%q) must be an http:// or https:// URL", h.URL)
	} else {
		c.urlPort(path+".url", h.URL, u)
	}
	switch strings.ToUpper(h.Method) {
	case "", "POST", "PUT", "PATCH":
	default:
		c.add(path+".method", "(%q) must be POST, PUT or PATCH", h.Method)
	}
	for _, name := range sortedKeys(h.HeaderSecrets) {
		if _, dup := h.Headers[name]; dup {
			c.add(path+".headerSecrets."+name, "is also set under headers; set it once")
		}
		if s := h.HeaderSecrets[name]; s == nil {
			c.required(path + ".headerSecrets." + name)
		} else {
			c.secret(path+".headerSecrets."+name, s)
		}
	}
	if h.Timeout != nil && h.Timeout.Duration <= 0 {
		c.add(path+".timeout", "(%v) must be positive", h.Timeout.Duration)
	}
	if h.MaxRetryAfter != nil && h.MaxRetryAfter.Duration <= 0 {
		c.add(path+".maxRetryAfter", "(%v) must be positive", h.MaxRetryAfter.Duration)
	}
	if h.Concurrency != nil && *h.Concurrency < 1 {
		c.add(path+".concurrency", "(%d) must be at least 1", *h.Concurrency)
	}
	if h.TLS != nil {
		c.tls(path+".tls", h.TLS)
	}
}
