package accumulator_test

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
	sdkacc "github.com/sluiceflow/sluice/pkg/sdk/accumulator"
	"github.com/sluiceflow/sluice/pkg/udf/accumulator"
	"github.com/sluiceflow/sluice/pkg/udsconn"
)

// hanging takes a key set's messages and, while stuck, does not return once
// the key set is closed, so its EOF never comes.
type hanging struct {
	stuck   *atomic.Bool
	got     chan struct{}
	release chan struct{}
}

func (h hanging) Accumulate(ctx context.Context, in <-chan sdkacc.Datum, _ chan<- sdkacc.Message) {
	for range in {
	}
	h.got <- struct{}{}
	if h.stuck.Load() {
		select {
		case <-ctx.Done():
		case <-h.release:
		}
	}
}

// An accumulator server that is closed a key set and never answers its EOF:
// the close is warned about at 5s and abandoned at the deadline; the stream
// fails with an error naming the function and the deadline, and the
// function is stuck until a close is answered, on a new stream.
func TestStuckAccumulatorIsAbandoned(t *testing.T) {
	dir := t.TempDir()
	var stuck atomic.Bool
	stuck.Store(true)
	h := hanging{stuck: &stuck, got: make(chan struct{}, 10), release: make(chan struct{})}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- sdkacc.NewServer(sdkacc.CreatorFunc(func() sdkacc.Accumulator { return h }), sdkacc.WithSocketDir(dir)).Start(sctx)
	}()
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewManual(start)
	calls := udsconn.NewCalls(time.Minute, clk)
	core, logs := observer.New(zapcore.InfoLevel)
	c := accumulator.New(dir, zap.New(core), udsconn.WithCalls(calls))
	t.Cleanup(func() {
		close(h.release)
		c.Close()
		stop()
		<-served
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closeKey := func(st *accumulator.Stream, key string) {
		t.Helper()
		m := isb.Message{ID: key + "1", Keys: []string{key}, Value: []byte("v"), EventTime: time.UnixMilli(6000)}
		if err := st.Send(accumulator.Request{Op: accumulator.OpOpen, Keys: []string{key}, Message: m}); err != nil {
			t.Fatal(err)
		}
		if err := st.Send(accumulator.Request{Op: accumulator.OpClose, Keys: []string{key}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	closeKey(st, "a")
	done := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		done <- err
	}()
	select {
	case <-h.got:
	case <-ctx.Done():
		t.Fatal("the server never closed the key set")
	}
	clk.Set(start.Add(5 * time.Second))
	warns := logs.FilterMessage("a call to the UDF server is outstanding").All()
	if len(warns) != 1 {
		t.Fatalf("%d warnings at 5s; want 1", len(warns))
	}
	if f := warns[0].ContextMap(); f["function"] != "accumulator" || f["call"] != "AccumulateFn close" {
		t.Errorf("the warning says %v", f)
	}
	if o := calls.Oldest(); len(o) != 1 || o[0].Function != "accumulator" || o[0].Age != 5*time.Second {
		t.Errorf("Oldest = %+v", o)
	}
	clk.Set(start.Add(time.Minute))
	err = <-done
	if !errors.Is(err, udsconn.ErrDeadline) ||
		!strings.Contains(err.Error(), "accumulator call AccumulateFn close of 1 messages: no answer within the deadline of 1m0s (limits.udfTimeout)") {
		t.Fatalf("Recv = %v; want ErrDeadline naming the function and the deadline", err)
	}
	if err := c.Ready(); err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("Ready = %v; want stuck", err)
	}

	stuck.Store(false)
	st2, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	closeKey(st2, "b")
	if r, err := st2.Recv(); err != nil || !r.EOF {
		t.Fatalf("Recv once the server answers = %+v, %v; want the EOF of b", r, err)
	}
	if err := c.Ready(); err != nil {
		t.Fatalf("Ready = %v once a close was answered", err)
	}
}
