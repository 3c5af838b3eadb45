package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
)

const reloadConfig = `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: reload
spec:
  limits:
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: 1
      rampUpDuration: 0s
      store:
        redisStore:
          mode: single
          url: %s
  source:
    generator:
      rpu: 400
      duration: 1s
  sink:
    blackhole: {}
`

// replaceFile writes data to path as a ConfigMap update does: into a new
// file, renamed over the old one.
func replaceFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".next")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reloads returns sluice_config_reloads_total of a replica by result.
func reloads(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	_, body := httpGet(t, "http://"+addr+"/metrics")
	out := map[string]float64{}
	re := regexp.MustCompile(`(?m)^sluice_config_reloads_total\{[^}]*result="(\w+)"[^}]*\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		out[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	return out
}

// waitMax polls /status of every replica until each has max in force and
// the count of 3 agreed, for at most 30s (a busy machine's bound: it takes
// a second or two on an idle one).
func waitMax(t *testing.T, addrs []string, max int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range addrs {
		for {
			var st struct {
				Max      int64 `json:"max"`
				Replicas int   `json:"poolSize"`
			}
			_, body := httpGet(t, "http://"+a+"/status")
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatalf("/status: %v: %s", err, body)
			}
			if st.Max == max && st.Replicas == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /status %s; want max %d among 3 replicas", a, body, max)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestLiveLimitChangeThroughRedis runs three replicas of one config file
// sharing a limit of 300 a second through Redis, each reading a generator of
// 400 a second, and changes the file's max to 600 and then to 150 while they
// run: every replica switches at the same epoch boundary, no epoch grants
// more than its limit, the switching epochs no more than the smaller of the
// two, and most epochs between grant exactly their limit. A change of the
// store is then refused, with one log line per replica, and the limit stays.
func TestLiveLimitChangeThroughRedis(t *testing.T) {
	t.Parallel()
	const replicas = 3
	srv := redistest.Start(t, redistest.Options{})
	url := "redis://" + srv.Addr
	cfg := writeConfig(t, fmt.Sprintf(reloadConfig, 300, url))
	procs, addrs := startReplicas(t, cfg, replicas, "--reload-interval", "100ms")
	// epochsAt waits until every replica has logged two epochs with max in
	// force, other than the one it switched in.
	epochsAt := func(max int64) {
		runtest.WaitFor(t, fmt.Sprintf("two epochs of every replica at max %d", max), func() bool {
			at := map[int64]int{}
			for _, p := range procs {
				for e, l := range p.epochs(t) {
					if l.Eligible && l.Max == max && !l.Switched {
						at[e]++
					}
				}
			}
			n := 0
			for _, c := range at {
				if c == replicas {
					n++
				}
			}
			return n >= 2
		}, untilEpochs...)
	}
	waitMax(t, addrs, 300)
	epochsAt(300)
	replaceFile(t, cfg, fmt.Sprintf(reloadConfig, 600, url))
	waitMax(t, addrs, 600)
	epochsAt(600)
	replaceFile(t, cfg, fmt.Sprintf(reloadConfig, 150, url))
	waitMax(t, addrs, 150)
	epochsAt(150)
	replaceFile(t, cfg, fmt.Sprintf(reloadConfig, 999, "redis://127.0.0.1:1"))
	runtest.WaitFor(t, "every replica to refuse the change of the store", func() bool {
		for _, a := range addrs {
			if reloads(t, a)["refused"] < 1 {
				return false
			}
		}
		return true
	}, untilEpochs...)
	waitMax(t, addrs, 150)
	for i, a := range addrs {
		if got := reloads(t, a); got["applied"] != 2 || got["refused"] != 1 {
			t.Errorf("replica %d: sluice_config_reloads_total %v; want 2 applied, 1 refused", i, got)
		}
	}
	for _, p := range procs {
		if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}

	for i, p := range procs {
		if n := strings.Count(p.stderrText(), "config reload refused"); n != 1 {
			t.Errorf("replica %d logged %d refusals; want one, for the store's url", i, n)
		}
		if !strings.Contains(p.stderrText(), "spec.limits.rateLimit.store.redisStore.url changed") {
			t.Errorf("replica %d: the refusal does not name the store's url", i)
		}
	}
	granted, maxes, eligible := map[int64]int64{}, map[int64]map[int64]bool{}, map[int64]int{}
	switched := map[int64]int{}
	for _, p := range procs {
		for e, l := range p.epochs(t) {
			granted[e] += l.Granted
			if l.Eligible {
				eligible[e]++
				if maxes[e] == nil {
					maxes[e] = map[int64]bool{}
				}
				maxes[e][l.Max] = true
			}
			if l.Switched {
				switched[e]++
			}
		}
	}
	// The epochs every replica took part in, with the one max they all had.
	var seq []int64
	var limit []int64
	for _, e := range slices.Sorted(maps.Keys(granted)) {
		if eligible[e] != replicas {
			continue // joining or leaving
		}
		if len(maxes[e]) != 1 {
			t.Fatalf("epoch %d: the replicas had max %v; want one", e, maxes[e])
		}
		seq = append(seq, e)
		limit = append(limit, slices.Collect(maps.Keys(maxes[e]))[0])
	}
	var sw []int64
	for e, n := range switched {
		if n != replicas {
			t.Errorf("epoch %d: %d replicas switched; want all %d at once", e, n, replicas)
		}
		sw = append(sw, e)
	}
	slices.Sort(sw)
	var lines []string
	for i, e := range seq {
		lines = append(lines, fmt.Sprintf("%d:%d/%d", e, granted[e], limit[i]))
	}
	t.Logf("epoch:granted/max %s; switched at %v", strings.Join(lines, " "), sw)
	if len(sw) != 2 {
		t.Fatalf("switched at epochs %v; want two switches", sw)
	}
	interior := map[int64][]int64{} // by limit, its epochs but the switches, the first and the last
	for i, e := range seq {
		bound := limit[i]
		if slices.Contains(sw, e) {
			bound = min(bound, limit[i-1])
		}
		if granted[e] > bound {
			t.Errorf("epoch %d granted %d; its bound is %d", e, granted[e], bound)
		}
		if i > 0 && i < len(seq)-1 && !slices.Contains(sw, e) {
			interior[bound] = append(interior[bound], e)
		}
	}
	// Each limit is used in full, in most of its epochs (all but those in
	// which the machine did not run a replica for a while).
	for _, bound := range []int64{300, 600, 150} {
		mostReach(t, fmt.Sprintf("the limit of %d", bound), interior[bound], bound, 1, func(e int64) int64 { return granted[e] })
	}
	if want := []int64{300, 600, 150}; !slices.Equal(slices.Compact(slices.Clone(limit)), want) {
		t.Errorf("limits in order %v; want %v", slices.Compact(slices.Clone(limit)), want)
	}
}
