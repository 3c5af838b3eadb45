package jetstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCtx is a context for one test's calls, cancelled when it ends.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// connect returns a Conn to s (with its credentials), closed when the test
// ends; mod may change the config first.
func connect(t testing.TB, s *natstest.Server, mod func(*Config)) *Conn {
	t.Helper()
	cfg := Config{URL: s.URL, Logger: zaptest.NewLogger(t)}
	if mod != nil {
		mod(&cfg)
	}
	c, err := Connect(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// setup starts a server, connects and creates a buffer.
func setup(t testing.TB, spec BufferSpec, mod func(*Config)) (*natstest.Server, *Conn) {
	t.Helper()
	s := natstest.Start(t, natstest.Options{})
	c := connect(t, s, mod)
	if err := c.CreateBuffer(testCtx(t), spec); err != nil {
		t.Fatal(err)
	}
	return s, c
}

func spec(name string, maxLength int) BufferSpec {
	return BufferSpec{Name: name, MaxLength: maxLength, UsageLimit: 80}
}

func newWriter(t testing.TB, c *Conn, spec BufferSpec, from string) *Writer {
	t.Helper()
	w := c.Writer(spec, from)
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func newReader(t testing.TB, c *Conn, name string, readTimeout time.Duration) *Reader {
	t.Helper()
	r, err := c.Reader(name, readTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// messages returns n messages with ids prefix0, prefix1...
func messages(prefix string, n int) []isb.Message {
	out := make([]isb.Message, n)
	for i := range out {
		id := fmt.Sprintf("%s%d", prefix, i)
		out[i] = isb.Message{ID: id, Keys: []string{"k"}, Value: []byte("v-" + id), EventTime: time.Unix(1700000000, int64(i))}
	}
	return out
}

// write writes msgs and fails the test unless every one was stored.
func write(t testing.TB, w *Writer, msgs []isb.Message) {
	t.Helper()
	errs := make([]error, len(msgs))
	if err := w.Write(testCtx(t), msgs, errs); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("message %d (%s): %v", i, msgs[i].ID, err)
		}
	}
}

// readN reads with buffers of batch until it has n messages, failing the
// test after 10 s.
func readN(t testing.TB, r *Reader, n, batch int) []isb.ReadMessage {
	t.Helper()
	var out []isb.ReadMessage
	buf := make([]isb.ReadMessage, batch)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("read %d messages of %d in 10s", len(out), n)
		}
		k, err := r.Read(testCtx(t), buf[:min(batch, n-len(out))])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:k]...)
	}
	return out
}

func ack(t testing.TB, r *Reader, msgs []isb.ReadMessage) {
	t.Helper()
	if err := r.Ack(testCtx(t), msgs); err != nil {
		t.Fatal(err)
	}
}

func info(t testing.TB, c *Conn, name string) BufferInfo {
	t.Helper()
	bi, err := c.BufferInfo(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return bi
}

func ids(msgs []isb.ReadMessage) []string {
	out := make([]string, len(msgs))
	for i := range msgs {
		out[i] = msgs[i].ID
	}
	return out
}

// waitEmpty waits until the buffer holds no message.
func waitEmpty(t testing.TB, c *Conn, name string) {
	t.Helper()
	var bi BufferInfo
	runtest.WaitFor(t, "buffer "+name+" empty", func() bool {
		bi = info(t, c, name)
		return bi.Empty()
	}, runtest.Showing(func() string { return fmt.Sprintf("%+v", bi) }))
}
