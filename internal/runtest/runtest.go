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

// WaitFor waits until cond holds and reports whether it did. After Timeout,
// or the time [Within] gives, it fails the test, naming what it waited for
// (with [Soft], it logs that instead and returns false, for a caller whose
// assertions say what was not reached). It looks at once, then after 1 ms,
// 2 ms, 4 ms, 8 ms and every 10 ms (or the time [Every] gives) from then on:
// quick for what holds soon, light on a server asked each time.
func WaitFor(t testing.TB, what string, cond func() bool, opts ...WaitOption) bool {
	t.Helper()
	w := waitOptions{timeout: Timeout, every: maxPause}
	for _, o := range opts {
		o(&w)
	}
	deadline := time.Now().Add(w.timeout)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, w.every) {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %v waiting for %s", w.timeout, what)
			if w.showing != nil {
				msg += ": " + w.showing()
			}
			if w.soft {
				t.Log(msg)
				return false
			}
			t.Fatal(msg)
		}
		time.Sleep(pause)
	}
	return true
}

// maxPause is the longest pause of WaitFor between two looks, unless
// [Every] gives another.
const maxPause = 10 * time.Millisecond

// A WaitOption changes how WaitFor waits.
type WaitOption func(*waitOptions)

type waitOptions struct {
	timeout time.Duration
	every   time.Duration
	showing func() string
	soft    bool
}

// Within makes WaitFor give up after d instead of Timeout.
func Within(d time.Duration) WaitOption { return func(w *waitOptions) { w.timeout = d } }

// Every makes WaitFor look at most every d: for a condition that is costly
// to check, such as one that reads the logs of processes.
func Every(d time.Duration) WaitOption {
	return func(w *waitOptions) { w.every = max(d, time.Millisecond) }
}

// Soft makes WaitFor log, not fail, when it gives up, and return false.
func Soft() WaitOption { return func(w *waitOptions) { w.soft = true } }

// Showing adds what state returns, called once WaitFor gives up, to its
// failure message.
func Showing(state func() string) WaitOption { return func(w *waitOptions) { w.showing = state } }
