package reduce_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
	"github.com/sluiceflow/sluice/pkg/sdk/reducestreamer"
	"github.com/sluiceflow/sluice/pkg/serverinfo"
	"github.com/sluiceflow/sluice/pkg/udf/reduce"
	"github.com/sluiceflow/sluice/pkg/udsconn"
)

// hanging makes a reduce function take a window's messages and, while
// stuck, never answer.
type hanging struct {
	stuck   atomic.Bool
	got     chan struct{}
	release chan struct{}
}

func (h *hanging) wait(ctx context.Context, in <-chan reducer.Datum) {
	for range in {
	}
	h.got <- struct{}{}
	if h.stuck.Load() {
		select {
		case <-ctx.Done():
		case <-h.release:
		}
	}
}

// A reduce and a reduce stream server that take a window and never answer
// it: the window's call is warned about at 5s and abandoned at the
// deadline, with an error naming the window, the function and the
// deadline; the connection is kept, and the function stuck until a window
// is answered.
func TestStuckReduceIsAbandoned(t *testing.T) {
	for _, kind := range []serverinfo.Kind{serverinfo.KindReduce, serverinfo.KindReduceStream} {
		t.Run(string(kind), func(t *testing.T) {
			dir := socketDir(t)
			h := &hanging{got: make(chan struct{}, 10), release: make(chan struct{})}
			h.stuck.Store(true)
			if kind == serverinfo.KindReduce {
				serve(t, reducer.NewServer(reducer.ReducerFunc(func(ctx context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
					h.wait(ctx, in)
					return reducer.Messages{reducer.NewMessage([]byte("done")).WithKeys(keys)}
				}), reducer.WithSocketDir(dir)).Start)
			} else {
				serve(t, reducestreamer.NewServer(reducestreamer.ReduceStreamerFunc(func(ctx context.Context, keys []string, in <-chan reducer.Datum, out chan<- reducer.Message, _ reducer.Metadata) {
					h.wait(ctx, in)
					out <- reducer.NewMessage([]byte("done")).WithKeys(keys)
				}), reducestreamer.WithSocketDir(dir)).Start)
			}
			t.Cleanup(func() { close(h.release) })
			start := time.Unix(1_700_000_000, 0)
			clk := clock.NewManual(start)
			calls := udsconn.NewCalls(time.Minute, clk)
			core, logs := observer.New(zapcore.InfoLevel)
			c, err := reduce.New(dir, kind, zap.New(core), udsconn.WithCalls(calls))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			ctx := testContext(t)
			if err := c.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			w := reduce.Window{Start: time.UnixMilli(60_000), End: time.UnixMilli(120_000)}
			done := make(chan error, 1)
			go func() {
				_, err := c.Reduce(ctx, w, messages([]string{"k"}, "a", "b", "c"))
				done <- err
			}()
			select {
			case <-h.got:
			case <-ctx.Done():
				t.Fatal("the server never got the window")
			}
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Set(start.Add(5 * time.Second))
			warns := logs.FilterMessage("a call to the UDF server is outstanding").All()
			if len(warns) != 1 {
				t.Fatalf("%d warnings at 5s; want 1", len(warns))
			}
			if f := warns[0].ContextMap(); f["function"] != string(kind) || f["call"] != "ReduceFn" || f["messages"] != int64(3) {
				t.Errorf("the warning says %v", f)
			}
			if o := calls.Oldest(); len(o) != 1 || o[0].Function != string(kind) || o[0].Age != 5*time.Second {
				t.Errorf("Oldest = %+v", o)
			}
			clk.Set(start.Add(time.Minute))
			err = <-done
			want := "reduce: window " + w.String() + ": " + string(kind) + " call ReduceFn of 3 messages: no answer within the deadline of 1m0s (limits.udfTimeout)"
			if !errors.Is(err, udsconn.ErrDeadline) || err.Error() != want {
				t.Fatalf("Reduce = %v; want %q", err, want)
			}
			if err := c.Ready(); err == nil || !strings.Contains(err.Error(), "stuck") {
				t.Fatalf("Ready = %v; want stuck", err)
			}
			if n := logs.FilterMessage("UDF server failed; reconnecting").Len(); n != 0 {
				t.Errorf("the connection was dropped %d times; an abandoned call keeps it", n)
			}
			h.stuck.Store(false)
			if res, err := c.Reduce(ctx, w, messages([]string{"k"}, "d")); err != nil || len(res) != 1 {
				t.Fatalf("Reduce once the server answers = %v, %v", res, err)
			}
			if err := c.Ready(); err != nil {
				t.Fatalf("Ready = %v once a window was answered", err)
			}
		})
	}
}

// A Stream used on its own is a call from CloseSend to the results' EOF.
func TestStuckStreamIsAbandonedAfterCloseSend(t *testing.T) {
	dir := socketDir(t)
	h := &hanging{got: make(chan struct{}, 10), release: make(chan struct{})}
	h.stuck.Store(true)
	serve(t, reducer.NewServer(reducer.ReducerFunc(func(ctx context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
		h.wait(ctx, in)
		return nil
	}), reducer.WithSocketDir(dir)).Start)
	t.Cleanup(func() { close(h.release) })
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewManual(start)
	calls := udsconn.NewCalls(10*time.Second, clk)
	c, err := reduce.New(dir, serverinfo.KindReduce, nil, udsconn.WithCalls(calls))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := testContext(t)
	s, err := c.Open(ctx, reduce.Window{Start: time.UnixMilli(60_000), End: time.UnixMilli(120_000)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range messages([]string{"k"}, "a", "b") {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if p := clk.Pending(); p != 0 {
		t.Fatalf("%d timers before CloseSend; a window open is no call", p)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	<-h.got
	clk.Set(start.Add(10 * time.Second))
	if _, err := s.Recv(); !errors.Is(err, udsconn.ErrDeadline) || errors.Is(err, io.EOF) ||
		!strings.Contains(err.Error(), "reduce call ReduceFn of 2 messages") {
		t.Fatalf("Recv = %v; want ErrDeadline naming the call", err)
	}
}
