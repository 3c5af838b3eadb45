package sessionreduce_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/sdk/sessionreducer"
	"github.com/sluiceflow/sluice/pkg/udf/sessionreduce"
	"github.com/sluiceflow/sluice/pkg/udsconn"
)

// hanging takes a session's messages and, while stuck, never answers it.
type hanging struct {
	stuck   *atomic.Bool
	got     chan struct{}
	release chan struct{}
}

func (h hanging) SessionReduce(ctx context.Context, keys []string, in <-chan sessionreducer.Datum) sessionreducer.Messages {
	for range in {
	}
	h.got <- struct{}{}
	if h.stuck.Load() {
		select {
		case <-ctx.Done():
		case <-h.release:
		}
	}
	return sessionreducer.Messages{sessionreducer.NewMessage([]byte("done")).WithKeys(keys)}
}

func (hanging) Accumulator(context.Context) []byte       { return nil }
func (hanging) MergeAccumulator(context.Context, []byte) {}

// A session reduce server that takes a session's close and never answers
// it: the close is warned about at 5s and abandoned at the deadline with an
// error naming the function and the deadline; the stream fails (its
// sessions are sent again by the caller) and the function is stuck until a
// session is answered, on a new stream.
func TestStuckSessionCloseIsAbandoned(t *testing.T) {
	dir, err := os.MkdirTemp("", "sessionreduce")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var stuck atomic.Bool
	stuck.Store(true)
	h := hanging{stuck: &stuck, got: make(chan struct{}, 10), release: make(chan struct{})}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	srv := sessionreducer.NewServer(sessionreducer.CreatorFunc(func() sessionreducer.SessionReducer { return h }),
		sessionreducer.WithSocketDir(dir), sessionreducer.WithShutdownTimeout(100*time.Millisecond))
	go func() { served <- srv.Start(sctx) }()
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewManual(start)
	calls := udsconn.NewCalls(time.Minute, clk)
	core, logs := observer.New(zapcore.InfoLevel)
	c := sessionreduce.New(dir, zap.New(core), udsconn.WithCalls(calls))
	t.Cleanup(func() {
		close(h.release)
		_ = c.Close()
		stop()
		<-served
	})
	ctx := testContext(t)
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	w := win(10, 20, "k")
	if err := c.Open(ctx, w, message([]string{"k"}, 10, "a")); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(ctx, w, message([]string{"k"}, 11, "b")); err != nil {
		t.Fatal(err)
	}
	if o := calls.Oldest(); len(o) != 0 {
		t.Fatalf("Oldest = %+v; operations sent are no calls outstanding", o)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.CloseSessions(ctx, w)
		done <- err
	}()
	<-h.got
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Set(start.Add(5 * time.Second))
	warns := logs.FilterMessage("a call to the UDF server is outstanding").All()
	if len(warns) != 1 {
		t.Fatalf("%d warnings at 5s; want 1", len(warns))
	}
	if f := warns[0].ContextMap(); f["function"] != "sessionreducer" || f["call"] != "SessionReduceFn CLOSE" || f["messages"] != int64(1) {
		t.Errorf("the warning says %v", f)
	}
	if o := calls.Oldest(); len(o) != 1 || o[0].Function != "sessionreducer" || o[0].Age != 5*time.Second {
		t.Errorf("Oldest = %+v", o)
	}
	clk.Set(start.Add(time.Minute))
	err = <-done
	if !errors.Is(err, udsconn.ErrDeadline) || !errors.Is(err, sessionreduce.ErrStream) ||
		!strings.Contains(err.Error(), "sessionreducer call SessionReduceFn CLOSE of 1 messages: no answer within the deadline of 1m0s (limits.udfTimeout)") {
		t.Fatalf("CloseSessions = %v; want ErrDeadline and ErrStream, naming the function and the deadline", err)
	}
	if err := c.Ready(); err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("Ready = %v; want stuck", err)
	}
	if n := logs.FilterMessage("UDF server failed; reconnecting").Len(); n != 0 {
		t.Errorf("the connection was dropped %d times; an abandoned call keeps it", n)
	}
	stuck.Store(false)
	res, err := c.Reduce(ctx, w, []sessionreduce.Message{message([]string{"k"}, 10, "a")})
	if err != nil || len(res) != 1 {
		t.Fatalf("Reduce once the server answers = %v, %v", res, err)
	}
	if err := c.Ready(); err != nil {
		t.Fatalf("Ready = %v once a session was answered", err)
	}
}
