package kafka

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Properties
		err  string
	}{
		{name: "empty", in: "", want: Properties{}},
		{name: "comments only", in: "# nothing\n\n  # here\n", want: Properties{}},
		{name: "flat", in: "auto.offset.reset: latest\nsession.timeout.ms: 30000\n", want: Properties{"auto.offset.reset": "latest", "session.timeout.ms": "30000"}},
		{
			name: "indented as in Numaflow's example, with comments and quotes",
			in:   "\n            max.poll.interval.ms: 100   # a comment\n            client.id: \"my client\"\n\n            linger.ms: '5'\n            ",
			want: Properties{"max.poll.interval.ms": "100", "client.id": "my client", "linger.ms": "5"},
		},
		{name: "value with a colon", in: "sasl.oauthbearer.token.endpoint.url: https://host/token\n", want: Properties{"sasl.oauthbearer.token.endpoint.url": "https://host/token"}},
		{name: "no value", in: "a: 1\nlinger.ms:\n", err: "line 2: linger.ms has no value"},
		{name: "nested", in: "a: 1\nb:\n  c: 2\n", err: "line 2: b: want a single value"},
		{name: "list", in: "a: [1, 2]\n", err: "line 1: a: want a single value"},
		{name: "duplicate", in: "a: 1\nb: 2\na: 3\n", err: "line 3: a is set again (first on line 1)"},
		{name: "not a mapping", in: "just words\n", err: "line 1: want one `key: value` per line"},
		{name: "properties style", in: "a=1\nb=2\n", err: "want one `key: value` per line"},
		{name: "bad yaml", in: "a: 1\n\tb: 2\n", err: "line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProperties(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("ParseProperties error = %v; want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("ParseProperties = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestPropertiesCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		role Role
		p    Properties
		err  string // "" for valid
	}{
		{"source defaults", RoleSource, Properties{}, ""},
		{"source all valid", RoleSource, Properties{
			"auto.offset.reset": "SMALLEST", "session.timeout.ms": "10000", "heartbeat.interval.ms": "3000",
			"client.id": "me", "fetch.max.bytes": "1048576", "max.partition.fetch.bytes": "65536",
			"fetch.wait.max.ms": "100", "fetch.min.bytes": "1", "partition.assignment.strategy": "range,roundrobin",
			"group.instance.id": "pod-0", "enable.auto.commit": "false", "request.timeout.ms": "30000",
			"security.protocol": "SASL_SSL", "max.poll.interval.ms": "300000", "auto.commit.interval.ms": "1000",
		}, ""},
		{"sink properties ignored by the source", RoleSource, Properties{"linger.ms": "nonsense"}, ""},
		{"offset reset", RoleSource, Properties{"auto.offset.reset": "middle"}, `kafka source: config property auto.offset.reset ("middle") must be one of earliest`},
		{"session timeout", RoleSource, Properties{"session.timeout.ms": "45s"}, `session.timeout.ms ("45s") must be a whole number of milliseconds`},
		{"heartbeat over session", RoleSource, Properties{"session.timeout.ms": "6000", "heartbeat.interval.ms": "6000"}, `heartbeat.interval.ms ("6000") must be less than session.timeout.ms (6000)`},
		{"heartbeat over default session", RoleSource, Properties{"heartbeat.interval.ms": "50000"}, "must be less than session.timeout.ms (45000)"},
		{"auto commit", RoleSource, Properties{"enable.auto.commit": "true"}, "sluice commits offsets itself"},
		{"strategy", RoleSource, Properties{"partition.assignment.strategy": "sticky"}, `partition.assignment.strategy ("sticky")`},
		{"strategy mix", RoleSource, Properties{"partition.assignment.strategy": "range,cooperative-sticky"}, "cooperative-sticky alone"},
		{"fetch too large", RoleSource, Properties{"fetch.max.bytes": "1000000000"}, "fetch.max.bytes"},
		{"security protocol", RoleSource, Properties{"security.protocol": "tls"}, `security.protocol ("tls") must be one of plaintext, ssl`},
		{"sink defaults", RoleSink, Properties{}, ""},
		{"sink all valid", RoleSink, Properties{
			"client.id": "me", "linger.ms": "0.5", "compression.type": "ZSTD", "acks": "all", "enable.idempotence": "true",
			"message.max.bytes": "2000000", "batch.size": "16384", "request.timeout.ms": "5000", "message.timeout.ms": "0",
		}, ""},
		{"source properties ignored by the sink", RoleSink, Properties{"enable.auto.commit": "true"}, ""},
		{"linger", RoleSink, Properties{"linger.ms": "-1"}, `kafka sink: config property linger.ms ("-1") must be a number of milliseconds`},
		{"compression", RoleSink, Properties{"compression.type": "brotli"}, `compression.type ("brotli") must be one of none, gzip`},
		{"acks", RoleSink, Properties{"acks": "2"}, `acks ("2") must be one of all, -1, 0, 1`},
		{"acks without idempotence", RoleSink, Properties{"acks": "1"}, ""},
		{"acks with idempotence", RoleSink, Properties{"acks": "1", "enable.idempotence": "true"}, "needs enable.idempotence: false"},
		{"delivery timeout", RoleSink, Properties{"message.timeout.ms": "10"}, "must be 0 (no limit)"},
		{"alias", RoleSink, Properties{"delivery.timeout.ms": "abc"}, `delivery.timeout.ms ("abc")`},
		{"alias contradiction", RoleSink, Properties{"linger.ms": "5", "queue.buffering.max.ms": "10"}, "same property"},
		{"alias agreement", RoleSink, Properties{"linger.ms": "5", "queue.buffering.max.ms": "5"}, ""},
		{"batch size", RoleSink, Properties{"batch.size": "10"}, `batch.size ("10") must be a whole number of bytes from 1000`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Check(tc.role)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Check = %v; want nil", err)
				}
				return
			}
			var ce *ConfigError
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Check = %v; want a ConfigError with %q", err, tc.err)
			}
		})
	}
}

func TestPropertiesUnknown(t *testing.T) {
	p := Properties{"linger.ms": "5", "session.timeout.ms": "6000", "socket.timeout.ms": "1", "client.id": "x", "enable.partition.eof": "false"}
	if got, want := p.Unknown(RoleSource), []string{"enable.partition.eof", "linger.ms", "socket.timeout.ms"}; !slices.Equal(got, want) {
		t.Fatalf("Unknown(source) = %v; want %v", got, want)
	}
	if got, want := p.Unknown(RoleSink), []string{"enable.partition.eof", "session.timeout.ms", "socket.timeout.ms"}; !slices.Equal(got, want) {
		t.Fatalf("Unknown(sink) = %v; want %v", got, want)
	}
}

func TestRoleText(t *testing.T) {
	for _, r := range []Role{RoleSource, RoleSink} {
		var got Role
		if err := got.UnmarshalText([]byte(r.String())); err != nil || got != r {
			t.Fatalf("UnmarshalText(%q) = %v, %v", r, got, err)
		}
	}
	var r Role
	if err := r.UnmarshalText([]byte("both")); err == nil {
		t.Fatal("UnmarshalText(both) succeeded")
	}
}

func TestSecurityProtocol(t *testing.T) {
	plainSASL := &SASL{Mechanism: "PLAIN", User: "u", Password: "secret-value"}
	for _, tc := range []struct {
		name    string
		cfg     ClientConfig
		tls     bool
		err     string
		noMatch string
	}{
		{name: "nothing", cfg: ClientConfig{}},
		{name: "ssl without tls uses the system roots", cfg: ClientConfig{Properties: Properties{"security.protocol": "ssl"}}, tls: true},
		{name: "sasl_ssl", cfg: ClientConfig{SASL: plainSASL, Properties: Properties{"security.protocol": "SASL_SSL"}}, tls: true},
		{name: "plaintext with sasl", cfg: ClientConfig{SASL: plainSASL, Properties: Properties{"security.protocol": "plaintext"}}, err: "contradicts the sasl given"},
		{name: "sasl_plaintext without sasl", cfg: ClientConfig{Properties: Properties{"security.protocol": "sasl_plaintext"}}, err: "needs sasl"},
		{name: "unknown mechanism", cfg: ClientConfig{SASL: &SASL{Mechanism: "MAGIC", User: "u", Password: "secret-value"}}, err: `sasl mechanism ("MAGIC") must be`, noMatch: "secret-value"},
		{name: "oauth without endpoint", cfg: ClientConfig{SASL: &SASL{Mechanism: "OAUTHBEARER", OAuth: &OAuth{ClientID: "id", ClientSecret: "secret-value"}}}, err: "tokenEndpoint", noMatch: "secret-value"},
		{name: "oauth over http", cfg: ClientConfig{SASL: &SASL{Mechanism: "OAUTHBEARER", OAuth: &OAuth{ClientID: "id", ClientSecret: "secret-value", TokenEndpoint: "http://h/t"}}}, err: "must be an https URL", noMatch: "secret-value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tlsCfg, _, err := tc.cfg.security(RoleSink)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("security = %v; want %q", err, tc.err)
				}
				if tc.noMatch != "" && strings.Contains(err.Error(), tc.noMatch) {
					t.Fatalf("error %q holds a secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tlsCfg != nil) != tc.tls {
				t.Fatalf("TLS = %v; want %v", tlsCfg != nil, tc.tls)
			}
		})
	}
}
