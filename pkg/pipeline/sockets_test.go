package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// udPipeline is a pipeline of a user-defined source, a map (user-defined when
// udMap) and a log sink.
func udPipeline(udMap bool) string {
	fn := "builtin:\n          name: cat"
	if udMap {
		fn = "container: {image: map}"
	}
	return `  limits:
    readBatchSize: 10
    readTimeout: 50ms
  vertices:
    - name: in
      source:
        udsource:
          container: {image: source}
    - name: cat
      udf:
        ` + fn + `
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

func TestSocketDirs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		udMap bool
		only  string
		want  string
	}{
		{"one vertex with containers gets the base", false, "", "map[in:/run]"},
		{"two get one each", true, "", "map[cat:/run/cat in:/run/in]"},
		{"a vertex alone gets the base", true, "cat", "map[cat:/run]"},
		{"a vertex without containers has none", true, "out", "map[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parse(t, "dirs", udPipeline(tc.udMap))
			if got := fmt.Sprint(pipeline.SocketDirs(p, "/run", tc.only)); got != tc.want {
				t.Fatalf("SocketDirs = %s; want %s", got, tc.want)
			}
		})
	}
}

// counter is a user-defined source of "0" to "count-1", each until acked.
type counter struct {
	mu    sync.Mutex
	next  int
	count int
}

func (c *counter) Read(_ context.Context, req sourcer.ReadRequest, out chan<- sourcer.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := uint64(0); n < req.Count && c.next < c.count; n++ {
		v := strconv.Itoa(c.next)
		out <- sourcer.Message{Value: []byte(v), Offset: sourcer.Offset{Value: []byte(v)}, EventTime: time.Unix(1, 0)}
		c.next++
	}
}

func (c *counter) Ack(context.Context, []sourcer.Offset)  {}
func (c *counter) Nack(context.Context, []sourcer.Offset) {}
func (c *counter) Pending(context.Context) int64          { return sourcer.PendingUnknown }
func (c *counter) Partitions(context.Context) []int32     { return sourcer.DefaultPartitions() }

// A pipeline in one process whose only vertex with user-defined containers is
// its source finds the source's server in the base directory itself.
func TestOneUDVertexUsesTheBaseDir(t *testing.T) {
	base, err := os.MkdirTemp("", "pl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	const count = 50
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sourcer.NewServer(&counter{count: count}, sourcer.WithSocketDir(base)).Start(ctx) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("server: %v", err)
		}
	}()
	out := &runtest.Buffer{}
	pl, err := pipeline.NewFromConfig(context.Background(), parse(t, "base", udPipeline(false)), pipeline.WithSocketDir(base),
		pipeline.WithVertexOptions(vertex.WithLogSink(sink.NewLog(out))))
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, pl)
	runtest.WaitFor(t, "every message at the sink", func() bool { return len(out.Lines()) == count })
	if err := pl.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// With two vertices with user-defined containers, each waits in a directory
// of its own.
func TestTwoUDVerticesGetADirEach(t *testing.T) {
	pl, err := pipeline.NewFromConfig(context.Background(), parse(t, "two", udPipeline(true)), pipeline.WithSocketDir("/run/x"),
		pipeline.WithVertexOptions(vertex.WithLogSink(sink.NewLog(&runtest.Buffer{}))))
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	err = pl.Ready()
	for _, want := range []string{filepath.Join("/run/x/in", serverinfo.SourceInfoFile), filepath.Join("/run/x/cat", serverinfo.MapInfoFile)} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Ready = %v; want it to name %s", err, want)
		}
	}
}
