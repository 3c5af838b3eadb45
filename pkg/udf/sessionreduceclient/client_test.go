package sessionreduceclient_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sessionreducer"
	"github.com/sluiceflow/sluice/pkg/udf/sessionreduceclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counter counts a session's messages, and the values they carry after a
// colon ("x:3" adds 3); merged sessions add up.
type counter struct{ n atomic.Int64 }

func (c *counter) SessionReduce(_ context.Context, keys []string, in <-chan sessionreducer.Datum) sessionreducer.Messages {
	for d := range in {
		c.n.Add(1)
		if _, v, ok := strings.Cut(string(d.Value()), ":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			c.n.Add(n - 1)
		}
	}
	return sessionreducer.Messages{sessionreducer.NewMessage(strconv.AppendInt(nil, c.n.Load(), 10)).WithKeys(keys)}
}

func (c *counter) Accumulator(context.Context) []byte { return strconv.AppendInt(nil, c.n.Load(), 10) }

func (c *counter) MergeAccumulator(_ context.Context, acc []byte) {
	n, _ := strconv.ParseInt(string(acc), 10, 64)
	c.n.Add(n)
}

// start serves the counter in a new directory until stop or the test's
// end, and returns a client of it.
func start(t *testing.T) (c *sessionreduceclient.Client, stop func()) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sessionreduce")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := sessionreducer.NewServer(sessionreducer.CreatorFunc(func() sessionreducer.SessionReducer { return &counter{} }),
		sessionreducer.WithSocketDir(dir), sessionreducer.WithShutdownTimeout(100*time.Millisecond))
	go func() { done <- srv.Start(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	c = sessionreduceclient.New(dir, nil)
	t.Cleanup(func() {
		_ = c.Close()
		stop()
	})
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if err := c.Connect(cctx); err != nil {
		t.Fatal(err)
	}
	return c, stop
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func win(start, end int64, keys ...string) sessionreduceclient.KeyedWindow {
	return sessionreduceclient.KeyedWindow{Start: time.Unix(start, 0), End: time.Unix(end, 0), Keys: keys}
}

func message(keys []string, sec int64, value string) sessionreduceclient.Message {
	return sessionreduceclient.Message{Message: isb.Message{Keys: keys, Value: []byte(value), EventTime: time.Unix(sec, 0)}}
}

func describe(res []sessionreduceclient.Result) string {
	var out []string
	for _, r := range res {
		out = append(out, fmt.Sprintf("%s=%s@%d [%d,%d)", strings.Join(r.Keys, ","), r.Value, r.EventTime.UnixMilli(),
			r.Window.Start.Unix(), r.Window.End.Unix()))
	}
	return strings.Join(out, " ")
}

// TestReduce reduces whole sessions, one after another and side by side,
// on the one stream.
func TestReduce(t *testing.T) {
	c, _ := start(t)
	ctx := testContext(t)
	a := []string{"a"}
	res, err := c.Reduce(ctx, win(100, 115, "a"), []sessionreduceclient.Message{message(a, 100, "x"), message(a, 105, "y")})
	if err != nil || describe(res) != "a=2@114999 [100,115)" {
		t.Fatalf("Reduce = %q, %v", describe(res), err)
	}
	errs := make(chan error, 10)
	for i := range 10 {
		go func() {
			k := []string{fmt.Sprint("k", i)}
			in := make([]sessionreduceclient.Message, i+1)
			for j := range in {
				in[j] = message(k, int64(200+j), "v")
			}
			res, err := c.Reduce(ctx, win(200, int64(210+i), k[0]), in)
			if want := fmt.Sprintf("k%d=%d@%d [200,%d)", i, i+1, (210+i)*1000-1, 210+i); err == nil && describe(res) != want {
				err = fmt.Errorf("session of k%d: %q, want %q", i, describe(res), want)
			}
			errs <- err
		}()
	}
	for range 10 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestOperations opens, appends to, expands and merges sessions, and closes
// them: each session's results come back with its window.
func TestOperations(t *testing.T) {
	c, _ := start(t)
	ctx := testContext(t)
	a, b := []string{"a"}, []string{"b"}
	steps := []func() error{
		func() error { return c.Open(ctx, win(100, 110, "a"), message(a, 100, "x")) },
		func() error { return c.Append(ctx, win(100, 110, "a"), message(a, 104, "x")) },
		func() error { return c.Open(ctx, win(120, 130, "a"), message(a, 120, "x:10")) },
		func() error { return c.Open(ctx, win(100, 110, "b"), message(b, 100, "x")) },
		func() error { return c.Expand(ctx, win(100, 110, "a"), win(100, 118, "a"), message(a, 108, "x")) },
		func() error { return c.Expand(ctx, win(100, 118, "a"), win(100, 120, "a"), message(a, 110, "x")) },
		func() error { return c.Merge(ctx, win(100, 120, "a"), win(120, 130, "a")) },
		func() error { return c.Append(ctx, win(100, 130, "a"), message(a, 125, "x")) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	res, err := c.CloseSessions(ctx, win(100, 110, "b"), win(100, 130, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(res[0]) + " | " + describe(res[1]); got != "b=1@109999 [100,110) | a=15@129999 [100,130)" {
		t.Errorf("results %q", got)
	}
}

// TestStreamFails fails the operations waiting on a stream whose server
// stops, and a new server gets a new stream.
func TestStreamFails(t *testing.T) {
	c, stop := start(t)
	ctx := testContext(t)
	a := []string{"a"}
	if err := c.Open(ctx, win(100, 110, "a"), message(a, 100, "x")); err != nil {
		t.Fatal(err)
	}
	stop()
	_, err := c.CloseSessions(ctx, win(100, 110, "a"))
	if !errors.Is(err, sessionreduceclient.ErrStream) {
		t.Errorf("CloseSessions after the server stopped = %v; want ErrStream", err)
	}
	octx, ocancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer ocancel()
	if err := c.Open(octx, win(100, 110, "a"), message(a, 100, "x")); errors.Is(err, sessionreduceclient.ErrStream) || err == nil {
		t.Errorf("Open after the failure was told = %v; want a new stream's error, no server", err)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	if err := c.Open(ctx, win(100, 110, "a"), message(a, 100, "x")); !errors.Is(err, sessionreduceclient.ErrClosed) {
		t.Errorf("Open after Close = %v; want ErrClosed", err)
	}
}
