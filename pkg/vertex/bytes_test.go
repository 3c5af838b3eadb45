package vertex_test

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// byteSink counts the payload bytes written.
type byteSink struct {
	mu    sync.Mutex
	bytes int64
}

func (s *byteSink) Write(_ context.Context, msgs []isb.Message, _ []error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.bytes += int64(len(m.Value))
	}
	return nil
}

func (s *byteSink) total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// TestRedisByteLimit runs three replicas of a vertex with a byte limit
// shared through a real redis-server: they agree on a replica count of three for
// the bytes, and in no epoch do their byte limiters grant more than
// bytes.max together, counted exactly from each replica's epoch log.
func TestRedisByteLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs redis-server for a few seconds")
	}
	const max = 3000
	srv := redistest.Start(t, redistest.Options{})
	spec := vertexconfig.FromMonoVertex(monoVertex(t, "bytes", `  limits:
    readBatchSize: 5
    readTimeout: 100ms
    rateLimit:
      max: 1000000
      min: 1000000
      rampUpDuration: 0s
      syncInterval: 20ms
      bytes: {max: 3000, min: 3000}
      store:
        redisStore:
          mode: single
          url: redis://`+srv.Addr+`
  source:
    generator:
      rpu: 100000
      msgSize: 100
  sink:
    blackhole: {}
`))
	core, logs := observer.New(zapcore.DebugLevel)
	sink := &byteSink{}
	spec.Sink = func(vertex.Env) (isb.Writer, error) { return sink, nil }
	var vs []*vertex.Vertex
	for i := range 3 {
		v, err := vertex.New(spec, vertex.WithReplica(i), vertex.WithLogger(zap.New(core)))
		if err != nil {
			t.Fatal(err)
		}
		runtest.Start(t, v)
		vs = append(vs, v)
	}
	runtest.WaitFor(t, "a byte limit shared by three", func() bool {
		for _, v := range vs {
			if b := v.Status().Bytes; b == nil || b.Share != max/3 {
				return false
			}
		}
		return true
	})
	start := sink.total()
	runtest.WaitFor(t, "three epochs' bytes written", func() bool { return sink.total()-start >= 3*max })
	for _, v := range vs {
		v.Close()
	}
	perEpoch := map[int64]int64{}
	for _, e := range logs.FilterLoggerName("ratelimit.bytes").FilterMessage("epoch").All() {
		m := e.ContextMap()
		perEpoch[m["epoch"].(int64)] += m["granted"].(int64)
	}
	if len(perEpoch) < 3 {
		t.Fatalf("%d epochs logged", len(perEpoch))
	}
	for e, granted := range perEpoch {
		if granted > max {
			t.Errorf("epoch %d: %d bytes granted; bytes.max %d", e, granted, max)
		}
	}
	t.Logf("bytes granted per epoch: %v", perEpoch)
}

// TestUpdateByteLimit: a byte limit's max changes while the vertex runs,
// and a byte limit is not added or removed.
func TestUpdateByteLimit(t *testing.T) {
	spec := vertexconfig.FromMonoVertex(monoVertex(t, "live-bytes", `  limits:
    rateLimit:
      max: 100
      rampUpDuration: 0s
      bytes: {max: 1000, min: 1000}
  source:
    generator: {rpu: 10}
  sink:
    blackhole: {}
`))
	v, err := vertex.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, v)
	next := *spec.Limits.RateLimit.Bytes
	next.Max, next.Min = 5000, 5000
	if err := v.UpdateByteLimit(&next); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "bytes.max 5000", func() bool { b := v.Status().Bytes; return b != nil && b.Max == 5000 })
	if err := v.UpdateByteLimit(nil); err == nil {
		t.Error("a byte limit was removed live")
	}
	plain := vertexconfig.FromMonoVertex(monoVertex(t, "plain", "  limits:\n    rateLimit: {max: 100}\n  source:\n    generator: {}\n  sink:\n    blackhole: {}\n"))
	w, err := vertex.New(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.UpdateByteLimit(&next); err == nil {
		t.Error("a byte limit was added live")
	}
	if err := w.UpdateByteLimit(nil); err != nil {
		t.Errorf("no byte limit, none asked: %v", err)
	}
}

// counterValue returns the value of the counter name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// TestCostExpression: with cost len(payload), a message takes a token of
// the limit per payload byte: the tokens kept are the bytes written, and
// those taken again for a later epoch.
func TestCostExpression(t *testing.T) {
	spec := vertexconfig.FromMonoVertex(monoVertex(t, "cost", `  limits:
    readBatchSize: 2
    readTimeout: 100ms
    rateLimit:
      max: 2000
      min: 2000
      rampUpDuration: 0s
      cost: len(payload)
  source:
    generator: {rpu: 100000, msgSize: 100}
  sink:
    blackhole: {}
`))
	sink := &byteSink{}
	spec.Sink = func(vertex.Env) (isb.Writer, error) { return sink, nil }
	reg := prometheus.NewRegistry()
	v, err := vertex.New(spec, vertex.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	run := runtest.Start(t, v)
	runtest.WaitFor(t, "two epochs' bytes written", func() bool { return sink.total() >= 4000 })
	if err := run.Stop(t); err != nil {
		t.Fatal(err)
	}
	granted, retaken := counterValue(t, reg, "sluice_ratelimit_granted_total"), counterValue(t, reg, "sluice_ratelimit_retaken_total")
	// A batch written in a later epoch than its tokens takes its messages'
	// tokens again, which counts them twice.
	if extra := int64(granted) - sink.total(); extra < 0 || float64(extra) > retaken {
		t.Fatalf("%v tokens kept (%v taken again) for %d bytes written; want one a byte", granted, retaken, sink.total())
	}
}
