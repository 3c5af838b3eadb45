package sink_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
	"github.com/sluiceflow/sluice/pkg/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sink"
	"github.com/sluiceflow/sluice/pkg/udsconn"
)

// A sink, and a fallback sink, that take a batch and never answer: the
// write is warned about at 5s, naming the sink and its messages, and
// abandoned at the deadline with an error naming the sink and the
// deadline, which fails the whole batch (the forwarder retries it as its
// retry strategy says); the sink is stuck until a write succeeds.
func TestStuckSinkIsAbandoned(t *testing.T) {
	for _, kind := range []serverinfo.Kind{serverinfo.KindSink, serverinfo.KindFallbackSink} {
		t.Run(string(kind), func(t *testing.T) {
			var stuck atomic.Bool
			stuck.Store(true)
			got := make(chan struct{}, 10)
			release := make(chan struct{})
			dir, _ := startSinker(t, kind, sinker.SinkerFunc(func(ctx context.Context, datums <-chan sinker.Datum) sinker.Responses {
				var out sinker.Responses
				for d := range datums {
					out = append(out, sinker.ResponseOK(d.ID()))
				}
				got <- struct{}{}
				if stuck.Load() {
					select {
					case <-ctx.Done():
					case <-release:
					}
				}
				return out
			}))
			t.Cleanup(func() { close(release) })
			start := time.Unix(1_700_000_000, 0)
			clk := clock.NewManual(start)
			calls := udsconn.NewCalls(30*time.Second, clk)
			core, logs := observer.New(zapcore.InfoLevel)
			s := sink.NewUD(dir, kind, zap.New(core), udsconn.WithCalls(calls))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			msgs := []isb.Message{{ID: "a", Value: []byte("a")}, {ID: "b", Value: []byte("b")}, {ID: "c", Value: []byte("c")}}
			errs := make([]error, len(msgs))
			done := make(chan error, 1)
			go func() { done <- s.Write(ctx, msgs, errs) }()
			select {
			case <-got:
			case <-ctx.Done():
				t.Fatal("the sink never got the batch")
			}
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Set(start.Add(5 * time.Second))
			warns := logs.FilterMessage("a call to the UDF server is outstanding").All()
			if len(warns) != 1 {
				t.Fatalf("%d warnings at 5s; want 1", len(warns))
			}
			if w := warns[0].ContextMap(); w["function"] != string(kind) || w["call"] != "SinkFn" || w["messages"] != int64(3) {
				t.Errorf("the warning says %v; want function %s, call SinkFn, 3 messages", w, kind)
			}
			if o := calls.Oldest(); len(o) != 1 || o[0].Function != string(kind) || o[0].Age != 5*time.Second {
				t.Errorf("Oldest = %+v", o)
			}
			clk.Set(start.Add(30 * time.Second))
			err := <-done
			want := "user-defined sink: " + string(kind) + " call SinkFn of 3 messages: no answer within the deadline of 30s (limits.udfTimeout)"
			if !errors.Is(err, udsconn.ErrDeadline) || err.Error() != want {
				t.Fatalf("Write = %v; want %q", err, want)
			}
			if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "stuck") {
				t.Fatalf("Ready = %v; want stuck", err)
			}
			stuck.Store(false)
			clear(errs)
			if err := s.Write(ctx, msgs, errs); err != nil || errs[0] != nil || errs[2] != nil {
				t.Fatalf("Write once the sink answers = %v, %v", err, errs)
			}
			if err := s.Ready(); err != nil {
				t.Fatalf("Ready = %v once a write succeeded", err)
			}
		})
	}
}
