package sessionreduceclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/udstest"
	"github.com/sluiceflow/sluice/pkg/sdk/sessionreducer"
	"github.com/sluiceflow/sluice/pkg/udf/sessionreduceclient"
)

// hanging takes a session's messages and waits as its Hang says.
type hanging struct{ *udstest.Hang }

func (h hanging) SessionReduce(ctx context.Context, keys []string, in <-chan sessionreducer.Datum) sessionreducer.Messages {
	for range in {
	}
	h.Wait(ctx)
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
	dir := udstest.SocketDir(t, "sessionreduce")
	h := hanging{udstest.NewHang()}
	udstest.Start(t, sessionreducer.NewServer(sessionreducer.CreatorFunc(func() sessionreducer.SessionReducer { return h }),
		sessionreducer.WithSocketDir(dir), sessionreducer.WithShutdownTimeout(100*time.Millisecond)).Start)
	st := udstest.NewStuck(time.Minute)
	c := sessionreduceclient.New(dir, st.Logger, st.WithCalls())
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(h.Release)
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
	if o := st.Calls.Oldest(); len(o) != 0 {
		t.Fatalf("Oldest = %+v; operations sent are no calls outstanding", o)
	}
	done := udstest.Go(func() error {
		_, err := c.CloseSessions(ctx, w)
		return err
	})
	h.Taken(t, ctx)
	st.Warn(t, ctx, 5*time.Second, map[string]any{"function": "sessionreducer", "call": "SessionReduceFn CLOSE", "messages": int64(1)})
	st.Oldest(t, "sessionreducer")
	err := st.Abandon(t, time.Minute, done, "sessionreducer call SessionReduceFn CLOSE of 1 messages: no answer within the deadline of 1m0s (limits.udfTimeout)")
	if !errors.Is(err, sessionreduceclient.ErrStream) {
		t.Fatalf("CloseSessions = %v; want ErrDeadline and ErrStream, naming the function and the deadline", err)
	}
	udstest.NotReadyStuck(t, c.Ready)
	st.ConnectionKept(t)
	h.Answer()
	res, err := c.Reduce(ctx, w, []sessionreduceclient.Message{message([]string{"k"}, 10, "a")})
	if err != nil || len(res) != 1 {
		t.Fatalf("Reduce once the server answers = %v, %v", res, err)
	}
	udstest.Ready(t, c.Ready, "once a session was answered")
}
