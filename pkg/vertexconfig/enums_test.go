package vertexconfig

import (
	"encoding"
	"fmt"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/config"

	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
	"github.com/sluiceflow/sluice/pkg/isb/route"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// named is a config enumeration: a value that prints and parses its YAML name.
type named interface {
	fmt.Stringer
	encoding.TextUnmarshaler
}

func TestEnumNames(t *testing.T) {
	tests := []struct {
		name  string
		new   func() named
		names []string // in value order, from the zero value
		want  string   // the list an unknown name's error gives
		zero  string   // the zero value's String
	}{
		{"config.RedisMode", func() named { return new(config.RedisMode) }, []string{"", "single", "sentinel", "cluster"}, "single, sentinel or cluster", ""},
		{"forward.OnFailure", func() named { return new(forward.OnFailure) }, []string{"retry", "fallback", "drop"}, "retry, fallback or drop", "retry"},
		{"isb.SignalKind", func() named { return new(isb.SignalKind) }, []string{"", "http429", "http503", "sinkRateLimited", "mapRateLimited"},
			"http429, http503, sinkRateLimited or mapRateLimited", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.new().String(); got != tt.zero {
				t.Errorf("zero value String() = %q, want %q", got, tt.zero)
			}
			for _, name := range tt.names {
				if name == "" {
					continue
				}
				v := tt.new()
				if err := v.UnmarshalText([]byte(name)); err != nil || v.String() != name {
					t.Errorf("UnmarshalText(%q) = %v, String() %q", name, err, v.String())
				}
			}
			for _, bad := range []string{"", "bogus", strings.ToUpper(tt.names[len(tt.names)-1])} {
				v := tt.new()
				err := v.UnmarshalText([]byte(bad))
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q (want %s)", bad, tt.want)) {
					t.Errorf("UnmarshalText(%q) = %v, want an error naming it and listing %s", bad, err, tt.want)
				}
				if v.String() != tt.zero {
					t.Errorf("UnmarshalText(%q) changed the value to %v", bad, v)
				}
			}
		})
	}
	for _, v := range []fmt.Stringer{config.RedisMode(7), forward.OnFailure(7), isb.SignalKind(7)} {
		if got := v.String(); !strings.HasSuffix(got, "(7)") {
			t.Errorf("%T(7).String() = %q", v, got)
		}
	}
}

// enumPipeline sets every enum field to a value other than its default.
const enumPipeline = `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
  isb:
    jetstream:
      url: nats://localhost:4222
      storage: memory
  limits:
    rateLimit:
      max: 10
      onStoreFailure: pause
      store:
        redisStore:
          mode: sentinel
          sentinel:
            masterName: m
            endpoints: [localhost:26379]
  vertices:
    - name: in
      source:
        generator: {}
    - name: out
      sink:
        log: {}
        fallback:
          log: {}
        retryStrategy:
          onFailure: drop
  edges:
    - from: in
      to: out
      onFull: discardLatest
      conditions:
        tags:
          operator: not
          values: [x]
`

func TestEnumFields(t *testing.T) {
	s := mustParse(t, enumPipeline).Pipeline.Spec
	if got := Storage(s.ISB.JetStream); got != jetstream.MemoryStorage {
		t.Errorf("storage = %v, want memory", got)
	}
	rl := s.Limits.RateLimit
	if got := LimiterConfig(rl).OnStoreFailure; got != ratelimit.Pause {
		t.Errorf("onStoreFailure = %v, want pause", got)
	}
	if got := rl.Store.RedisStore.Mode; got != config.RedisModeSentinel {
		t.Errorf("redisStore.mode = %v, want sentinel", got)
	}
	if got, ok := OnFailure(s.Vertices[1].Sink.RetryStrategy); !ok || got != forward.Drop {
		t.Errorf("onFailure = %v, want drop", got)
	}
	e := s.Edges[0]
	if OnFull(&e) != route.DiscardLatest || Operator(e.Conditions.Tags) != route.Not {
		t.Errorf("edge onFull %v, operator %v; want discardLatest, not", OnFull(&e), Operator(e.Conditions.Tags))
	}

	// Unset, the getters give the defaults.
	var js *config.JetStreamISB
	if got := Storage(js); got != jetstream.FileStorage {
		t.Errorf("Storage(nil) = %v, want file", got)
	}
	if got := OnFull(&config.Edge{}); got != route.RetryUntilSuccess {
		t.Errorf("OnFull of an edge without onFull = %v, want retryUntilSuccess", got)
	}
	if got := Operator(&config.TagConditions{}); got != route.Or {
		t.Errorf("Operator of tags without operator = %v, want or", got)
	}
}
