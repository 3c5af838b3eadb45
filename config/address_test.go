package config

import (
	"errors"
	"strings"
	"testing"
)

// problems parses yaml with the schema's checks alone and returns its
// problems as strings, none when it is valid.
func problems(t *testing.T, yaml string) []string {
	t.Helper()
	_, err := Parse([]byte(yaml), nil)
	if err == nil {
		return nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse = %v; want an *Error", err)
	}
	var got []string
	for _, p := range ce.Problems {
		got = append(got, p.String())
	}
	return got
}

// wantProblems checks that got are the problems want, each one the start of
// its problem (the line number is left out of most).
func wantProblems(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("problem %d: %q; want it to start with %q", i, got[i], w)
		}
	}
}

// monoVertex is a MonoVertex with spec, indented under spec:.
func monoVertex(spec string) string {
	return "apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: mv\nspec:\n" + spec
}

// TestAddressPorts checks the port of every address and URL a vertex
// connects to: it is 1 to 65535, or, in a URL, left out for the scheme's
// default; one problem names the field, its value and what is wrong.
func TestAddressPorts(t *testing.T) {
	const gen, log = "  source:\n    generator: {}\n", "  sink:\n    log: {}\n"
	redis := func(store string) string {
		return monoVertex("  limits:\n    rateLimit:\n      max: 10\n      store:\n        redisStore:\n" + store + gen + log)
	}
	kafkaSink := func(brokers string) string {
		return monoVertex(gen + "  sink:\n    kafka:\n      brokers: [" + brokers + "]\n      topic: out\n")
	}
	nats := func(url string) string {
		return monoVertex("  source:\n    nats:\n      url: " + url + "\n      subject: in\n" + log)
	}
	httpSink := func(url string) string {
		return monoVertex(gen + "  sink:\n    http:\n      url: " + url + "\n")
	}
	pipelineISB := func(url string) string {
		return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
  isb:
    jetstream:
      url: ` + url + `
  vertices:
    - {name: in, source: {generator: {}}}
    - {name: out, sink: {log: {}}}
  edges:
    - {from: in, to: out}
`
	}
	const redisStore = "spec.limits.rateLimit.store.redisStore"
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"redis url", redis("          mode: single\n          url: redis://127.0.0.1:6379/2\n"), nil},
		{"redis url, default port", redis("          mode: single\n          url: redis://redis\n"), nil},
		{"redis url, port 99999", redis("          mode: single\n          url: redis://127.0.0.1:99999\n"),
			[]string{redisStore + `.url ("redis://127.0.0.1:99999"): port 99999 is out of range: a port to connect to is 1 to 65535 (line 12)`}},
		{"redis url, port 0", redis("          mode: single\n          url: rediss://[::1]:0\n"),
			[]string{redisStore + `.url ("rediss://[::1]:0"): port 0 is out of range: a port to connect to is 1 to 65535`}},
		{"sentinel endpoint, port 70000", redis("          mode: sentinel\n          sentinel:\n            masterName: m\n            endpoints: [s0:26379, \"s1:70000\"]\n"),
			[]string{redisStore + `.sentinel.endpoints[1] ("s1:70000"): port 70000 is out of range: a port to connect to is 1 to 65535`}},
		{"sentinel endpoint, port not a number", redis("          mode: sentinel\n          sentinel:\n            masterName: m\n            endpoints: [\"s0:redis\"]\n"),
			[]string{redisStore + `.sentinel.endpoints[0] ("s0:redis"): port "redis" is not a number: a port to connect to is 1 to 65535`}},
		{"cluster addr, a port too long for a number", redis("          mode: cluster\n          cluster:\n            addrs: [\"c0:6379\", \"c1:99999999999999999999999\"]\n"),
			[]string{redisStore + `.cluster.addrs[1] ("c1:99999999999999999999999"): port 99999999999999999999999 is out of range`}},
		{"kafka broker", kafkaSink("\"k0:9092\""), nil},
		{"kafka broker, port 65536", kafkaSink("\"k0:9092\", \"k1:65536\""),
			[]string{`spec.sink.kafka.brokers[1] ("k1:65536"): port 65536 is out of range: a port to connect to is 1 to 65535`}},
		{"kafka broker without a port", kafkaSink("\"k0\""), []string{`spec.sink.kafka.brokers[0] ("k0") must be host:port`}},
		{"oauth token endpoint, port 99999", monoVertex("  source:\n    kafka:\n      brokers: [\"k0:9092\"]\n      topic: in\n      consumerGroup: g\n" +
			"      sasl:\n        mechanism: OAUTHBEARER\n        oauth: {clientID: {file: /id}, clientSecret: {file: /secret}, tokenEndpoint: \"https://idp:99999/token\"}\n" + log),
			[]string{`spec.source.kafka.sasl.oauth.tokenEndpoint ("https://idp:99999/token"): port 99999 is out of range: a port to connect to is 1 to 65535`}},
		{"nats urls", nats("\"nats://n0:4222,n1,tls://n2:4443\""), nil},
		{"nats url, port 99999", nats("\"nats://n0:4222, n1:99999\""),
			[]string{`spec.source.nats.url ("nats://n0:4222, n1:99999"): port 99999 is out of range: a port to connect to is 1 to 65535`}},
		{"http sink", httpSink("https://example.com:8443/in"), nil},
		{"http sink, port 99999", httpSink("http://127.0.0.1:99999/in"),
			[]string{`spec.sink.http.url ("http://127.0.0.1:99999/in"): port 99999 is out of range: a port to connect to is 1 to 65535`}},
		{"jetstream isb", pipelineISB("nats://127.0.0.1:4222"), nil},
		{"jetstream isb, port 99999", pipelineISB("nats://127.0.0.1:99999"),
			[]string{`spec.isb.jetstream.url ("nats://127.0.0.1:99999"): port 99999 is out of range: a port to connect to is 1 to 65535`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantProblems(t, problems(t, tt.yaml), tt.want)
		})
	}
}

func TestParsePort(t *testing.T) {
	for _, tt := range []struct {
		in       string
		want     int
		err      string
		outRange bool // the error matches ErrPortRange
	}{
		{"0", 0, "", false},
		{"8080", 8080, "", false},
		{"65535", 65535, "", false},
		{"65536", 0, "port 65536 is out of range (at most 65535)", true},
		{"99999999999999999999", 0, "port 99999999999999999999 is out of range (at most 65535)", true},
		{"http", 0, `port "http" is not a number`, false},
		{"-1", 0, `port "-1" is not a number`, false},
		{"", 0, `port "" is not a number`, false},
	} {
		n, err := ParsePort(tt.in)
		switch {
		case tt.err == "" && (err != nil || n != tt.want):
			t.Errorf("ParsePort(%q) = %d, %v; want %d", tt.in, n, err, tt.want)
		case tt.err != "" && (err == nil || err.Error() != tt.err):
			t.Errorf("ParsePort(%q) = %d, %v; want %q", tt.in, n, err, tt.err)
		case errors.Is(err, ErrPortRange) != tt.outRange:
			t.Errorf("ParsePort(%q): errors.Is(%v, ErrPortRange) = %v", tt.in, err, !tt.outRange)
		}
	}
}
