// Package source holds the built-in sources — generator, http, nats (core
// NATS, at most once) and jetstream (a JetStream stream, at least once) — and
// the user-defined source reached over gRPC. Every source is an [isb.Reader].
package source

import (
	"context"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// waitFor waits d on clk, or until ctx is done, and reports whether d passed.
func waitFor(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	done := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
