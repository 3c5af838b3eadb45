package sideinputclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/udstest"
	sdkside "github.com/sluiceflow/sluice/pkg/sdk/sideinput"
	"github.com/sluiceflow/sluice/pkg/udf/sideinputclient"
)

// A side-input server that takes a retrieval and never answers: the call is
// warned about at 5s and abandoned at its deadline with an error naming the
// function and the deadline; the connection is kept, and a later retrieval
// that is answered ends the server's being stuck.
func TestStuckRetrievalIsAbandoned(t *testing.T) {
	dir := udstest.SocketDir(t, "si")
	h := udstest.NewHang()
	udstest.Start(t, sdkside.NewServer(sdkside.RetrieveFunc(func(ctx context.Context) sdkside.Message {
		h.Wait(ctx)
		return sdkside.BroadcastMessage([]byte("v"))
	}), sdkside.WithSocketDir(dir)).Start)
	st := udstest.NewStuck(20 * time.Second)
	r := sideinputclient.New(dir, st.Logger, nil, st.WithCalls())
	t.Cleanup(func() { r.Close() })
	t.Cleanup(h.Release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := udstest.Go(func() error {
		_, _, err := r.Retrieve(ctx)
		return err
	})
	h.Taken(t, ctx)
	st.Warn(t, ctx, 5*time.Second, nil)
	err := st.Abandon(t, 20*time.Second, done)
	if err.Error() != "sideinput call RetrieveSideInput of 0 messages: no answer within the deadline of 20s (limits.udfTimeout)" {
		t.Fatalf("Retrieve = %v", err)
	}
	udstest.NotReadyStuck(t, r.Ready)
	h.Answer()
	if v, _, err := r.Retrieve(ctx); err != nil || string(v) != "v" {
		t.Fatalf("Retrieve once the server answers = %q, %v", v, err)
	}
	udstest.Ready(t, r.Ready, "once a retrieval was answered")
	st.ConnectionKept(t)
}
