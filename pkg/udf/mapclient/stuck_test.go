package mapclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/udstest"
	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcetransformer"
	"github.com/sluiceflow/sluice/pkg/udf/mapclient"
)

// Every kind of map and the transformer: a call the server accepts and
// never answers is warned about at 5s, with the function and the messages,
// is the oldest call of its function, and is abandoned at the 60s deadline
// with an error naming the function and the deadline; the function is then
// not ready until a call succeeds, on a new stream of the same server.
func TestStuckFunctionIsAbandoned(t *testing.T) {
	for _, tc := range []struct {
		name, function string
		serve          func(dir string, h *udstest.Hang) func(context.Context) error
		transformer    bool
	}{
		{"map", "map", func(dir string, h *udstest.Hang) func(context.Context) error {
			return mapper.NewServer(mapper.MapperFunc(func(ctx context.Context, _ []string, d mapper.Datum) mapper.Messages {
				h.Wait(ctx)
				return mapper.Messages{mapper.NewMessage(d.Value())}
			}), mapper.WithSocketDir(dir)).Start
		}, false},
		{"batch map", "batchmap", func(dir string, h *udstest.Hang) func(context.Context) error {
			return batchmapper.NewServer(batchmapper.BatchMapperFunc(func(ctx context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
				var out batchmapper.BatchResponses
				for d := range datums {
					out = append(out, batchmapper.NewBatchResponse(d.ID(), batchmapper.NewMessage(d.Value())))
				}
				h.Wait(ctx)
				return out
			}), batchmapper.WithSocketDir(dir)).Start
		}, false},
		{"map stream", "mapstream", func(dir string, h *udstest.Hang) func(context.Context) error {
			return mapstreamer.NewServer(mapstreamer.MapStreamerFunc(func(ctx context.Context, _ []string, d mapstreamer.Datum, out chan<- mapstreamer.Message) {
				h.Wait(ctx)
				out <- mapstreamer.NewMessage(d.Value())
			}), mapstreamer.WithSocketDir(dir)).Start
		}, false},
		{"transformer", "sourcetransformer", func(dir string, h *udstest.Hang) func(context.Context) error {
			return sourcetransformer.NewServer(sourcetransformer.SourceTransformerFunc(func(ctx context.Context, _ []string, d sourcetransformer.Datum) sourcetransformer.Messages {
				h.Wait(ctx)
				return sourcetransformer.Messages{sourcetransformer.NewMessage(d.Value(), d.EventTime())}
			}), sourcetransformer.WithSocketDir(dir)).Start
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := socketDir(t)
			h := udstest.NewHang()
			serve(t, tc.serve(dir, h))
			t.Cleanup(h.Release) // before the server stops
			st := udstest.NewStuck(time.Minute)
			var r *mapclient.Client
			if tc.transformer {
				r = mapclient.NewTransformer(dir, st.Logger, st.WithCalls())
			} else {
				r = mapclient.New(dir, st.Logger, st.WithCalls())
			}
			connect(t, r)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := udstest.Go(func() error {
				_, _, err := r.Map(ctx, messages("1", "2"), nil)
				return err
			})
			h.Taken(t, ctx)
			st.Warn(t, ctx, 5*time.Second, map[string]any{"function": tc.function, "messages": int64(2), "outstanding": 5 * time.Second})
			if o := st.Oldest(t, tc.function); o.Messages != 2 {
				t.Errorf("Oldest = %+v; want 2 messages", o)
			}
			udstest.Ready(t, r.Ready, "before the deadline")
			st.Abandon(t, time.Minute, done, tc.function+" call ", "of 2 messages: no answer within the deadline of 1m0s (limits.udfTimeout)")
			if n := st.Warnings(); n != 4 {
				t.Errorf("%d warnings up to the deadline; want 4 (5s, 10s, 20s, 40s)", n)
			}
			udstest.NotReadyStuck(t, r.Ready)
			h.Answer()
			if out, _, err := r.Map(ctx, messages("3"), nil); err != nil || len(out) != 1 {
				t.Fatalf("Map once the server answers = %d messages, %v", len(out), err)
			}
			udstest.Ready(t, r.Ready, "once a call succeeded")
			st.ConnectionKept(t)
		})
	}
}
