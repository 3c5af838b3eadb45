package reload

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
)

// Start looks at the file on SIGHUP: a change of max is applied with no
// interval set. stop ends the watch; a nil Watcher starts nothing.
func TestStartOnSIGHUP(t *testing.T) {
	path, write, f := configFile(t)
	w := New(path, f, Deps{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	applied := make(chan uint64, 1)
	stop := w.Start(ctx, func(f *config.File) error {
		applied <- *f.MonoVertex.Spec.Limits.RateLimit.Max
		return nil
	})
	write("200", "10")
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-applied:
		if got != 200 {
			t.Fatalf("applied max %d; want 200", got)
		}
	case <-ctx.Done():
		t.Fatal("no change applied on SIGHUP; want max 200")
	}
	stop()
	var nilWatcher *Watcher
	nilWatcher.Start(ctx, nil)()
}
