package sinkclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udstest"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
	"github.com/sluiceflow/sluice/pkg/udf/sinkclient"
)

// A sink, and a fallback sink, that take a batch and never answer: the
// write is warned about at 5s, naming the sink and its messages, and
// abandoned at the deadline with an error naming the sink and the
// deadline, which fails the whole batch (the forwarder retries it as its
// retry strategy says); the sink is stuck until a write succeeds.
func TestStuckSinkIsAbandoned(t *testing.T) {
	for _, kind := range []serverinfo.Kind{serverinfo.KindSink, serverinfo.KindFallbackSink} {
		t.Run(string(kind), func(t *testing.T) {
			h := udstest.NewHang()
			dir, _ := startSinker(t, kind, sinker.SinkerFunc(func(ctx context.Context, datums <-chan sinker.Datum) sinker.Responses {
				var out sinker.Responses
				for d := range datums {
					out = append(out, sinker.ResponseOK(d.ID()))
				}
				h.Wait(ctx)
				return out
			}))
			t.Cleanup(h.Release)
			st := udstest.NewStuck(30 * time.Second)
			s := sinkclient.New(dir, kind, st.Logger, st.WithCalls())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			msgs := []isb.Message{{ID: "a", Value: []byte("a")}, {ID: "b", Value: []byte("b")}, {ID: "c", Value: []byte("c")}}
			errs := make([]error, len(msgs))
			done := udstest.Go(func() error { return s.Write(ctx, msgs, errs) })
			h.Taken(t, ctx)
			st.Warn(t, ctx, 5*time.Second, map[string]any{"function": string(kind), "call": "SinkFn", "messages": int64(3)})
			st.Oldest(t, string(kind))
			err := st.Abandon(t, 30*time.Second, done)
			want := "user-defined sink: " + string(kind) + " call SinkFn of 3 messages: no answer within the deadline of 30s (limits.udfTimeout)"
			if err.Error() != want {
				t.Fatalf("Write = %v; want %q", err, want)
			}
			udstest.NotReadyStuck(t, s.Ready)
			h.Answer()
			clear(errs)
			if err := s.Write(ctx, msgs, errs); err != nil || errs[0] != nil || errs[2] != nil {
				t.Fatalf("Write once the sink answers = %v, %v", err, errs)
			}
			udstest.Ready(t, s.Ready, "once a write succeeded")
		})
	}
}
