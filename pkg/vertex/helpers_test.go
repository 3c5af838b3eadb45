package vertex_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/sink"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// wait bounds every wait in these tests.
const wait = 10 * time.Second

// monoVertex parses a MonoVertex YAML whose spec is spec (indented by two).
func monoVertex(t *testing.T, name, spec string) *config.MonoVertex {
	t.Helper()
	f, err := config.Parse([]byte("apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: " + name + "\nspec:\n" + spec))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return f.MonoVertex
}

// lines is a log sink's output, safe to read while the sink writes.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimSuffix(l.buf.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// logSink returns a log sink option writing to a new lines.
func logSink() (*lines, vertex.Option) {
	l := &lines{}
	return l, vertex.WithLogSink(sink.NewLog(l))
}

// run is a vertex running in a goroutine of its own.
type run struct {
	cancel   context.CancelFunc
	finished chan struct{}
	err      error
}

// start runs v until stopped, at the latest when the test ends.
func start(t *testing.T, v *vertex.Vertex) *run {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{cancel: cancel, finished: make(chan struct{})}
	go func() {
		defer close(r.finished)
		r.err = v.Run(ctx)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop ends the run and returns what Run returned.
func (r *run) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.finished:
		return r.err
	case <-time.After(wait):
		t.Fatal("Run did not return after its context ended")
		return nil
	}
}

// waitFor waits until cond holds, looking every millisecond for at most wait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
