package vertexconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
	"github.com/sluiceflow/sluice/pkg/sdk/reducestreamer"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// reducePipeline is in → sum → out, sum's udf being udf (indented under
// udf:).
func reducePipeline(t *testing.T, udf string) *config.Pipeline {
	t.Helper()
	return mustParse(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
  vertices:
    - {name: in, source: {generator: {}}}
    - name: sum
      udf:
`+udf+`    - {name: out, sink: {log: {}}}
  edges:
    - {from: in, to: sum}
    - {from: sum, to: out}
`).Pipeline
}

// TestPipelineVertexReduce checks the Reduce of a groupBy: its strategy,
// lateness, keying and state directory, and no Map.
func TestPipelineVertexReduce(t *testing.T) {
	fixed, _ := window.Fixed(time.Minute)
	sliding, _ := window.Sliding(time.Minute, 10*time.Second)
	session, _ := window.Session(30 * time.Second)
	for _, tt := range []struct {
		name, udf string
		want      vertex.Reduce
	}{
		{"fixed count in an emptyDir", `        builtin: {name: count}
        groupBy: {window: {fixed: {length: 60s}}, storage: {emptyDir: {}}}
`, vertex.Reduce{Strategy: fixed, Dir: "/state/sum"}},
		{"sliding keyed container in a volume, late", `        container: {image: my/sum:v1}
        groupBy:
          window: {sliding: {length: 1m, slide: 10s}}
          keyed: true
          allowedLateness: 5s
          storage: {persistentVolumeClaim: {volumeSize: 1Gi, accessMode: ReadWriteOncePod}}
`, vertex.Reduce{Strategy: sliding, AllowedLateness: 5 * time.Second, Keyed: true, Dir: "/state/sum"}},
		{"session keyed container in a volume", `        container: {image: my/session:v1}
        groupBy: {window: {session: {timeout: 30s}}, keyed: true, storage: {emptyDir: {}}}
`, vertex.Reduce{Strategy: session, Keyed: true, Dir: "/state/sum"}},
		{"no_store", `        builtin: {name: sum, kwargs: {field: n}}
        groupBy: {window: {fixed: {length: 1m}}, keyed: false, storage: {no_store: {}}}
`, vertex.Reduce{Strategy: fixed}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := PipelineVertex(reducePipeline(t, tt.udf), "sum", "/state")
			if err != nil {
				t.Fatal(err)
			}
			r := spec.Reduce
			switch {
			case r == nil:
				t.Fatal("no Reduce")
			case spec.Map != nil:
				t.Error("a reduce vertex has a Map")
			case r.Reducer == nil:
				t.Error("no Reducer")
			case r.Watermark != nil:
				t.Error("Watermark is set; the pipeline sets it")
			}
			if r.Strategy != tt.want.Strategy || r.AllowedLateness != tt.want.AllowedLateness || r.Keyed != tt.want.Keyed || r.Dir != tt.want.Dir {
				t.Errorf("Reduce {%v/%v late %v keyed %v dir %q}; want {%v/%v late %v keyed %v dir %q}",
					r.Strategy.Length(), r.Strategy.Slide(), r.AllowedLateness, r.Keyed, r.Dir,
					tt.want.Strategy.Length(), tt.want.Strategy.Slide(), tt.want.AllowedLateness, tt.want.Keyed, tt.want.Dir)
			}
		})
	}
	t.Run("a map has no Reduce", func(t *testing.T) {
		spec, err := PipelineVertex(reducePipeline(t, "        builtin: {name: cat}\n"), "sum", "/state")
		if err != nil || spec.Reduce != nil || spec.Map == nil {
			t.Errorf("Reduce %v, Map set %v, error %v", spec.Reduce, spec.Map != nil, err)
		}
	})
	t.Run("a volume without a state directory", func(t *testing.T) {
		p := reducePipeline(t, "        builtin: {name: count}\n        groupBy: {window: {fixed: {length: 1m}}, storage: {emptyDir: {}}}\n")
		_, err := PipelineVertex(p, "sum", "")
		var fe *config.FieldError
		if !errors.Is(err, ErrNoStateDir) || !errors.As(err, &fe) || fe.Path != "spec.vertices[1].udf.groupBy.storage" {
			t.Errorf("PipelineVertex = %v; want ErrNoStateDir at spec.vertices[1].udf.groupBy.storage", err)
		}
	})
}

// settable is a watermark the test moves.
type settable struct {
	mu sync.Mutex
	wm time.Time
}

func (s *settable) set(sec int64) { s.mu.Lock(); s.wm = time.Unix(sec, 0); s.mu.Unlock() }
func (s *settable) get() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wm, !s.wm.IsZero()
}

// TestReduceReducers runs the reduce vertex of a config, keyed counts over
// fixed windows of ten seconds, with each of its reducers: the built-in
// count, a reduce server on reduce.sock and, with streaming, a reduce
// streamer on reducestream.sock, each served by sluice's SDK in the
// vertex's socket directory. Each gives the same counts; the messages a
// reduce server gets carry the vertex's watermark.
func TestReduceReducers(t *testing.T) {
	const groupBy = "        groupBy: {window: {fixed: {length: 10s%s}}, keyed: true, storage: {emptyDir: {}}}\n"
	var wrongWatermark sync.Map // of a datum that does not carry the vertex's
	counted := func(in <-chan reducer.Datum) string {
		n := 0
		for d := range in {
			if !d.Watermark().Equal(time.Unix(110, 0)) {
				wrongWatermark.Store(d.Watermark(), true)
			}
			n++
		}
		return strconv.Itoa(n)
	}
	for _, tt := range []struct {
		name, udf string
		serve     func(ctx context.Context, dir string) error
	}{
		{"built-in", "        builtin: {name: count}\n" + strings.Replace(groupBy, "%s", "", 1), nil},
		{"reduce server", "        container: {image: my/count:v1}\n" + strings.Replace(groupBy, "%s", "", 1),
			func(ctx context.Context, dir string) error {
				count := func(_ context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
					return reducer.Messages{reducer.NewMessage([]byte(counted(in))).WithKeys(keys)}
				}
				return reducer.NewServer(reducer.ReducerFunc(count), reducer.WithSocketDir(dir)).Start(ctx)
			}},
		{"reduce streamer", "        container: {image: my/count:v1}\n" + strings.Replace(groupBy, "%s", ", streaming: true", 1),
			func(ctx context.Context, dir string) error {
				count := func(_ context.Context, keys []string, in <-chan reducestreamer.Datum, out chan<- reducestreamer.Message, _ reducestreamer.Metadata) {
					n := 0
					for range in {
						n++
					}
					out <- reducestreamer.NewMessage([]byte(strconv.Itoa(n))).WithKeys(keys)
				}
				return reducestreamer.NewServer(reducestreamer.ReduceStreamerFunc(count), reducestreamer.WithSocketDir(dir)).Start(ctx)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "rv") // short, for the socket's path
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if tt.serve != nil {
				ctx, stop := context.WithCancel(context.Background())
				served := make(chan error, 1)
				go func() { served <- tt.serve(ctx, dir) }()
				t.Cleanup(func() { stop(); <-served })
			}
			state := t.TempDir()
			spec, err := PipelineVertex(reducePipeline(t, tt.udf), "sum", state)
			if err != nil {
				t.Fatal(err)
			}
			in := memory.New("in", 100, 5*time.Millisecond, clock.Real())
			out := memory.New("out", 100, 5*time.Millisecond, clock.Real())
			var wm settable
			spec.Inputs = []isb.Reader{in}
			spec.Output = func() (isb.Writer, error) { return out, nil }
			spec.Reduce.Watermark = wm.get
			v, err := vertex.New(spec, vertex.WithSocketDir(dir))
			if err != nil {
				t.Fatal(err)
			}
			run := runtest.Start(t, v)
			m := func(key string, sec int64) isb.Message {
				return isb.Message{Keys: []string{key}, Value: []byte("x"), EventTime: time.Unix(sec, 0)}
			}
			msgs := []isb.Message{m("a", 101), m("b", 102), m("a", 108), m("a", 115)}
			if err := in.Write(context.Background(), msgs, make([]error, len(msgs))); err != nil {
				t.Fatal(err)
			}
			runtest.WaitFor(t, "the messages acked", func() bool { return in.Stats().Pending == 0 })
			wm.set(110)
			runtest.WaitFor(t, "the first window's counts", func() bool { return len(out.Messages()) == 2 })
			if err := run.Stop(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			got := map[string]string{}
			for _, r := range out.Messages() {
				got[strings.Join(r.Keys, ",")] = string(r.Value)
			}
			if got["a"] != "2" || got["b"] != "1" || len(got) != 2 {
				t.Errorf("results %v; want a=2 b=1", got)
			}
			wrongWatermark.Range(func(wm, _ any) bool {
				t.Errorf("a message carried watermark %v; want the vertex's, %v", wm, time.Unix(110, 0))
				return true
			})
			if _, err := os.Stat(filepath.Join(state, "sum", "partition-0")); err != nil {
				t.Errorf("the windows' log: %v", err)
			}
		})
	}
}
