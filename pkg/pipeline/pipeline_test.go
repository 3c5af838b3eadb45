package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// parse parses a Pipeline YAML whose spec is spec (indented by two).
func parse(t *testing.T, name, spec string) *config.Pipeline {
	t.Helper()
	f, err := vertexconfig.Parse([]byte("apiVersion: numaflow.numaproj.io/v1alpha1\nkind: Pipeline\nmetadata:\n  name: " + name + "\nspec:\n" + spec))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return f.Pipeline
}

// threeVertices is generator → cat (in two partitions) → log; isb is the
// spec.isb block.
func threeVertices(isb string) string {
	return `  limits:
    readBatchSize: 50
    readTimeout: 100ms
` + isb + `  vertices:
    - name: in
      source:
        generator:
          rpu: 100
          duration: 10ms
    - name: cat
      partitions: 2
      udf:
        builtin:
          name: cat
    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: cat
    - from: cat
      to: out
`
}

// checkOnce checks that the log lines are distinct messages.
func checkOnce(t *testing.T, ls []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, l := range ls {
		id := l[strings.LastIndex(l, " ID - ")+6:]
		if seen[id] {
			t.Fatalf("message %s written twice", id)
		}
		seen[id] = true
	}
}

// TestMemory runs a pipeline on in-memory buffers. When it stops, the source
// stops first and the rest drain the buffers: every message the source wrote
// reaches the sink, once.
func TestMemory(t *testing.T) {
	out := &runtest.Buffer{}
	pl, err := pipeline.NewFromConfig(context.Background(), parse(t, "mem", threeVertices("")),
		pipeline.WithVertexOptions(vertex.WithLogSink(sink.NewLog(out))))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(pl.Vertices()); got != 3 {
		t.Fatalf("%d vertices", got)
	}
	r := runtest.Start(t, pl)
	runtest.WaitFor(t, "messages at the sink", func() bool { return len(out.Lines()) >= 300 })
	runtest.WaitFor(t, "ready", func() bool { return pl.Ready() == nil })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	st := pl.Status()
	if st[0].Vertex != "in" || st[2].Vertex != "out" || st[0].WriteTotal != st[1].ReadTotal || st[1].WriteTotal != st[2].WriteTotal {
		t.Fatalf("status: %+v", st)
	}
	ls := out.Lines()
	if float64(len(ls)) != st[0].WriteTotal || pl.Written() != st[2].WriteTotal {
		t.Fatalf("sink wrote %d lines, Written %v; the source wrote %v", len(ls), pl.Written(), st[0].WriteTotal)
	}
	checkOnce(t, ls)
}

// TestDrainTimeout checks that a pipeline whose sink cannot keep up stops
// after the drain timeout, saying how many messages it leaves behind.
func TestDrainTimeout(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	p := parse(t, "slow", strings.Replace(threeVertices(""), "    - name: out\n", `    - name: out
      limits:
        rateLimit:
          max: 1
          min: 1
          rampUpDuration: 0s
`, 1))
	pl, err := pipeline.NewFromConfig(context.Background(), p, pipeline.WithDrainTimeout(100*time.Millisecond), pipeline.WithLogger(zap.New(core)),
		pipeline.WithVertexOptions(vertex.WithLogSink(sink.NewLog(&runtest.Buffer{}))))
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, pl)
	runtest.WaitFor(t, "a throttled sink", func() bool { return pl.Status()[2].Throttled && pl.Status()[0].WriteTotal > 10 })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	lost := logs.FilterMessage("buffers not drained before the timeout; their messages are lost").All()
	if len(lost) != 1 || lost[0].ContextMap()["messages"].(int64) < 1 {
		t.Fatalf("warnings: %v", logs.All())
	}
}

// TestJetStream runs a pipeline's vertices on a real nats-server: all of them
// in one Pipeline, then each alone, as in processes of their own.
func TestJetStream(t *testing.T) {
	nats := natstest.Start(t, natstest.Options{})
	p := parse(t, "js", threeVertices("  isb:\n    jetstream:\n      url: "+nats.URL+"\n"))
	out := &runtest.Buffer{}
	opts := []pipeline.Option{pipeline.WithBackend(pipeline.OnJetStream), pipeline.WithVertexOptions(vertex.WithLogSink(sink.NewLog(out)))}
	pl, err := pipeline.NewFromConfig(context.Background(), p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, pl)
	runtest.WaitFor(t, "messages at the sink", func() bool { return len(out.Lines()) >= 200 })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, out.Lines())

	// Each vertex alone, in the order a deployment may start them.
	before := len(out.Lines())
	for _, name := range []string{"out", "cat", "in"} {
		pl, err := pipeline.NewFromConfig(context.Background(), p, append(opts, pipeline.WithVertex(name))...)
		if err != nil {
			t.Fatal(err)
		}
		if vs := pl.Vertices(); len(vs) != 1 || vs[0].Status().Vertex != name {
			t.Fatalf("WithVertex(%q) runs %d vertices", name, len(vs))
		}
		runtest.Start(t, pl)
	}
	runtest.WaitFor(t, "messages through vertices alone", func() bool { return len(out.Lines()) >= before+200 })
}

func TestJetStreamEmptied(t *testing.T) {
	nats := natstest.Start(t, natstest.Options{})
	p := parse(t, "reset", threeVertices("  isb:\n    jetstream:\n      url: "+nats.URL+"\n"))
	js, err := pipeline.OpenJetStream(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	g := pipeline.NewGraph(p)
	ctx := context.Background()
	w, err := js.Writer(ctx, g.Inputs("out")[0], "test", 100, 80)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, []isb.Message{{ID: "1", Value: []byte("x")}}, make([]error, 1)); err != nil {
		t.Fatal(err)
	}
	w.(interface{ Close() error }).Close()
	if err := js.Reset(ctx, g); err != nil {
		t.Fatal(err)
	}
	r, err := js.Reader(ctx, g.Inputs("out")[0], 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer r.(interface{ Close() error }).Close()
	if n, err := r.Read(ctx, make([]isb.ReadMessage, 10)); n != 0 || err != nil {
		t.Fatalf("read %d, %v from an emptied buffer", n, err)
	}
}

func TestErrors(t *testing.T) {
	nats := natstest.Start(t, natstest.Options{User: "u", Password: "right"})
	dir := t.TempDir()
	secret := func(name, value string) string {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(value), 0o600)
		return path
	}
	isb := func(extra string) string {
		return "  isb:\n    jetstream:\n      url: " + nats.URL + "\n      user: {file: " + secret("user", "u") + "}\n" + extra
	}
	ctx := context.Background()
	js := pipeline.WithBackend(pipeline.OnJetStream)
	tests := []struct {
		name  string
		spec  string
		opts  []pipeline.Option
		check func(error) bool
	}{
		{"unknown vertex", threeVertices(""), []pipeline.Option{js, pipeline.WithVertex("nope")},
			func(err error) bool {
				return errors.Is(err, pipeline.ErrNoVertex) && strings.Contains(err.Error(), "(vertices: in, cat, out)")
			}},
		{"a vertex alone in memory", threeVertices(""), []pipeline.Option{pipeline.WithVertex("cat")},
			func(err error) bool { return strings.Contains(err.Error(), "alone runs on jetstream") }},
		{"no isb", threeVertices(""), []pipeline.Option{js}, fieldError("spec.isb.jetstream")},
		{"a reduce alone beyond its partitions", strings.Replace(threeVertices("  isb:\n    jetstream:\n      url: "+nats.URL+"\n"), "      udf:\n        builtin:\n          name: cat\n",
			"      udf:\n        builtin:\n          name: count\n        groupBy:\n          window:\n            fixed:\n              length: 10s\n"+
				"          keyed: true\n          storage:\n            no_store: {}\n", 1),
			[]pipeline.Option{js, pipeline.WithVertex("cat"), pipeline.WithReplica(2)},
			func(err error) bool {
				return strings.Contains(err.Error(), "vertex cat: replica 2: a reduce vertex has a replica per partition, and it has 2")
			}},
		{"an ordered vertex alone beyond its partitions", "  ordered:\n    enabled: true\n" + threeVertices("  isb:\n    jetstream:\n      url: "+nats.URL+"\n"),
			[]pipeline.Option{js, pipeline.WithVertex("cat"), pipeline.WithReplica(2)},
			func(err error) bool {
				return strings.Contains(err.Error(), "vertex cat: replica 2: an ordered vertex has a replica per partition, and it has 2")
			}},
		{"wrong password", threeVertices(isb("      password: {file: " + secret("wrong", "wrong") + "}\n")), []pipeline.Option{js},
			fieldError("spec.isb.jetstream")},
		{"unreadable password", threeVertices(isb("      password: {file: " + dir + "/none}\n")), []pipeline.Option{js},
			fieldError("spec.isb.jetstream.password")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, err := pipeline.NewFromConfig(ctx, parse(t, "errs", tt.spec), tt.opts...)
			if err == nil {
				pl.Close()
				t.Fatal("New succeeded")
			}
			if !tt.check(err) || strings.Contains(err.Error(), "wrong") {
				t.Fatalf("New = %v", err)
			}
		})
	}
}

func fieldError(path string) func(error) bool {
	return func(err error) bool {
		var fe *config.FieldError
		return errors.As(err, &fe) && fe.Path == path
	}
}

func TestGraph(t *testing.T) {
	g := pipeline.NewGraph(parse(t, "g", threeVertices("")))
	if in := g.Inputs("in"); in != nil {
		t.Fatalf("a source's inputs: %v", in)
	}
	want := []pipeline.BufferSpec{{Name: "g-cat-0", MaxLength: 30000, UsageLimit: 80}, {Name: "g-cat-1", MaxLength: 30000, UsageLimit: 80},
		{Name: "g-out-0", MaxLength: 30000, UsageLimit: 80}}
	if got := g.Buffers(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("buffers %v; want %v", got, want)
	}
	if e := g.OutEdges("cat"); len(e) != 1 || e[0].To != "out" {
		t.Fatalf("edges out of cat: %v", e)
	}
	if got := g.Columns(); got["in"] != 0 || got["cat"] != 1 || got["out"] != 2 {
		t.Fatalf("columns %v; want in 0, cat 1, out 2", got)
	}
	if got := pipeline.SocketDir("/run", "cat"); got != "/run/cat" {
		t.Fatal(got)
	}
	var b pipeline.Backend
	if err := b.UnmarshalText([]byte("jetstream")); err != nil || b != pipeline.OnJetStream || b.String() != "jetstream" {
		t.Fatalf("jetstream: %v, %v", b, err)
	}
	if err := b.UnmarshalText([]byte("kafka")); err == nil || !strings.Contains(err.Error(), "want memory or jetstream") {
		t.Fatalf("kafka: %v", err)
	}
}

// TestUpdateRateLimits changes the rate limits of a pipeline's vertices
// while it runs: the pipeline's own, which every vertex takes, and one
// vertex's, which overrides it.
func TestUpdateRateLimits(t *testing.T) {
	spec := func(pipeMax, catMax int) string {
		return strings.NewReplacer("PIPE", strconv.Itoa(pipeMax), "CAT", strconv.Itoa(catMax)).Replace(`  limits:
    rateLimit:
      max: PIPE
      rampUpDuration: 0s
  vertices:
    - name: in
      source:
        generator:
          rpu: 10
          duration: 1s
    - name: cat
      limits:
        rateLimit:
          max: CAT
          rampUpDuration: 0s
      udf:
        builtin:
          name: cat
    - name: out
      sink:
        blackhole: {}
  edges:
    - from: in
      to: cat
    - from: cat
      to: out
`)
	}
	p := parse(t, "live", spec(100, 50))
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	pl, err := pipeline.NewFromConfig(context.Background(), p, pipeline.WithLogger(zap.NewNop()),
		pipeline.WithVertexOptions(vertex.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pl.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if err := pl.UpdateRateLimits(parse(t, "live", spec(200, 70))); err != nil {
		t.Fatal(err)
	}
	maxes := func() string {
		got := map[string]int64{}
		for _, s := range pl.Status() {
			got[s.Vertex] = s.Max
		}
		return fmt.Sprint(got)
	}
	if got := maxes(); got != "map[cat:50 in:100 out:100]" {
		t.Fatalf("max by vertex before the next second %s; want the old limits", got)
	}
	clk.Advance(time.Second)
	if got := maxes(); got != "map[cat:70 in:200 out:200]" {
		t.Fatalf("max by vertex in the next second %s; want the new limits", got)
	}
}
