// Package runtest helps tests run what has a Run(ctx) method (a vertex, a
// pipeline) in a goroutine of its own, read what it writes while it writes,
// and wait, bounded, for what it should do.
package runtest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Timeout bounds every wait of these helpers.
const Timeout = 20 * time.Second

// Buffer is a bytes.Buffer safe for a writer and readers at once.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the complete lines written so far.
func (b *Buffer) Lines() []string {
	s := b.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.Split(s[:i], "\n")
	}
	return nil
}

// Runner is what Start runs.
type Runner interface {
	Run(ctx context.Context) error
}

// Run is a Runner running in a goroutine of its own.
type Run struct {
	cancel   context.CancelFunc
	finished chan struct{}
	err      error
}

// Start runs r until stopped, at the latest when the test ends.
func Start(t testing.TB, r Runner) *Run {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	run := &Run{cancel: cancel, finished: make(chan struct{})}
	go func() {
		defer close(run.finished)
		run.err = r.Run(ctx)
	}()
	t.Cleanup(func() { run.Stop(t) })
	return run
}

// Stop ends the run's context and returns what Run returned, failing the test
// when Run does not return within Timeout.
func (r *Run) Stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.finished:
		return r.err
	case <-time.After(Timeout):
		t.Fatal("Run did not return after its context ended")
		return nil
	}
}

// WaitFor waits until cond holds and fails the test, naming what it waited
// for, after Timeout or the time [Within] gives. It looks at once, then
// after 1 ms, 2 ms, 4 ms, 8 ms and every 10 ms from then on: quick for what
// holds soon, light on a server asked each time.
func WaitFor(t testing.TB, what string, cond func() bool, opts ...WaitOption) {
	t.Helper()
	w := waitOptions{timeout: Timeout}
	for _, o := range opts {
		o(&w)
	}
	deadline := time.Now().Add(w.timeout)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, maxPause) {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %v waiting for %s", w.timeout, what)
			if w.showing != nil {
				msg += ": " + w.showing()
			}
			t.Fatal(msg)
		}
		time.Sleep(pause)
	}
}

// maxPause is the longest pause of WaitFor between two looks.
const maxPause = 10 * time.Millisecond

// A WaitOption changes how WaitFor waits.
type WaitOption func(*waitOptions)

type waitOptions struct {
	timeout time.Duration
	showing func() string
}

// Within makes WaitFor give up after d instead of Timeout.
func Within(d time.Duration) WaitOption { return func(w *waitOptions) { w.timeout = d } }

// Showing adds what state returns, called once WaitFor gives up, to its
// failure message.
func Showing(state func() string) WaitOption { return func(w *waitOptions) { w.showing = state } }
