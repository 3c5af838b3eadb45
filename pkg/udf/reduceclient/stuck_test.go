package reduceclient_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udstest"
	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
	"github.com/sluiceflow/sluice/pkg/sdk/reducestreamer"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/reduceclient"
)

// hang takes a window's messages and waits as h says.
func hang(ctx context.Context, h *udstest.Hang, in <-chan reducer.Datum) {
	for range in {
	}
	h.Wait(ctx)
}

// A reduce and a reduce stream server that take a window and never answer
// it: the window's call is warned about at 5s and abandoned at the
// deadline, with an error naming the window, the function and the
// deadline; the connection is kept, and the function stuck until a window
// is answered.
func TestStuckReduceIsAbandoned(t *testing.T) {
	for _, kind := range []udf.Kind{serverinfo.KindReduce, serverinfo.KindReduceStream} {
		t.Run(string(kind), func(t *testing.T) {
			dir := socketDir(t)
			h := udstest.NewHang()
			if kind == serverinfo.KindReduce {
				udstest.Start(t, reducer.NewServer(reducer.ReducerFunc(func(ctx context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
					hang(ctx, h, in)
					return reducer.Messages{reducer.NewMessage([]byte("done")).WithKeys(keys)}
				}), reducer.WithSocketDir(dir)).Start)
			} else {
				udstest.Start(t, reducestreamer.NewServer(reducestreamer.ReduceStreamerFunc(func(ctx context.Context, keys []string, in <-chan reducer.Datum, out chan<- reducer.Message, _ reducer.Metadata) {
					hang(ctx, h, in)
					out <- reducer.NewMessage([]byte("done")).WithKeys(keys)
				}), reducestreamer.WithSocketDir(dir)).Start)
			}
			t.Cleanup(h.Release)
			st := udstest.NewStuck(time.Minute)
			c, err := reduceclient.New(dir, kind, st.Logger, st.WithCalls())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			ctx := testContext(t)
			if err := c.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			w := reduceclient.Window{Start: time.UnixMilli(60_000), End: time.UnixMilli(120_000)}
			done := udstest.Go(func() error {
				_, err := c.Reduce(ctx, w, messages([]string{"k"}, "a", "b", "c"))
				return err
			})
			h.Taken(t, ctx)
			st.Warn(t, ctx, 5*time.Second, map[string]any{"function": string(kind), "call": "ReduceFn", "messages": int64(3)})
			st.Oldest(t, string(kind))
			err = st.Abandon(t, time.Minute, done)
			want := "reduce: window " + w.String() + ": " + string(kind) + " call ReduceFn of 3 messages: no answer within the deadline of 1m0s (limits.udfTimeout)"
			if err.Error() != want {
				t.Fatalf("Reduce = %v; want %q", err, want)
			}
			udstest.NotReadyStuck(t, c.Ready)
			st.ConnectionKept(t)
			h.Answer()
			if res, err := c.Reduce(ctx, w, messages([]string{"k"}, "d")); err != nil || len(res) != 1 {
				t.Fatalf("Reduce once the server answers = %v, %v", res, err)
			}
			udstest.Ready(t, c.Ready, "once a window was answered")
		})
	}
}

// A Stream used on its own is a call from CloseSend to the results' EOF.
func TestStuckStreamIsAbandonedAfterCloseSend(t *testing.T) {
	dir := socketDir(t)
	h := udstest.NewHang()
	udstest.Start(t, reducer.NewServer(reducer.ReducerFunc(func(ctx context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
		hang(ctx, h, in)
		return nil
	}), reducer.WithSocketDir(dir)).Start)
	t.Cleanup(h.Release)
	st := udstest.NewStuck(10 * time.Second)
	c, err := reduceclient.New(dir, serverinfo.KindReduce, nil, st.WithCalls())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := testContext(t)
	s, err := c.Open(ctx, reduceclient.Window{Start: time.UnixMilli(60_000), End: time.UnixMilli(120_000)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range messages([]string{"k"}, "a", "b") {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if p := st.Clock.Pending(); p != 0 {
		t.Fatalf("%d timers before CloseSend; a window open is no call", p)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	h.Taken(t, ctx)
	st.Clock.Set(st.Start.Add(10 * time.Second))
	if _, err := s.Recv(); !errors.Is(err, udf.ErrDeadline) || errors.Is(err, io.EOF) ||
		!strings.Contains(err.Error(), "reduce call ReduceFn of 2 messages") {
		t.Fatalf("Recv = %v; want ErrDeadline naming the call", err)
	}
}
