package udf_test

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
	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcetransformer"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udsconn"
)

// hang is a function that accepts its messages and, while stuck, never
// answers: it waits for its context or the end of the test.
type hang struct {
	stuck   atomic.Bool
	got     chan struct{} // a value per message taken
	release chan struct{}
}

func newHang(t *testing.T) *hang {
	h := &hang{got: make(chan struct{}, 100), release: make(chan struct{})}
	h.stuck.Store(true)
	return h
}

func (h *hang) wait(ctx context.Context) {
	select {
	case h.got <- struct{}{}:
	default:
	}
	if h.stuck.Load() {
		select {
		case <-ctx.Done():
		case <-h.release:
		}
	}
}

// Every kind of map and the transformer: a call the server accepts and
// never answers is warned about at 5s, with the function and the messages,
// is the oldest call of its function, and is abandoned at the 60s deadline
// with an error naming the function and the deadline; the function is then
// not ready until a call succeeds, on a new stream of the same server.
func TestStuckFunctionIsAbandoned(t *testing.T) {
	for _, tc := range []struct {
		name, function string
		serve          func(dir string, h *hang) func(context.Context) error
		transformer    bool
	}{
		{"map", "map", func(dir string, h *hang) func(context.Context) error {
			return mapper.NewServer(mapper.MapperFunc(func(ctx context.Context, _ []string, d mapper.Datum) mapper.Messages {
				h.wait(ctx)
				return mapper.Messages{mapper.NewMessage(d.Value())}
			}), mapper.WithSocketDir(dir)).Start
		}, false},
		{"batch map", "batchmap", func(dir string, h *hang) func(context.Context) error {
			return batchmapper.NewServer(batchmapper.BatchMapperFunc(func(ctx context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
				var out batchmapper.BatchResponses
				for d := range datums {
					out = append(out, batchmapper.NewBatchResponse(d.ID(), batchmapper.NewMessage(d.Value())))
				}
				h.wait(ctx)
				return out
			}), batchmapper.WithSocketDir(dir)).Start
		}, false},
		{"map stream", "mapstream", func(dir string, h *hang) func(context.Context) error {
			return mapstreamer.NewServer(mapstreamer.MapStreamerFunc(func(ctx context.Context, _ []string, d mapstreamer.Datum, out chan<- mapstreamer.Message) {
				h.wait(ctx)
				out <- mapstreamer.NewMessage(d.Value())
			}), mapstreamer.WithSocketDir(dir)).Start
		}, false},
		{"transformer", "sourcetransformer", func(dir string, h *hang) func(context.Context) error {
			return sourcetransformer.NewServer(sourcetransformer.SourceTransformerFunc(func(ctx context.Context, _ []string, d sourcetransformer.Datum) sourcetransformer.Messages {
				h.wait(ctx)
				return sourcetransformer.Messages{sourcetransformer.NewMessage(d.Value(), d.EventTime())}
			}), sourcetransformer.WithSocketDir(dir)).Start
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := socketDir(t)
			h := newHang(t)
			serve(t, tc.serve(dir, h))
			t.Cleanup(func() { close(h.release) }) // before the server stops
			start := time.Unix(1_700_000_000, 0)
			clk := clock.NewManual(start)
			calls := udsconn.NewCalls(time.Minute, clk)
			core, logs := observer.New(zapcore.InfoLevel)
			var r *udf.Remote
			if tc.transformer {
				r = udf.NewRemoteTransformer(dir, zap.New(core), udsconn.WithCalls(calls))
			} else {
				r = udf.NewRemoteMap(dir, zap.New(core), udsconn.WithCalls(calls))
			}
			connect(t, r)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, _, err := r.Map(ctx, messages("1", "2"), nil)
				done <- err
			}()
			select {
			case <-h.got:
			case <-ctx.Done():
				t.Fatal("the server never got the call")
			}
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Set(start.Add(5 * time.Second))
			warns := logs.FilterMessage("a call to the UDF server is outstanding").All()
			if len(warns) != 1 {
				t.Fatalf("%d warnings at 5s; want 1", len(warns))
			}
			if w := warns[0].ContextMap(); w["function"] != tc.function || w["messages"] != int64(2) || w["outstanding"] != 5*time.Second {
				t.Errorf("the warning says %v; want function %s, 2 messages, outstanding 5s", w, tc.function)
			}
			if got := calls.Oldest(); len(got) != 1 || got[0].Function != tc.function || got[0].Age != 5*time.Second || got[0].Messages != 2 {
				t.Errorf("Oldest = %+v", got)
			}
			if err := r.Ready(); err != nil {
				t.Fatalf("Ready = %v before the deadline", err)
			}
			clk.Set(start.Add(time.Minute))
			err := <-done
			if !errors.Is(err, udsconn.ErrDeadline) || !strings.Contains(err.Error(), tc.function+" call ") ||
				!strings.Contains(err.Error(), "of 2 messages: no answer within the deadline of 1m0s (limits.udfTimeout)") {
				t.Fatalf("Map = %v; want ErrDeadline naming %s and the deadline", err, tc.function)
			}
			if n := logs.FilterMessage("a call to the UDF server is outstanding").Len(); n != 4 {
				t.Errorf("%d warnings up to the deadline; want 4 (5s, 10s, 20s, 40s)", n)
			}
			if err := r.Ready(); err == nil || !strings.Contains(err.Error(), "stuck") {
				t.Fatalf("Ready = %v after the deadline; want stuck", err)
			}
			h.stuck.Store(false)
			if out, _, err := r.Map(ctx, messages("3"), nil); err != nil || len(out) != 1 {
				t.Fatalf("Map once the server answers = %d messages, %v", len(out), err)
			}
			if err := r.Ready(); err != nil {
				t.Fatalf("Ready = %v once a call succeeded", err)
			}
			if n := logs.FilterMessage("UDF server failed; reconnecting").Len(); n != 0 {
				t.Errorf("the connection was dropped %d times; an abandoned call keeps it", n)
			}
		})
	}
}
