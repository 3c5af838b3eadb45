package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
)

// keyEpochLog is a replica's per-key account of one epoch (the debug log
// "perKey epoch"): the tokens granted to each key, the most first.
type keyEpochLog struct {
	Epoch   int64
	Granted int64
	Keys    int
	Top     map[string]int64
}

// keyEpochs adds up the per-key grants of every replica by epoch and key.
func keyEpochs(t *testing.T, procs []*proc) map[int64]map[string]int64 {
	t.Helper()
	out := map[int64]map[string]int64{}
	for _, p := range procs {
		for _, line := range strings.Split(p.stderrText(), "\n") {
			if !strings.Contains(line, `"msg":"perKey epoch"`) {
				continue
			}
			var l keyEpochLog
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("perKey epoch log %q: %v", line, err)
			}
			if len(l.Top) != l.Keys {
				t.Fatalf("log %q names %d of %d keys", line, len(l.Top), l.Keys)
			}
			if out[l.Epoch] == nil {
				out[l.Epoch] = map[string]int64{}
			}
			for k, n := range l.Top {
				out[l.Epoch][k] += n
			}
		}
	}
	return out
}

// TestPerKeyLimitThroughRedis runs three replicas of a MonoVertex sharing a
// limit of 1000 a second and 50 a second per key through Redis. Each
// generator makes 380 messages a second over ten keys, the same on every
// replica, one of them ten times as often as each other: 600 a second of the
// hot key and 60 of each cold one, all replicas together. Every key gets at
// most 50 in every second over the three replicas, exactly; the hot key gets
// its 50 in most seconds, and its backlog waits in the replicas' holds and
// does not slow the others, which get their 50 a second, so the vertex moves
// 500 a second.
func TestPerKeyLimitThroughRedis(t *testing.T) {
	t.Parallel()
	const max, perKey, replicas = 1000, 50, 3
	srv := redistest.Start(t, redistest.Options{})
	keys := []string{"hot", "hot", "hot", "hot", "hot", "hot", "hot", "hot", "hot", "hot"}
	for i := 1; i <= 9; i++ {
		keys = append(keys, "cold-"+strconv.Itoa(i))
	}
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: perkey
spec:
  limits:
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
      perKey:
        max: %d
        maxHeld: 20000
      store:
        redisStore:
          mode: single
          url: redis://%s
  source:
    generator:
      rpu: %d
      duration: 1s
      keys: [%s]
  sink:
    blackhole: {}
`, max, max, perKey, srv.Addr, 20*len(keys), strings.Join(keys, ", ")))
	procs, addrs := startReplicas(t, cfg, replicas)
	// full are the seconds with every replica agreed, in it the
	// second before too, and not the first or last second logged.
	fullSeconds := func() []int64 {
		_, eligible := sumEpochs(t, procs)
		epochs := slices.Sorted(maps.Keys(keyEpochs(t, procs)))
		var out []int64
		for i, e := range epochs {
			if i > 0 && i < len(epochs)-1 && eligible[e] == replicas && eligible[e-1] == replicas {
				out = append(out, e)
			}
		}
		return out
	}
	runtest.WaitFor(t, "8 seconds with every replica agreed", func() bool { return len(fullSeconds()) >= 8 }, untilEpochs...)
	var held float64
	for _, a := range addrs {
		held += metricValues(t, a, "sluice_ratelimit_key_held_messages")["perkey"]
	}
	for _, p := range procs {
		if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
	}
	granted, eligible := sumEpochs(t, procs)
	for e, g := range granted {
		if g > max {
			t.Errorf("epoch %d: the vertex granted %d; max %d", e, g, max)
		}
	}
	byKey := keyEpochs(t, procs)
	epochs := slices.Sorted(maps.Keys(byKey))
	for _, e := range epochs {
		var line []string
		for _, k := range slices.Sorted(maps.Keys(byKey[e])) {
			n := byKey[e][k]
			if n > perKey {
				t.Errorf("epoch %d: key %s granted %d over the replicas; max %d", e, k, n, perKey)
			}
			line = append(line, fmt.Sprintf("%s=%d", k, n))
		}
		t.Logf("epoch %d (%d eligible, vertex granted %d): %s", e, eligible[e], granted[e], strings.Join(line, " "))
	}
	full := fullSeconds()
	if len(full) < 5 {
		t.Fatalf("%d seconds with every replica agreed; want at least 5", len(full))
	}
	sum := func(e int64) (n int64) {
		for _, c := range byKey[e] {
			n += c
		}
		return n
	}
	var total int64
	for _, e := range full {
		total += sum(e)
	}
	rate := float64(total) / float64(len(full))
	t.Logf("%d full seconds: %.1f messages a second; %v held at the end", len(full), rate, held)
	if rate > 10*perKey {
		t.Errorf("%.1f messages a second; want at most %d, each of 10 keys at its limit", rate, 10*perKey)
	}
	// Most seconds move 95% of the 500, and give every key 95% of its 50:
	// the hot key's backlog slows no other key. (A second in which the
	// machine ran a replica late moves less, and the keys' supply, above
	// their limit, cannot make it up in the next.)
	mostReach(t, "the vertex at 95% of 500", full, 10*perKey*95/100, 5, sum)
	mostReach(t, "the hot key at its limit", full, perKey, 5, func(e int64) int64 { return byKey[e]["hot"] })
	for i := 1; i <= 9; i++ {
		k := "cold-" + strconv.Itoa(i)
		mostReach(t, "cold key "+k+" at 95% of its limit beside the hot key", full, perKey*95/100, 5,
			func(e int64) int64 { return byKey[e][k] })
	}
	if held < 1000 {
		t.Errorf("%v messages held at the end; the hot key's backlog should wait in the holds", held)
	}
}

// TestPerKeyHotKeyOnJetStream runs a pipeline on JetStream whose middle
// vertex limits each key to 20 a second, with the default hold of four read
// batches (200 messages): the generator makes 200 a second of a hot key and
// 20 of each of four cold ones. The hold fills with the hot key's excess
// within two seconds; from then on its newest messages go back to the
// buffer, to come again later, so the hot key gets its 20 in most seconds
// and the cold keys theirs (20 a second, as the generator makes them), and
// no key more in any second.
func TestPerKeyHotKeyOnJetStream(t *testing.T) {
	t.Parallel()
	const perKey = 20
	nats := natstest.Start(t, natstest.Options{})
	keys := []string{"hot", "hot", "hot", "hot", "hot", "hot", "hot", "hot", "hot", "hot", "cold-1", "cold-2", "cold-3", "cold-4"}
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: hotkey
spec:
  isb:
    jetstream:
      url: %s
  limits:
    readBatchSize: 50
    readTimeout: 100ms
  vertices:
    - name: in
      source:
        generator:
          rpu: %d
          duration: 1s
          keys: [%s]
    - name: limited
      limits:
        rateLimit:
          max: 1000
          min: 1000
          rampUpDuration: 0s
          perKey:
            max: %d
      udf:
        builtin:
          name: cat
    - name: out
      sink:
        blackhole: {}
  edges:
    - from: in
      to: limited
    - from: limited
      to: out
`, nats.URL, 20*len(keys), strings.Join(keys, ", "), perKey))
	p := start(t, "run", "-f", cfg, "--isb", "jetstream", "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
	addr := p.metricsAddr()
	runtest.WaitFor(t, "12 seconds of per-key epochs", func() bool { return len(keyEpochs(t, []*proc{p})) >= 12 }, untilEpochs...)
	handedBack := metricValues(t, addr, "sluice_ratelimit_key_handed_back_total")["limited"]
	if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
	byKey := keyEpochs(t, []*proc{p})
	epochs := slices.Sorted(maps.Keys(byKey))
	if len(epochs) < 10 {
		t.Fatalf("%d seconds logged; want at least 10", len(epochs))
	}
	for _, e := range epochs {
		for k, n := range byKey[e] {
			if n > perKey {
				t.Errorf("epoch %d: key %s granted %d; max %d", e, k, n, perKey)
			}
		}
	}
	// From the fourth second, well after the hold filled, to the one
	// before the last, the hot key, whose backlog never runs dry, gets its
	// 20 in most seconds (all but those in which the machine did not run
	// the vertex for a while). A cold key gets what the generator made of
	// it in the second, which a late generator tick on a loaded machine
	// moves into the next (19, then 20 and one held).
	late := epochs[3 : len(epochs)-1]
	for _, e := range late {
		t.Logf("epoch %d: %v", e, byKey[e])
	}
	mostReach(t, "the hot key at its limit", late, perKey, 4, func(e int64) int64 { return byKey[e]["hot"] })
	// A cold key's supply is its limit: a second the machine ran the
	// generator or the vertex late is not made up later. Most seconds give
	// it 90% of its 20 (or all of it, less what a late tick moved into the
	// next second).
	for _, k := range []string{"cold-1", "cold-2", "cold-3", "cold-4"} {
		mostReach(t, k+" at 90% of its limit beside the hot key's backlog", late, perKey*9/10, 4,
			func(e int64) int64 { return byKey[e][k] })
	}
	if handedBack == 0 {
		t.Error("nothing handed back to the buffer; the hot key's backlog should have filled the hold")
	}
	t.Logf("%v messages handed back over %d seconds", handedBack, len(epochs))
}
