package vertex_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const generatorToLog = `  limits:
    readBatchSize: 100
    rateLimit:
      max: 10
      min: 10
      rampUpDuration: 0s
  source:
    generator:
      rpu: 1000
  udf:
    builtin:
      name: cat
  sink:
    log: {}
`

// TestRateLimitPerEpoch runs generator → cat → log on a manual clock: in each
// epoch exactly max messages reach the sink, never one more, and the vertex
// reports why it waits.
func TestRateLimitPerEpoch(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	out, sinkOpt := logSink()
	reg := prometheus.NewRegistry()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "per-epoch", generatorToLog)),
		vertex.WithClock(clk), vertex.WithRegisterer(reg), vertex.WithReplica(3), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	for epoch := 1; epoch <= 3; epoch++ {
		runtest.WaitFor(t, "a full epoch", func() bool {
			return len(out.Lines()) >= 10*epoch && v.Status().Throttled
		})
		if n := len(out.Lines()); n != 10*epoch {
			t.Fatalf("epoch %d: %d messages written in all; want exactly %d", epoch, n, 10*epoch)
		}
		s := v.Status()
		if !s.RateLimit || s.Mode != "relaxed" || s.Share != 10 || s.Granted != 10 || s.Replicas != 1 ||
			len(s.Reasons) != 1 || s.Reasons[0] != "rate_limited" || s.Replica != 3 || !s.Running {
			t.Fatalf("epoch %d: status %+v", epoch, s)
		}
		clk.Advance(time.Second)
	}
	if err := r.Stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	lines := out.Lines()
	for i, l := range lines {
		if want := " ID - per-epoch-3-"; !strings.Contains(l, want) {
			t.Fatalf("line %d = %q; want an ID with %q", i, l, want)
		}
	}
	if got := v.Status().WriteTotal; got != float64(len(lines)) {
		t.Fatalf("writeTotal %v; want %d", got, len(lines))
	}
	n, err := testutil.GatherAndCount(reg, "sluice_forward_write_total", "sluice_ratelimit_share_tokens")
	if err != nil || n != 2 {
		t.Fatalf("metrics: %d, %v; want the two", n, err)
	}
	if s := v.Status(); s.Running {
		t.Fatal("still running after Run returned")
	}
}

// TestReadyAndLifecycle checks Ready before, during and after Run, and that a
// vertex runs once and closes twice.
func TestReadyAndLifecycle(t *testing.T) {
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "life", generatorToLog)))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Ready(); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("Ready before Run = %v", err)
	}
	r := runtest.Start(t, v)
	runtest.WaitFor(t, "ready", func() bool { return v.Ready() == nil })
	if err := v.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already ran") {
		t.Fatalf("a second Run = %v", err)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	if v.Ready() == nil {
		t.Fatal("ready after Run returned")
	}
	if err := v.Close(); err != nil {
		t.Fatalf("Close after Run = %v", err)
	}

	// A vertex that never runs is closed by Close, twice.
	v, err = vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "never", generatorToLog)))
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(v.Close(), v.Close()); err != nil {
		t.Fatal(err)
	}
}

// TestNoRateLimit checks a vertex without a rate limit: it moves messages, and
// its status says it has none.
func TestNoRateLimit(t *testing.T) {
	out, sinkOpt := logSink()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "free", `  source:
    generator:
      rpu: 50
      duration: 10ms
  sink:
    log: {}
`)), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	runtest.WaitFor(t, "messages", func() bool { return len(out.Lines()) >= 100 })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	if s := v.Status(); s.RateLimit || s.Throttled || s.ReadTotal < 100 || s.ReadTotal != s.WriteTotal {
		t.Fatalf("status %+v", s)
	}
}

var (
	limits      = vertex.Limits{ReadBatchSize: 10, ReadTimeout: time.Second}
	blackhole   = func(vertex.Env) (isb.Writer, error) { return sink.Blackhole{}, nil }
	emptySource = func(vertex.Env) (isb.Reader, error) { return memory.New("in", 10, time.Second, clock.Real()), nil }

	errSource = errors.New("no source today")
	errSink   = errors.New("no sink today")
	errMap    = errors.New("no map today")
)

func TestNewErrors(t *testing.T) {
	missing := t.TempDir() + "/missing"
	tests := []struct {
		name  string
		spec  vertex.Spec
		opts  []vertex.Option
		env   string
		check func(error) bool
	}{{
		name:  "no source",
		spec:  vertex.Spec{Name: "x", Sink: blackhole, Limits: limits},
		check: func(err error) bool { return strings.Contains(err.Error(), "neither a source nor inputs") },
	}, {
		name: "no sink",
		spec: vertex.Spec{Name: "x", Source: emptySource, Limits: limits},
		check: func(err error) bool {
			return strings.Contains(err.Error(), "neither a sink nor an output")
		},
	}, {
		name: "no read batch size",
		spec: vertex.Spec{Name: "x", Source: emptySource, Sink: blackhole, Limits: vertex.Limits{ReadTimeout: time.Second}},
		check: func(err error) bool {
			return strings.Contains(err.Error(), "vertex x: read batch size (0) must be at least 1")
		},
	}, {
		name: "no read timeout",
		spec: vertex.Spec{Name: "x", Source: emptySource, Sink: blackhole, Limits: vertex.Limits{ReadBatchSize: 1}},
		check: func(err error) bool {
			return strings.Contains(err.Error(), "vertex x: read timeout (0s) must be positive")
		},
	}, {
		name: "source fails",
		spec: vertex.Spec{Name: "x", Limits: limits, Sink: blackhole,
			Source: func(vertex.Env) (isb.Reader, error) { return nil, errSource }},
		check: func(err error) bool { return errors.Is(err, errSource) },
	}, {
		name: "source without a reader",
		spec: vertex.Spec{Name: "x", Limits: limits, Sink: blackhole,
			Source: func(vertex.Env) (isb.Reader, error) { return nil, nil }},
		check: func(err error) bool {
			return strings.Contains(err.Error(), "vertex x: its source function returned no source")
		},
	}, {
		name: "sink fails",
		spec: vertex.Spec{Name: "x", Limits: limits, Source: emptySource,
			Sink: func(vertex.Env) (isb.Writer, error) { return nil, errSink }},
		check: func(err error) bool { return errors.Is(err, errSink) },
	}, {
		name: "map fails",
		spec: vertex.Spec{Name: "x", Limits: limits, Source: emptySource, Sink: blackhole,
			Map: func(vertex.Env) (udf.Mapper, error) { return nil, errMap }},
		check: func(err error) bool { return errors.Is(err, errMap) },
	}, {
		name: "replica beyond a fixed replica count",
		spec: vertex.Spec{Name: "x", Limits: vertex.Limits{ReadBatchSize: 1, ReadTimeout: time.Second,
			RateLimit: &vertex.RateLimit{Config: ratelimit.DefaultConfig(10),
				Store: func(vertex.Env) (vertex.Store, error) { return vertex.Store{Replicas: 2}, nil }}},
			Source: emptySource, Sink: blackhole},
		opts: []vertex.Option{vertex.WithReplica(2)},
		check: func(err error) bool {
			return errors.Is(err, vertex.ErrReplica) && strings.Contains(err.Error(), "2 is not below the 2 replicas")
		},
	}, {
		name: "http token unreadable",
		spec: vertexconfig.FromMonoVertex(monoVertex(t, "tok", "  source:\n    http:\n      auth:\n        token:\n          file: "+missing+"\n  sink:\n    log: {}\n")),
		check: func(err error) bool {
			var fe *config.FieldError
			return errors.As(err, &fe) && fe.Path == "spec.source.http.auth.token"
		},
	}, {
		name: "replica beyond the count",
		spec: vertexconfig.FromMonoVertex(monoVertex(t, "rc", "  limits:\n    rateLimit:\n      max: 10\n      store:\n        replicaCountStore:\n          replicas: 2\n  source:\n    generator: {}\n  sink:\n    log: {}\n")),
		opts: []vertex.Option{vertex.WithReplica(2)},
		check: func(err error) bool {
			return errors.Is(err, vertex.ErrReplica) && strings.Contains(err.Error(), "replicaCountStore.replicas")
		},
	}, {
		name: "no replica count",
		spec: vertexconfig.FromMonoVertex(monoVertex(t, "rc", "  limits:\n    rateLimit:\n      max: 10\n      store:\n        replicaCountStore: {}\n  source:\n    generator: {}\n  sink:\n    log: {}\n")),
		check: func(err error) bool {
			var fe *config.FieldError
			return errors.As(err, &fe) && fe.Path == "spec.limits.rateLimit.store.replicaCountStore.replicas" &&
				strings.Contains(err.Error(), "NUMAFLOW_REPLICAS")
		},
	}, {
		name: "bad replica count",
		spec: vertexconfig.FromMonoVertex(monoVertex(t, "rc", "  limits:\n    rateLimit:\n      max: 10\n      store:\n        replicaCountStore: {}\n  source:\n    generator: {}\n  sink:\n    log: {}\n")),
		env:  "two",
		check: func(err error) bool {
			return strings.Contains(err.Error(), `NUMAFLOW_REPLICAS ("two")`)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NUMAFLOW_REPLICAS", tt.env)
			v, err := vertex.New(tt.spec, tt.opts...)
			if err == nil {
				v.Close()
				t.Fatal("New succeeded")
			}
			if !tt.check(err) {
				t.Fatalf("New = %v", err)
			}
		})
	}
}

// TestReplicaCountStore checks that a replica of a fixed count of replicas takes its
// rank's share.
func TestReplicaCountStore(t *testing.T) {
	t.Setenv("NUMAFLOW_REPLICAS", "3")
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	spec := vertexconfig.FromMonoVertex(monoVertex(t, "rc", "  limits:\n    rateLimit:\n      max: 100\n      min: 100\n      rampUpDuration: 0s\n      store:\n        replicaCountStore: {}\n  source:\n    generator: {}\n  sink:\n    blackhole: {}\n"))
	for rank, want := range []int64{34, 33, 33} {
		v, err := vertex.New(spec, vertex.WithReplica(rank), vertex.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		if s := v.Status(); s.Share != want || s.Replicas != 3 || s.Rank != rank {
			t.Errorf("replica %d: status %+v; want share %d of 3", rank, s, want)
		}
		v.Close()
	}
}
