package udstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/udstest"
)

// A Hang that is stuck waits for its call's context or for Release; once it
// answers, a call it takes returns at once. Taken sees each call taken.
func TestHang(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		end  func(h *udstest.Hang, cancelCall context.CancelFunc)
	}{
		{"context done", func(_ *udstest.Hang, cancelCall context.CancelFunc) { cancelCall() }},
		{"released", func(h *udstest.Hang, _ context.CancelFunc) { h.Release(); h.Release() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := udstest.NewHang()
			t.Cleanup(h.Release)
			callCtx, cancelCall := context.WithCancel(ctx)
			defer cancelCall()
			done := udstest.Go(func() error { h.Wait(callCtx); return nil })
			h.Taken(t, ctx)
			select {
			case <-done:
				t.Fatal("a stuck Hang returned before its context was done or it was released")
			default:
			}
			tc.end(h, cancelCall)
			select {
			case <-done:
			case <-ctx.Done():
				t.Fatal("the call never returned")
			}
		})
	}
	h := udstest.NewHang()
	h.Answer()
	h.Wait(ctx) // returns: the Hang answers
	h.Taken(t, ctx)
}
