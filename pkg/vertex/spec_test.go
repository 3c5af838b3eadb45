package vertex_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/memstore"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// TestSpecOfGoValues builds a vertex from Go values alone: every constructor
// gets the vertex's Env, once for the source and once per forwarder for the
// functions and sinks; the rate limit shares a store that counts keys too,
// and its live settings change with UpdateRateLimit.
func TestSpecOfGoValues(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	store := memstore.New(clk)
	var envs []vertex.Env
	called := map[string]int{}
	note := func(what string, env vertex.Env) {
		called[what]++
		envs = append(envs, env)
	}
	spec := vertex.Spec{
		Name: "go",
		Limits: vertex.Limits{ReadBatchSize: 10, ReadTimeout: time.Second,
			RateLimit: &vertex.RateLimit{
				Config: ratelimit.Config{Max: 100, Min: 100, Adaptive: true, CutPercentage: 50},
				Store: func(env vertex.Env) (vertex.Store, error) {
					note("store", env)
					return vertex.Store{Shared: store}, nil
				},
				ExcludeDropped: true,
				Signals:        []isb.SignalKind{isb.SignalHTTP429},
				PerKey:         &vertex.PerKey{Config: ratelimit.KeyConfig{Max: 10}, Keys: ratelimit.AllKeys, MaxHeld: 40},
			}},
		Source: func(env vertex.Env) (isb.Reader, error) {
			note("source", env)
			return memory.New("in", 10, env.Limits.ReadTimeout, env.Clock), nil
		},
		Transformer: func(env vertex.Env) (udf.Mapper, error) {
			note("transformer", env)
			return udf.NewBuiltinTransformer("filter", map[string]string{"expression": "true"}, env.Log)
		},
		Map: func(env vertex.Env) (udf.Mapper, error) {
			note("map", env)
			return udf.NewBuiltin("cat", nil, env.Log)
		},
		Sink: func(env vertex.Env) (isb.Writer, error) {
			note("sink", env)
			return env.LogSink, nil
		},
		Fallback: func(env vertex.Env) (isb.Writer, error) {
			note("fallback", env)
			return sink.Blackhole{}, nil
		},
	}
	_, sinkOpt := logSink()
	v, err := vertex.New(spec, vertex.WithClock(clk), vertex.WithReplica(3), vertex.WithSocketDir("/run/ud"), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, what := range []string{"store", "source", "transformer", "map", "sink", "fallback"} {
		if called[what] != 1 {
			t.Errorf("%s constructor called %d times; want once", what, called[what])
		}
	}
	for _, env := range envs {
		if env.Name != "go" || env.StoreKey != "go" || env.Replica != 3 || env.SocketDir != "/run/ud" ||
			env.Limits.ReadBatchSize != 10 || env.Clock != clk || env.Log == nil || env.LogSink == nil {
			t.Fatalf("env %+v", env)
		}
	}
	if got := envs[0].RetryAfter(); got <= 0 || got > time.Second {
		t.Errorf("RetryAfter = %v; want the time to the next epoch", got)
	}
	s := v.Status()
	if !s.RateLimit || s.Max != 100 || s.PerKey == nil || s.PerKey.Max != 10 || s.PerKey.Keys != "all" || !v.IsSink() {
		t.Fatalf("status %+v, per key %+v", s, s.PerKey)
	}
	cfg := ratelimit.Config{Max: 50, Min: 50, Adaptive: true, CutPercentage: 50}
	if err := v.UpdateRateLimit(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := v.UpdateRateLimit(nil); err == nil || !strings.Contains(err.Error(), "cannot be added or removed") {
		t.Fatalf("UpdateRateLimit(nil) = %v", err)
	}
}

// TestStoreErrors: a store constructor's error is New's; a vertex without a
// rate limit cannot get one live.
func TestStoreErrors(t *testing.T) {
	errStore := errors.New("no store today")
	spec := vertex.Spec{Name: "x", Source: emptySource, Sink: blackhole,
		Limits: vertex.Limits{ReadBatchSize: 1, ReadTimeout: time.Second, RateLimit: &vertex.RateLimit{
			Config: ratelimit.DefaultConfig(10),
			Store:  func(vertex.Env) (vertex.Store, error) { return vertex.Store{}, errStore }}}}
	if _, err := vertex.New(spec); !errors.Is(err, errStore) {
		t.Fatalf("New = %v; want the store's error", err)
	}
	spec.Limits.RateLimit = nil
	v, err := vertex.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	cfg := ratelimit.DefaultConfig(10)
	if err := v.UpdateRateLimit(&cfg); err == nil {
		t.Fatal("UpdateRateLimit added a rate limit")
	}
}

// TestSharedWriter: the forwarders of a vertex, one per input, share a
// writer opened with Env.Shared; another vertex of the same Spec opens its own.
func TestSharedWriter(t *testing.T) {
	opened, calls := 0, 0
	spec := vertex.Spec{Name: "shared", Limits: limits,
		Inputs: []isb.Reader{memory.New("a", 10, time.Second, clock.Real()), memory.New("b", 10, time.Second, clock.Real())},
		Sink: func(env vertex.Env) (isb.Writer, error) {
			calls++
			return env.Shared("sink", func() (isb.Writer, error) {
				opened++
				return sink.Blackhole{}, nil
			})
		}}
	for i := 1; i <= 2; i++ {
		v, err := vertex.New(spec)
		if err != nil {
			t.Fatal(err)
		}
		v.Close()
		if calls != 2*i || opened != i {
			t.Fatalf("vertex %d: sink called %d times, opened %d; want %d and %d", i, calls, opened, 2*i, i)
		}
	}
	errOpen := errors.New("cannot open")
	spec.Sink = func(env vertex.Env) (isb.Writer, error) {
		return env.Shared("sink", func() (isb.Writer, error) { return nil, errOpen })
	}
	if _, err := vertex.New(spec); !errors.Is(err, errOpen) {
		t.Fatalf("New = %v; want the open error", err)
	}
}
