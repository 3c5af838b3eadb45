package reload

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluiceflow/sluice/config"
)

// Start runs [Watcher.Run] with apply in a goroutine of its own until ctx
// ends, looking at the file at once on each SIGHUP the process receives, and
// returns at once; stop ends the watch and waits for it. On a nil Watcher,
// Start starts nothing and stop returns at once.
func (w *Watcher) Start(ctx context.Context, apply func(*config.File) error) (stop func()) {
	if w == nil {
		return func() {}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		w.Run(ctx, hup, apply)
	}()
	return func() {
		cancel()
		<-done
	}
}
