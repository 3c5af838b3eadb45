package vertex_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcetransformer"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// counting is a user-defined source of "0" to "count-1", each until acked.
type counting struct {
	mu    sync.Mutex
	next  int
	count int
	acked map[int]bool
}

func (c *counting) Read(ctx context.Context, req sourcer.ReadRequest, out chan<- sourcer.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := uint64(0); n < req.Count && c.next < c.count; n++ {
		v := strconv.Itoa(c.next)
		out <- sourcer.Message{Value: []byte(v), Offset: sourcer.Offset{Value: []byte(v)}, EventTime: time.Unix(1, 0)}
		c.next++
	}
}

func (c *counting) Ack(_ context.Context, offsets []sourcer.Offset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range offsets {
		n, _ := strconv.Atoi(string(o.Value))
		c.acked[n] = true
	}
}

func (c *counting) ackedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.acked)
}

func (c *counting) Nack(context.Context, []sourcer.Offset) {}
func (c *counting) Pending(context.Context) int64          { return sourcer.PendingUnknown }
func (c *counting) Partitions(context.Context) []int32     { return sourcer.DefaultPartitions() }

// collector is a user-defined sink that keeps what it is given, and answers
// fallback for payloads fallback says.
type collector struct {
	mu       sync.Mutex
	got      []string
	fallback func(string) bool
}

func (c *collector) Sink(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
	var rs sinker.Responses
	for d := range datums {
		v := string(d.Value())
		if c.fallback != nil && c.fallback(v) {
			rs = append(rs, sinker.ResponseFallback(d.ID()))
			continue
		}
		c.mu.Lock()
		c.got = append(c.got, v)
		c.mu.Unlock()
		rs = append(rs, sinker.ResponseOK(d.ID()))
	}
	return rs
}

func (c *collector) values() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// serve runs a user-defined server until the test ends.
func serve(t *testing.T, start func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
}

// TestUserDefinedContainers runs a MonoVertex made of a user-defined source,
// transformer, map, sink and fallback sink, each a real gRPC server on a unix
// socket in this process: every message goes through each, and every offset
// is acked once the sinks have it.
func TestUserDefinedContainers(t *testing.T) {
	dir, err := os.MkdirTemp("", "ud")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const count = 200
	src := &counting{count: count, acked: map[int]bool{}}
	primary := &collector{fallback: func(v string) bool { return v[len(v)-1] == '7' }}
	fallback := &collector{}
	t.Setenv(serverinfo.EnvContainerType, "fb-udsink")
	fb := sinker.NewServer(fallback, sinker.WithSocketDir(dir))
	t.Setenv(serverinfo.EnvContainerType, "")
	serve(t, fb.Start)
	serve(t, sinker.NewServer(primary, sinker.WithSocketDir(dir)).Start)
	serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
	serve(t, sourcetransformer.NewServer(sourcetransformer.SourceTransformerFunc(
		func(_ context.Context, keys []string, d sourcetransformer.Datum) sourcetransformer.Messages {
			return sourcetransformer.Messages{sourcetransformer.NewMessage(append([]byte("t"), d.Value()...), d.EventTime())}
		}), sourcetransformer.WithSocketDir(dir)).Start)
	serve(t, mapper.NewServer(mapper.MapperFunc(func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
		return mapper.Messages{mapper.NewMessage(append([]byte("m"), d.Value()...))}
	}), mapper.WithSocketDir(dir)).Start)

	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "ud", `  limits:
    readBatchSize: 50
    readTimeout: 100ms
  source:
    udsource:
      container: {image: source}
    transformer:
      container: {image: transformer}
  udf:
    container: {image: map}
  sink:
    udsink:
      container: {image: sink}
    fallback:
      udsink:
        container: {image: fallback}
`)), vertex.WithSocketDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	runtest.WaitFor(t, "every message acked", func() bool { return src.ackedCount() == count })
	if err := v.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	got := append(primary.values(), fallback.values()...)
	slices.Sort(got)
	want := make([]string, count)
	for i := range want {
		want[i] = fmt.Sprintf("mt%d", i)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("sinks got %d messages %v...; want %d", len(got), got[:min(len(got), 5)], count)
	}
	if n := len(fallback.values()); n != count/10 {
		t.Fatalf("fallback sink got %d; want the %d ending in 7", n, count/10)
	}
}
