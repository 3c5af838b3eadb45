package vertex_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// restartSpec is a generator → blackhole MonoVertex whose limit ramps from
// 10 to 1,000 a second over 4 s, shared through the Redis at addr with a
// ttl of 2 s and resumedRampUp, scaled within [1, 10].
func restartSpec(t *testing.T, addr string) vertex.Spec {
	return vertexconfig.FromMonoVertex(monoVertex(t, "restart", fmt.Sprintf(`  limits:
    readTimeout: 100ms
    rateLimit:
      max: 1000
      min: 10
      rampUpDuration: 4s
      resumedRampUp: true
      ttl: 2s
      syncInterval: 20ms
      store:
        redisStore:
          mode: single
          url: redis://%s
  scale:
    min: 1
    max: 10
    lookbackSeconds: 1
    scaleUpCooldownSeconds: 0
    scaleDownCooldownSeconds: 0
  source:
    generator:
      rpu: 100000
  sink:
    blackhole: {}
`, addr)))
}

// startReplicas starts n replicas of spec and returns them with their runs.
func startReplicas(t *testing.T, spec vertex.Spec, n int) ([]*vertex.Vertex, []*runtest.Run) {
	t.Helper()
	var vs []*vertex.Vertex
	var rs []*runtest.Run
	for i := range n {
		v, err := vertex.New(spec, vertex.WithReplica(i))
		if err != nil {
			t.Fatal(err)
		}
		vs, rs = append(vs, v), append(rs, runtest.Start(t, v))
	}
	return vs, rs
}

// firstPool waits for v's first epoch in its replica set and returns its
// pool then.
func firstPool(t *testing.T, v *vertex.Vertex) float64 {
	t.Helper()
	var pool float64
	runtest.WaitFor(t, "the first epoch of the replica set", func() bool {
		s := v.Status()
		pool = s.Pool
		return s.Replicas > 0 && s.Pool > 0
	}, runtest.Every(time.Millisecond))
	return pool
}

// TestReplicaSetBackAfterTTL stops a replica set of three sharing a ramping
// limit through a real redis-server once its pool is past 400 a second, as a
// pause or a scale to zero does. A replica that comes back within the
// store's ttl resumes the ramp from the pool the last one left, below max;
// one that comes back after the ttl, once the saved pool has expired, starts
// its ramp at min (10) and the scale rule asks for no more replicas than
// the one there is: never the old count with a full pool.
func TestReplicaSetBackAfterTTL(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	spec := restartSpec(t, srv.Addr)
	vs, rs := startReplicas(t, spec, 3)
	runtest.WaitFor(t, "the ramp past 400/s", func() bool { return vs[0].Status().Pool >= 400 }, runtest.Within(30*time.Second))
	for _, r := range rs {
		if err := r.Stop(t); err != nil {
			t.Fatal(err)
		}
	}

	// Within the ttl: the ramp resumes, below max.
	vs, rs = startReplicas(t, spec, 1)
	p := firstPool(t, vs[0])
	t.Logf("back within the ttl: the pool starts at %v", p)
	if p < 400 || p >= 1000 {
		t.Errorf("back within the ttl, the pool starts at %v; want the ramp resumed, from 400 to below 1000", p)
	}
	if err := rs[0].Stop(t); err != nil {
		t.Fatal(err)
	}

	// After the ttl: the ramp starts again at min.
	runtest.WaitFor(t, "the saved pool expired", func() bool {
		return len(srv.Do(t, "KEYS", "*resume").([]any)) == 0
	}, runtest.Within(20*time.Second), runtest.Every(100*time.Millisecond))
	vs, rs = startReplicas(t, spec, 1)
	p = firstPool(t, vs[0])
	t.Logf("back after the ttl: the pool starts at %v", p)
	if p > 10+247.5 {
		t.Errorf("back after the ttl, the pool starts at %v; want min (10), at most one step of the ramp (247.5) above", p)
	}
	var d autoscale.Decision
	runtest.WaitFor(t, "the rule's first answer", func() bool {
		var at time.Time
		d, at = vs[0].Desired()
		return !at.IsZero()
	})
	if d.Replicas != 1 {
		t.Errorf("back after the ttl, the rule asks for %+v; want the 1 replica there is", d)
	}
	if err := rs[0].Stop(t); err != nil {
		t.Fatal(err)
	}
}
