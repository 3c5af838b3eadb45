package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

// ExitOnSecondSignal exits the process at once, with code 1, on a SIGTERM or
// SIGINT after ctx ends, without waiting for the buffers to drain.
func ExitOnSecondSignal(ctx context.Context, log *zap.Logger) {
	context.AfterFunc(ctx, func() {
		again := make(chan os.Signal, 1)
		signal.Notify(again, syscall.SIGTERM, syscall.SIGINT)
		go func() {
			<-again
			log.Warn("second signal: exiting without draining the buffers")
			log.Sync()
			os.Exit(1)
		}()
	})
}
