package sideinput_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/pkg/clock"
	sdkside "github.com/sluiceflow/sluice/pkg/sdk/sideinput"
	"github.com/sluiceflow/sluice/pkg/sideinput"
	"github.com/sluiceflow/sluice/pkg/udsconn"
)

// A side-input server that takes a retrieval and never answers: the call is
// warned about at 5s and abandoned at its deadline with an error naming the
// function and the deadline; the connection is kept, and a later retrieval
// that is answered ends the server's being stuck.
func TestStuckRetrievalIsAbandoned(t *testing.T) {
	dir, err := os.MkdirTemp("", "si")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var stuck atomic.Bool
	stuck.Store(true)
	got, release := make(chan struct{}, 10), make(chan struct{})
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- sdkside.NewServer(sdkside.RetrieveFunc(func(ctx context.Context) sdkside.Message {
			got <- struct{}{}
			if stuck.Load() {
				select {
				case <-ctx.Done():
				case <-release:
				}
			}
			return sdkside.BroadcastMessage([]byte("v"))
		}), sdkside.WithSocketDir(dir)).Start(sctx)
	}()
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewManual(start)
	core, logs := observer.New(zapcore.InfoLevel)
	r := sideinput.NewRemote(dir, zap.New(core), nil, udsconn.WithCalls(udsconn.NewCalls(20*time.Second, clk)))
	t.Cleanup(func() {
		close(release)
		r.Close()
		stop()
		<-served
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := r.Retrieve(ctx)
		done <- err
	}()
	<-got
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Set(start.Add(5 * time.Second))
	if n := logs.FilterMessage("a call to the UDF server is outstanding").Len(); n != 1 {
		t.Fatalf("%d warnings at 5s; want 1", n)
	}
	clk.Set(start.Add(20 * time.Second))
	err = <-done
	if !errors.Is(err, udsconn.ErrDeadline) ||
		err.Error() != "sideinput call RetrieveSideInput of 0 messages: no answer within the deadline of 20s (limits.udfTimeout)" {
		t.Fatalf("Retrieve = %v", err)
	}
	if err := r.Ready(); err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("Ready = %v; want stuck", err)
	}
	stuck.Store(false)
	if v, _, err := r.Retrieve(ctx); err != nil || string(v) != "v" {
		t.Fatalf("Retrieve once the server answers = %q, %v", v, err)
	}
	if err := r.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	if n := logs.FilterMessage("UDF server failed; reconnecting").Len(); n != 0 {
		t.Errorf("the connection was dropped %d times", n)
	}
}
