package vertex_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// tempDir returns a short temporary directory: unix socket paths are limited.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ud")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// udSourceSpec is a MonoVertex of a user-defined source and a log sink.
func udSourceSpec(t *testing.T, name string) vertex.Spec {
	return vertexconfig.FromMonoVertex(monoVertex(t, name, `  limits:
    readBatchSize: 10
    readTimeout: 50ms
  source:
    udsource:
      container: {image: source}
  sink:
    log: {}
`))
}

// withPending is a counting source whose pending count the test sets.
type withPending struct {
	*counting
	pending atomic.Int64
}

func (p *withPending) Pending(context.Context) int64 { return p.pending.Load() }

// gaugeValue returns the value of the gauge name in reg, and whether it is there.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// The vertex asks a user-defined source for its pending count when it starts
// and then every PendingPoll, not at each read, and exports it as
// sluice_source_pending: -1 while the source cannot tell.
func TestSourcePending(t *testing.T) {
	dir := tempDir(t)
	const count = 300
	src := &withPending{counting: &counting{count: count, acked: map[int]bool{}}}
	src.pending.Store(42)
	serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	reg := prometheus.NewRegistry()
	_, sinkOpt := logSink()
	v, err := vertex.New(udSourceSpec(t, "pending"), vertex.WithSocketDir(dir), vertex.WithClock(clk),
		vertex.WithRegisterer(reg), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	pending := func() float64 {
		n, ok := gaugeValue(t, reg, "sluice_source_pending")
		if !ok {
			t.Fatal("no sluice_source_pending")
		}
		return n
	}
	if n := pending(); n != -1 {
		t.Fatalf("pending before Run = %v; want -1", n)
	}
	r := runtest.Start(t, v)
	runtest.WaitFor(t, "the first answer", func() bool { return pending() == 42 })
	src.pending.Store(7)
	runtest.WaitFor(t, "every message acked", func() bool { return src.ackedCount() == count })
	if n := pending(); n != 42 {
		t.Fatalf("pending = %v after %d reads and no poll; want 42 still", n, count/10)
	}
	advanceUntil := func(what string, want float64) {
		t.Helper()
		runtest.WaitFor(t, what, func() bool {
			clk.Advance(vertex.PendingPoll)
			return pending() == want
		})
	}
	advanceUntil("the next answer", 7)
	src.pending.Store(sourcer.PendingUnknown)
	advanceUntil("the source to say it cannot tell", -1)
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// A vertex whose source is not user-defined has no pending gauge.
func TestNoPendingWithoutUDSource(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, sinkOpt := logSink()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "gen", `  source:
    generator: {}
  sink:
    log: {}
`)), vertex.WithRegisterer(reg), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, ok := gaugeValue(t, reg, "sluice_source_pending"); ok {
		t.Fatal("sluice_source_pending for a generator")
	}
}

// A missing socket directory is created; while the vertex waits for its
// server, the log, Ready and Status name the server-info file; once the
// server is up the vertex is ready.
func TestWaitsForTheInfoFile(t *testing.T) {
	dir := filepath.Join(tempDir(t), "not", "yet")
	core, logs := observer.New(zapcore.InfoLevel)
	_, sinkOpt := logSink()
	v, err := vertex.New(udSourceSpec(t, "waits"), vertex.WithSocketDir(dir), vertex.WithLogger(zap.New(core)), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	info := filepath.Join(dir, serverinfo.SourceInfoFile)
	runtest.WaitFor(t, "Ready to name the info file", func() bool {
		err := v.Ready()
		return err != nil && strings.Contains(err.Error(), "waiting for the server-info file "+info)
	})
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Fatalf("socket directory: %v, %v; want it created, 0755", fi, err)
	}
	if st := v.Status(); !strings.Contains(st.NotReady, info) {
		t.Fatalf("Status.NotReady = %q; want it to name %s", st.NotReady, info)
	}
	// The line is logged just after Ready names the file: wait for it.
	runtest.WaitFor(t, "the log line about the wait", func() bool {
		return logs.FilterMessage("waiting for the UDF server's server-info file").Len() > 0
	})
	waiting := logs.FilterMessage("waiting for the UDF server's server-info file")
	if waiting.Len() != 1 || waiting.All()[0].ContextMap()["file"] != info {
		t.Fatalf("log lines about the wait: %v; want one naming %s", waiting.All(), info)
	}
	src := &counting{count: 10, acked: map[int]bool{}}
	serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
	runtest.WaitFor(t, "the vertex to be ready", func() bool { return v.Ready() == nil })
	if st := v.Status(); st.NotReady != "" {
		t.Fatalf("Status.NotReady = %q once ready", st.NotReady)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// A server-info file that appears in the fixed directory while the vertex
// waits in another is warned about once, with the hint given.
func TestServerInFixedDir(t *testing.T) {
	dir, fixed := tempDir(t), tempDir(t)
	core, logs := observer.New(zapcore.InfoLevel)
	_, sinkOpt := logSink()
	v, err := vertex.New(udSourceSpec(t, "fixed"), vertex.WithSocketDir(dir), vertex.WithLogger(zap.New(core)),
		vertex.WithFixedDir(fixed), vertex.WithSocketDirHint("do this instead"), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	src := &counting{count: 10, acked: map[int]bool{}}
	serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(fixed)).Start)
	warnings := func() []observer.LoggedEntry { return logs.FilterLevelExact(zapcore.WarnLevel).All() }
	runtest.WaitFor(t, "a warning", func() bool { return len(warnings()) > 0 })
	w := warnings()[0]
	if !strings.Contains(w.Message, "seems to know only "+fixed) || !strings.HasSuffix(w.Message, "do this instead") ||
		w.ContextMap()["found"] != filepath.Join(fixed, serverinfo.SourceInfoFile) {
		t.Fatalf("warning %q %v", w.Message, w.ContextMap())
	}
	// The server moves to the vertex's directory: the vertex runs, and the
	// warning was given once.
	serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
	runtest.WaitFor(t, "the vertex to be ready", func() bool { return v.Ready() == nil })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	if n := len(warnings()); n != 1 {
		t.Fatalf("%d warnings; want 1", n)
	}
}
