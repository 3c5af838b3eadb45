package vertex

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// started is when the process started, near enough: a server-info file older
// than that was left by an earlier run.
var started = time.Now()

// fixedDirPoll is how often, while the vertex waits for its servers, it looks
// for their server-info files in the fixed directory.
const fixedDirPoll = 500 * time.Millisecond

// defaultSocketDirHint is what to do when a server seems to know only the
// fixed directory, unless WithSocketDirHint says otherwise.
const defaultSocketDirHint = "give the vertex that directory as its socket directory"

// makeSocketDir creates the socket directory of the user-defined containers
// (0755) when it is missing.
func (v *Vertex) makeSocketDir() error {
	if err := os.MkdirAll(v.o.socketDir, 0o755); err != nil {
		return fmt.Errorf("vertex %s: creating the socket directory of its user-defined containers: %w", v.spec.Name, err)
	}
	return nil
}

// watchFixedDir looks, until stop is called, for the server-info files the
// vertex waits for in its socket directory appearing in the fixed directory
// (/var/run/numaflow) instead, and logs a warning, once per file, that the
// server seems to know only that directory. stop waits for it to end.
func (v *Vertex) watchFixedDir(ctx context.Context) (stop func()) {
	if len(v.infoFiles) == 0 || filepath.Clean(v.o.socketDir) == filepath.Clean(v.o.fixedDir) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		warned := map[string]bool{}
		for {
			for _, name := range v.infoFiles {
				if warned[name] || !v.onlyInFixedDir(name) {
					continue
				}
				warned[name] = true
				v.log.Warn("a user-defined server wrote its server-info file to "+v.o.fixedDir+", not to the vertex's socket directory: "+
					"it seems to know only "+v.o.fixedDir+" (as numaflow-go servers do, which ignore SLUICE_UDS_DIR); "+v.o.socketHint,
					zap.String("found", filepath.Join(v.o.fixedDir, name)), zap.String("waitingFor", filepath.Join(v.o.socketDir, name)))
			}
			if !sleep(ctx, v.o.clock, fixedDirPoll) {
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// onlyInFixedDir reports whether the server-info file name is missing from the
// socket directory and was written to the fixed directory since the process
// started.
func (v *Vertex) onlyInFixedDir(name string) bool {
	if _, err := os.Stat(filepath.Join(v.o.socketDir, name)); err == nil {
		return false
	}
	fi, err := os.Stat(filepath.Join(v.o.fixedDir, name))
	return err == nil && !fi.ModTime().Before(started)
}

// sleep waits d on clk, or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	fired := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return true
	case <-ctx.Done():
		return false
	}
}
