package accumulatorclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/udstest"
	"github.com/sluiceflow/sluice/pkg/isb"
	sdkacc "github.com/sluiceflow/sluice/pkg/sdk/accumulator"
	"github.com/sluiceflow/sluice/pkg/udf/accumulatorclient"
)

// hanging takes a key set's messages and, while its Hang is stuck, does not
// return once the key set is closed, so its EOF never comes.
type hanging struct{ *udstest.Hang }

func (h hanging) Accumulate(ctx context.Context, in <-chan sdkacc.Datum, _ chan<- sdkacc.Message) {
	for range in {
	}
	h.Wait(ctx)
}

// An accumulator server that is closed a key set and never answers its EOF:
// the close is warned about at 5s and abandoned at the deadline; the stream
// fails with an error naming the function and the deadline, and the
// function is stuck until a close is answered, on a new stream.
func TestStuckAccumulatorIsAbandoned(t *testing.T) {
	dir := t.TempDir()
	h := hanging{udstest.NewHang()}
	udstest.Start(t, sdkacc.NewServer(sdkacc.CreatorFunc(func() sdkacc.Accumulator { return h }), sdkacc.WithSocketDir(dir)).Start)
	st := udstest.NewStuck(time.Minute)
	c := accumulatorclient.New(dir, st.Logger, st.WithCalls())
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(h.Release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closeKey := func(st *accumulatorclient.Stream, key string) {
		t.Helper()
		m := isb.Message{ID: key + "1", Keys: []string{key}, Value: []byte("v"), EventTime: time.UnixMilli(6000)}
		if err := st.Send(accumulatorclient.Request{Op: accumulatorclient.OpOpen, Keys: []string{key}, Message: m}); err != nil {
			t.Fatal(err)
		}
		if err := st.Send(accumulatorclient.Request{Op: accumulatorclient.OpClose, Keys: []string{key}}); err != nil {
			t.Fatal(err)
		}
	}
	st1, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st1.Close()
	closeKey(st1, "a")
	done := udstest.Go(func() error {
		_, err := st1.Recv()
		return err
	})
	h.Taken(t, ctx)
	st.Warn(t, ctx, 5*time.Second, map[string]any{"function": "accumulator", "call": "AccumulateFn close"})
	st.Oldest(t, "accumulator")
	st.Abandon(t, time.Minute, done, "accumulator call AccumulateFn close of 1 messages: no answer within the deadline of 1m0s (limits.udfTimeout)")
	udstest.NotReadyStuck(t, c.Ready)

	h.Answer()
	st2, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	closeKey(st2, "b")
	if r, err := st2.Recv(); err != nil || !r.EOF {
		t.Fatalf("Recv once the server answers = %+v, %v; want the EOF of b", r, err)
	}
	udstest.Ready(t, c.Ready, "once a close was answered")
}
