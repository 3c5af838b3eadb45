package accumulatorclient_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	sdkacc "github.com/sluiceflow/sluice/pkg/sdk/accumulator"
	"github.com/sluiceflow/sluice/pkg/udf/accumulatorclient"
)

// echo emits each datum as it comes, and "end" when its key set closes.
type echo struct{}

func (echo) Accumulate(ctx context.Context, in <-chan sdkacc.Datum, out chan<- sdkacc.Message) {
	var keys []string
	for d := range in {
		keys = d.Keys()
		out <- sdkacc.MessageFromDatum(d)
	}
	out <- sdkacc.Message{}.WithKeys(keys).WithValue([]byte("end")).WithID("end-" + keys[0])
}

// TestClient runs two key sets on one stream against sluice's SDK server:
// the emitted messages keep their IDs, event times and watermarks, a CLOSE
// is answered with an EOF naming the key set, and a half-closed stream ends
// with io.EOF after closing what is still open.
func TestClient(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- sdkacc.NewServer(sdkacc.CreatorFunc(func() sdkacc.Accumulator { return echo{} }),
			sdkacc.WithSocketDir(dir)).Start(ctx)
	}()
	c := accumulatorclient.New(dir, zap.NewNop())
	defer c.Close()
	st, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wm := time.UnixMilli(5000)
	send := func(op accumulatorclient.Op, key, id string, et int64) {
		t.Helper()
		r := accumulatorclient.Request{Op: op, Keys: []string{key}, Watermark: wm,
			Message: isb.Message{ID: id, Keys: []string{key}, Value: []byte(id), EventTime: time.UnixMilli(et)}}
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	send(accumulatorclient.OpOpen, "a", "a1", 6000)
	send(accumulatorclient.OpOpen, "b", "b1", 7000)
	send(accumulatorclient.OpAppend, "a", "a2", 6500)
	send(accumulatorclient.OpClose, "a", "", 0)
	got := map[string]accumulatorclient.Response{}
	var eofs []string
	for len(eofs) < 1 || len(got) < 4 {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.EOF {
			eofs = append(eofs, r.Keys[0])
			continue
		}
		got[r.Message.ID] = r
	}
	if eofs[0] != "a" {
		t.Errorf("EOF of %q, want a", eofs)
	}
	if r := got["a2"]; r.Message.EventTime.UnixMilli() != 6500 || !r.Watermark.Equal(wm) || string(r.Message.Value) != "a2" || r.Keys[0] != "a" {
		t.Errorf("a2 came back as %+v", r)
	}
	if _, ok := got["end-a"]; !ok {
		t.Errorf("no end of a: %v", got)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.EOF {
			eofs = append(eofs, r.Keys[0])
		}
	}
	if len(eofs) != 2 || eofs[1] != "b" {
		t.Errorf("EOFs %q, want [a b]", eofs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
