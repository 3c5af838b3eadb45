package source

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

func TestNormalizeNATSURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"nats", "nats://nats:4222"},
		{"nats.example", "nats://nats.example:4222"},
		{"localhost:4333", "nats://localhost:4333"},
		{"10.0.0.1", "nats://10.0.0.1:4222"},
		{"::1", "nats://[::1]:4222"},
		{"[::1]:5000", "nats://[::1]:5000"},
		{"nats://a:1", "nats://a:1"},
		{"tls://a:1", "tls://a:1"},
		{"nats://a", "nats://a"}, // nats.go adds the port
		{"nats://u:p@a:1", "nats://u:p@a:1"},
		{" a:1 , b ,tls://c:3", "nats://a:1,nats://b:4222,tls://c:3"},
		{"a,,b", "nats://a:4222,nats://b:4222"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := normalizeNATSURL(c.in)
			if err != nil || got != c.want {
				t.Fatalf("normalizeNATSURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
		})
	}
	for _, bad := range []string{"", " ", ", ,"} {
		if _, err := normalizeNATSURL(bad); !errors.Is(err, ErrNATSConfig) || !strings.Contains(err.Error(), "url") {
			t.Errorf("normalizeNATSURL(%q) = %v, want an error naming url", bad, err)
		}
	}
}

func TestRedactNATSURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"nats://a:1", "nats://a:1"},
		{"nats://alice:s3cret@a:1", "nats://xxxxx@a:1"},
		{"nats://t0ken@a:1,nats://b:2", "nats://xxxxx@a:1,nats://b:2"},
	}
	for _, c := range cases {
		if got := redactNATSURL(c.in); got != c.want {
			t.Errorf("redactNATSURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRateGate(t *testing.T) {
	g := rateGate{every: 10 * time.Second}
	t0 := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []struct {
		at   time.Duration
		want bool
	}{{0, true}, {time.Second, false}, {9 * time.Second, false}, {10 * time.Second, true}, {15 * time.Second, false}, {21 * time.Second, true}}
	for _, s := range steps {
		if got := g.allow(t0.Add(s.at)); got != s.want {
			t.Fatalf("allow(t0+%v) = %v, want %v", s.at, got, s.want)
		}
	}
}

func TestNATSAuthOptions(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	cases := []struct {
		name    string
		auth    NATSAuth
		ok      bool
		method  string
		secrets []string
	}{
		{"none", NATSAuth{}, true, "no auth configured", nil},
		{"basic", NATSAuth{User: "alice", Password: "s3cret"}, true, "auth.basic", nil},
		{"token", NATSAuth{Token: "t0ken"}, true, "auth.token", nil},
		{"nkey", NATSAuth{NKeySeed: string(seed)}, true, "auth.nkey", nil},
		{"basic and token", NATSAuth{User: "alice", Password: "s3cret", Token: "t0ken"}, false, "", []string{"s3cret", "t0ken"}},
		{"token and nkey", NATSAuth{Token: "t0ken", NKeySeed: string(seed)}, false, "", []string{"t0ken", string(seed)}},
		{"bad seed", NATSAuth{NKeySeed: "SUnotaseed0123456789"}, false, "", []string{"SUnotaseed0123456789"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts, err := c.auth.options()
			if c.ok {
				if err != nil || c.auth.method() != c.method {
					t.Fatalf("options() = %v; method %q, want %q", err, c.auth.method(), c.method)
				}
				if c.auth != (NATSAuth{}) && len(opts) != 1 {
					t.Fatalf("%d options", len(opts))
				}
				return
			}
			if !errors.Is(err, ErrNATSConfig) || !strings.Contains(err.Error(), "auth") {
				t.Fatalf("options() = %v, want an error naming auth", err)
			}
			for _, s := range c.secrets {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("error %q holds the secret %q", err, s)
				}
			}
		})
	}
}
