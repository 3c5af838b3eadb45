package jetstream

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
	"github.com/sluiceflow/sluice/internal/natstest"
)

func TestStorageText(t *testing.T) {
	for _, s := range []Storage{FileStorage, MemoryStorage} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Storage
		if err := got.UnmarshalText(b); err != nil || got != s {
			t.Fatalf("%v: %q -> %v, %v", s, b, got, err)
		}
	}
	var s Storage
	if err := s.UnmarshalText([]byte("disk")); err == nil || !strings.Contains(err.Error(), `"disk"`) {
		t.Fatalf("UnmarshalText(disk): %v", err)
	}
	if Storage(7).String() != "Storage(7)" {
		t.Fatal(Storage(7).String())
	}
	if _, err := Storage(7).MarshalText(); err == nil {
		t.Fatal("MarshalText of an unknown storage")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "url is empty"},
		{Config{URL: "nats://x", Token: "t", User: "u"}, "exclusive"},
		{Config{URL: "nats://x", Storage: 9}, "storage"},
		{Config{URL: "nats://x", AckWait: -time.Second}, "ackWait (-1s) < 0"},
		{Config{URL: "nats://x", AckWait: time.Millisecond}, "ackWait (1ms) < 100ms"},
		{Config{URL: "nats://x", DuplicateWindow: -time.Second}, "duplicateWindow (-1s) < 0"},
	}
	for _, c := range cases {
		_, err := c.cfg.validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	cfg, err := Config{URL: "nats://x"}.validate()
	if err != nil || cfg.AckWait != jsconsumer.DefaultAckWait || cfg.DuplicateWindow != DefaultDuplicateWindow || cfg.Name != DefaultConnName || cfg.Logger == nil {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
}

func TestRedactURL(t *testing.T) {
	cases := map[string]string{
		"nats://127.0.0.1:4222":                   "nats://127.0.0.1:4222",
		"nats://u:secret@h:4222":                  "nats://u:xxxxx@h:4222",
		"nats://secret@h:4222":                    "nats://xxxxx@h:4222",
		"nats://a:4222, nats://u:secret@b:4222":   "nats://a:4222,nats://u:xxxxx@b:4222",
		"nats://u:secret@h:4222/%zz":              "<unparsable url with credentials>",
		"tls://user:p%40ss@host.example:4443/abc": "tls://user:xxxxx@host.example:4443/abc",
	}
	for in, want := range cases {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// Good credentials connect; bad or missing ones fail with ErrAuth and an
// error that names the URL and no secret.
func TestConnectAuth(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		server    natstest.Options
		good, bad []func(*Config)
	}{
		{"user", natstest.Options{User: "alice", Password: "pw-s3cret"},
			[]func(*Config){func(c *Config) { c.User, c.Password = "alice", "pw-s3cret" }},
			[]func(*Config){
				func(c *Config) { c.User, c.Password = "alice", "wrong-s3cret" },
				func(c *Config) {},
				func(c *Config) { c.Token = "tok-s3cret" },
			}},
		{"token", natstest.Options{Token: "tok-s3cret"},
			[]func(*Config){func(c *Config) { c.Token = "tok-s3cret" }},
			[]func(*Config){
				func(c *Config) { c.Token = "wrong-s3cret" },
				func(c *Config) {},
				func(c *Config) { c.User, c.Password = "alice", "pw-s3cret" },
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := natstest.Start(t, tc.server)
			for _, mod := range tc.good {
				c := connect(t, s, mod)
				sp := spec("auth-0", 10)
				if err := c.CreateBuffer(testCtx(t), sp); err != nil {
					t.Fatal(err)
				}
				write(t, newWriter(t, c, sp, "up"), messages("m", 1))
			}
			for i, mod := range tc.bad {
				cfg := Config{URL: s.URL}
				mod(&cfg)
				c, err := Connect(testCtx(t), cfg)
				if err == nil {
					_ = c.Close()
					t.Fatalf("bad credentials %d: connected", i)
				}
				if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), s.URL) || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("bad credentials %d: %v; want ErrAuth naming %s without the secret", i, err, s.URL)
				}
			}
			// Credentials in the URL are not shown either.
			_, err := Connect(testCtx(t), Config{URL: strings.Replace(s.URL, "nats://", "nats://mallory:url-s3cret@", 1)})
			if !errors.Is(err, ErrAuth) || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "mallory:xxxxx@") {
				t.Fatalf("bad credentials in the URL: %v", err)
			}
		})
	}
}

func TestConnectUnreachable(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t, natstest.Options{})
	url := s.URL
	s.Stop()
	start := time.Now()
	_, err := Connect(testCtx(t), Config{URL: url})
	if err == nil || errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), url) {
		t.Fatalf("Connect to a stopped server: %v", err)
	}
	if since := time.Since(start); since > 5*time.Second {
		t.Fatalf("Connect took %v", since)
	}
}

func TestConnCloseTwice(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t, natstest.Options{})
	c := connect(t, s, nil)
	if !c.Connected() {
		t.Fatal("not connected")
	}
	for range 2 {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if c.Connected() {
		t.Fatal("connected after Close")
	}
	if err := c.CreateBuffer(testCtx(t), spec("x", 1)); err == nil {
		t.Fatal("CreateBuffer after Close")
	}
}
