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
	// full are the seconds with every replica in the pool, in it the
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
	waitUntil(t, epochWait, "8 seconds with every replica in the pool", func() bool { return len(fullSeconds()) >= 8 })
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
		t.Fatalf("%d seconds with every replica in the pool; want at least 5", len(full))
	}
	var total int64
	perCold := map[string]int64{}
	for _, e := range full {
		for k, n := range byKey[e] {
			total += n
			if k != "hot" {
				perCold[k] += n
			}
		}
	}
	mostReach(t, "the hot key at its limit", full, perKey, 5, func(e int64) int64 { return byKey[e]["hot"] })
	rate := float64(total) / float64(len(full))
	t.Logf("%d full seconds: %.1f messages a second; %v held at the end", len(full), rate, held)
	if rate < 0.95*10*perKey || rate > 10*perKey {
		t.Errorf("%.1f messages a second; want about %d, each of 10 keys at its limit", rate, 10*perKey)
	}
	for i := 1; i <= 9; i++ {
		k := "cold-" + strconv.Itoa(i)
		if r := float64(perCold[k]) / float64(len(full)); r < 0.95*perKey {
			t.Errorf("cold key %s got %.1f a second beside the hot key; want its %d", k, r, perKey)
		}
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
// and the cold keys all of theirs (20 a second, on average), and no key
// more in any second.
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
	waitUntil(t, epochWait, "12 seconds of per-key epochs", func() bool { return len(keyEpochs(t, []*proc{p})) >= 12 })
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
	// 20 a second, and each cold key what the generator made of it in the
	// second. Both are utilisation, asserted over the window with a bound:
	// a second in which a loaded machine ran the generator or the vertex
	// late (a cold key's 0, then 20 and one held) moves a second's worth
	// out of the window, and a hot key starving the cold ones would take
	// most of theirs in every second.
	late := epochs[3 : len(epochs)-1]
	perKeyTotal := map[string]int64{}
	for _, e := range late {
		t.Logf("epoch %d: %v", e, byKey[e])
		for _, k := range []string{"hot", "cold-1", "cold-2", "cold-3", "cold-4"} {
			perKeyTotal[k] += byKey[e][k]
		}
	}
	for k, n := range perKeyTotal {
		const want = 0.75 // two seconds of eight lost to the scheduler
		if r := float64(n) / float64(len(late)); r < want*perKey {
			t.Errorf("key %s got %.1f a second over %d seconds beside the hot key's backlog; want at least %.0f%% of its %d", k, r, len(late), 100*want, perKey)
		}
	}
	if handedBack == 0 {
		t.Error("nothing handed back to the buffer; the hot key's backlog should have filled the hold")
	}
	t.Logf("%v messages handed back over %d seconds", handedBack, len(epochs))
}
