package source_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// natsCtx is a context for one test's calls, cancelled when it ends.
func natsCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newNATS starts a NATS source on s (its credentials applied unless cfg
// has its own), closed when the test ends.
func newNATS(t testing.TB, s *natstest.Server, cfg source.NATSConfig) *source.NATS {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = s.URL
	}
	if cfg.Subject == "" {
		cfg.Subject = "in"
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t)
	}
	n, err := source.NewNATS(cfg)
	if err != nil {
		t.Fatalf("NewNATS: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// publish publishes n messages "<prefix><i>" to subject, each with the
// headers X-I: i and X-Two: first, second, and waits until the server has
// them.
func publish(t testing.TB, nc *nats.Conn, subject, prefix string, n int) {
	t.Helper()
	for i := range n {
		m := nats.NewMsg(subject)
		m.Data = fmt.Appendf(nil, "%s%d", prefix, i)
		m.Header.Set("X-I", fmt.Sprint(i))
		m.Header["X-Two"] = []string{"first", "second"}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// pendingIs waits until r's Pending is want.
func pendingIs(t testing.TB, r interface {
	Pending(context.Context) (int64, error)
}, want int64) {
	t.Helper()
	var got int64
	var err error
	runtest.WaitFor(t, fmt.Sprintf("Pending = %d", want), func() bool {
		got, err = r.Pending(natsCtx(t))
		return err == nil && got == want
	})
}

// readBatch reads once into a buffer of size n and checks that Read kept to it.
func readBatch(t testing.TB, r isb.Reader, n int) []isb.ReadMessage {
	t.Helper()
	buf := make([]isb.ReadMessage, n, n+1)
	got, err := r.Read(natsCtx(t), buf)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if got > n {
		t.Fatalf("Read returned %d messages into a buffer of %d", got, n)
	}
	return buf[:got]
}

// values returns the values of msgs.
func values(msgs []isb.ReadMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Value)
	}
	return out
}

// names returns "<prefix>0" to "<prefix><n-1>".
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func TestNATSReadBatches(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t, natstest.Options{})
	src := newNATS(t, s, source.NATSConfig{Buffer: 100})
	before := time.Now()
	publish(t, s.Connect(t), "in", "m", 25)
	pendingIs(t, src, 25)

	var got []isb.ReadMessage
	for _, want := range []int{10, 10, 5} {
		b := readBatch(t, src, 10)
		if len(b) != want {
			t.Fatalf("read %d, want %d", len(b), want)
		}
		got = append(got, b...)
	}
	if v := values(got); !slices.Equal(v, names("m", 25)) {
		t.Fatalf("values %v", v)
	}
	ids := map[string]bool{}
	for i, m := range got {
		if m.Keys != nil || ids[m.ID] || m.ID == "" {
			t.Fatalf("message %d: keys %v, id %q (seen: %v)", i, m.Keys, m.ID, ids[m.ID])
		}
		ids[m.ID] = true
		if m.EventTime.Before(before) || m.EventTime.After(time.Now()) {
			t.Fatalf("message %d: event time %v not its receive time", i, m.EventTime)
		}
		if want := map[string]string{"X-I": fmt.Sprint(i), "X-Two": "first"}; !equalMaps(m.Headers, want) {
			t.Fatalf("message %d: headers %v, want %v", i, m.Headers, want)
		}
	}
	if err := src.Ack(natsCtx(t), got); err != nil {
		t.Fatal(err)
	}
	if n, err := src.Read(natsCtx(t), nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v", n, err)
	}
	pendingIs(t, src, 0)
	if d := src.Dropped(); d != 0 {
		t.Fatalf("Dropped = %d", d)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Sources in one queue group share the messages: each goes to one of them.
// Without a queue group each gets them all.
func TestNATSQueueGroup(t *testing.T) {
	t.Parallel()
	const n = 200
	s := natstest.Start(t, natstest.Options{})
	for _, queue := range []string{"q", ""} {
		t.Run("queue="+queue, func(t *testing.T) {
			subject := "in.q" + queue
			a := newNATS(t, s, source.NATSConfig{Subject: subject, Queue: queue})
			b := newNATS(t, s, source.NATSConfig{Subject: subject, Queue: queue})
			publish(t, s.Connect(t), subject, "m", n)
			want := n
			if queue == "" {
				want = 2 * n
			}
			seen := map[string]int{}
			total := 0
			runtest.WaitFor(t, fmt.Sprintf("%d messages read", want), func() bool {
				for _, src := range []*source.NATS{a, b} {
					for _, m := range readBatch(t, src, 7) {
						seen[string(m.Value)]++
						total++
					}
				}
				return total >= want
			})
			if total != want || len(seen) != n {
				t.Fatalf("read %d messages, %d distinct; want %d, %d", total, len(seen), want, n)
			}
			for v, c := range seen {
				if c != want/n {
					t.Fatalf("%s read %d times", v, c)
				}
			}
		})
	}
}

// A full buffer drops what is received, counts it, and warns once.
func TestNATSBufferFull(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t, natstest.Options{})
	core, logs := observer.New(zapcore.WarnLevel)
	src := newNATS(t, s, source.NATSConfig{Buffer: 5, Logger: zap.New(core)})
	publish(t, s.Connect(t), "in", "m", 20)
	runtest.WaitFor(t, "15 dropped", func() bool { return src.Dropped() == 15 })
	pendingIs(t, src, 5)
	if v := values(readBatch(t, src, 100)); !slices.Equal(v, names("m", 5)) {
		t.Fatalf("read %v, want the first 5", v)
	}
	warns := logs.FilterMessageSnippet("dropping").All()
	if len(warns) != 1 {
		t.Fatalf("%d warnings about dropped messages, want 1 (at most one per 10s): %v", len(warns), warns)
	}
	// Room again: messages are held again.
	publish(t, s.Connect(t), "in", "n", 3)
	pendingIs(t, src, 3)
	if src.Dropped() != 15 {
		t.Fatalf("Dropped = %d", src.Dropped())
	}
}

// A Read with nothing to read waits the read timeout, or until ctx is done,
// and returns nothing; one waiting returns as soon as a message comes.
func TestNATSReadWaits(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	s := natstest.Start(t, natstest.Options{})
	src := newNATS(t, s, source.NATSConfig{ReadTimeout: timeout})
	start := time.Now()
	if got := readBatch(t, src, 10); len(got) != 0 {
		t.Fatalf("read %d", len(got))
	}
	if d := time.Since(start); d < timeout || d > timeout+time.Second {
		t.Fatalf("an empty Read took %v, want about %v", d, timeout)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if n, err := src.Read(ctx, make([]isb.ReadMessage, 1)); n != 0 || err != nil || time.Since(start) > timeout/2 {
		t.Fatalf("Read with a done ctx = %d, %v after %v", n, err, time.Since(start))
	}

	long := newNATS(t, s, source.NATSConfig{Subject: "slow", ReadTimeout: 20 * time.Second})
	done := make(chan []isb.ReadMessage, 1)
	go func() {
		buf := make([]isb.ReadMessage, 10)
		n, _ := long.Read(context.Background(), buf)
		done <- buf[:n]
	}()
	publish(t, s.Connect(t), "slow", "m", 1)
	select {
	case got := <-done:
		if len(got) != 1 {
			t.Fatalf("read %d", len(got))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Read did not return when a message came")
	}
}

func TestNATSClose(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t, natstest.Options{})
	src := newNATS(t, s, source.NATSConfig{})
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Read(natsCtx(t), make([]isb.ReadMessage, 1)); !errors.Is(err, source.ErrNATSClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
}

// URLs as Numaflow takes them: host:port without a scheme, and lists.
func TestNATSURLForms(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t, natstest.Options{})
	for _, url := range []string{s.Addr, "nats://127.0.0.1:1, " + s.Addr} {
		t.Run(url, func(t *testing.T) {
			src := newNATS(t, s, source.NATSConfig{URL: url, Subject: "u"})
			publish(t, s.Connect(t), "u", "m", 1)
			pendingIs(t, src, 1)
		})
	}
}

// userSeed returns the seed of a new user nkey.
func userSeed(t testing.TB) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return string(seed)
}

// authCase is a server's auth with good and wrong credentials for it.
type authCase struct {
	name        string
	server      natstest.Options
	good, wrong source.NATSAuth
	method      string
	secrets     []string // what no error may show
}

func authCases(t *testing.T) []authCase {
	seed, other := userSeed(t), userSeed(t)
	return []authCase{
		{"basic", natstest.Options{User: "alice", Password: "s3cret"},
			source.NATSAuth{User: "alice", Password: "s3cret"}, source.NATSAuth{User: "alice", Password: "wr0ng"},
			"auth.basic", []string{"s3cret", "wr0ng"}},
		{"token", natstest.Options{Token: "t0ken"},
			source.NATSAuth{Token: "t0ken"}, source.NATSAuth{Token: "wr0ng"}, "auth.token", []string{"t0ken", "wr0ng"}},
		{"nkey", natstest.Options{NKeySeed: seed},
			source.NATSAuth{NKeySeed: seed}, source.NATSAuth{NKeySeed: other}, "auth.nkey", []string{seed, other}},
	}
}

func TestNATSAuth(t *testing.T) {
	t.Parallel()
	for _, c := range authCases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := natstest.Start(t, c.server)
			src := newNATS(t, s, source.NATSConfig{Auth: c.good})
			publish(t, s.Connect(t), "in", "m", 1)
			pendingIs(t, src, 1)
			for name, auth := range map[string]source.NATSAuth{"wrong": c.wrong, "none": {}} {
				_, err := source.NewNATS(source.NATSConfig{URL: s.URL, Subject: "in", Auth: auth})
				if !errors.Is(err, source.ErrNATSAuth) {
					t.Fatalf("%s credentials: %v, want ErrNATSAuth", name, err)
				}
				if name == "wrong" && !strings.Contains(err.Error(), c.method) {
					t.Fatalf("error %q does not name %s", err, c.method)
				}
				t.Logf("%s credentials: %v", name, err)
				for _, secret := range c.secrets {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("error %q shows a secret", err)
					}
				}
			}
		})
	}
}

func TestNATSConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		cfg   source.NATSConfig
		field string
	}{
		{"no url", source.NATSConfig{Subject: "in"}, "url"},
		{"no subject", source.NATSConfig{URL: "nats://127.0.0.1:1"}, "subject"},
		{"negative buffer", source.NATSConfig{URL: "nats://127.0.0.1:1", Subject: "in", Buffer: -1}, "buffer"},
		{"two auths", source.NATSConfig{URL: "nats://127.0.0.1:1", Subject: "in",
			Auth: source.NATSAuth{Token: "t0ken", User: "u", Password: "p4ss"}}, "auth"},
		{"bad seed", source.NATSConfig{URL: "nats://127.0.0.1:1", Subject: "in",
			Auth: source.NATSAuth{NKeySeed: "SUAnotaseed"}}, "auth.nkey"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := source.NewNATS(c.cfg)
			if !errors.Is(err, source.ErrNATSConfig) || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("NewNATS = %v, want an error naming %s", err, c.field)
			}
			for _, secret := range []string{"t0ken", "p4ss", "SUAnotaseed"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q shows a secret", err)
				}
			}
		})
	}
	// A server that is not there: the error names the URL, not its password.
	_, err := source.NewNATS(source.NATSConfig{URL: "nats://alice:s3cret@127.0.0.1:1", Subject: "in"})
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("NewNATS to nowhere = %v", err)
	}
}

// Reads from many goroutines never return a message twice.
func TestNATSConcurrentReads(t *testing.T) {
	t.Parallel()
	const n = 500
	s := natstest.Start(t, natstest.Options{})
	src := newNATS(t, s, source.NATSConfig{})
	publish(t, s.Connect(t), "in", "m", n)
	pendingIs(t, src, n)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			buf := make([]isb.ReadMessage, 9)
			for {
				got, err := src.Read(context.Background(), buf)
				if err != nil || got == 0 {
					if err != nil {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				for _, m := range buf[:got] {
					if seen[m.ID] {
						t.Errorf("%s read twice", m.ID)
					}
					seen[m.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("read %d, want %d", len(seen), n)
	}
}
