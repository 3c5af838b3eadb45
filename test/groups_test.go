package test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
)

// TestGroupThroughRedis runs three replicas of each of two MonoVertices,
// each limited to 400 a second and both in the shared limit partner-api of
// 500 a second, through one redis-server. No epoch grants more than 500 of
// the group, neither vertex more than its 400, the group is used to 95% in
// most epochs once every replica is in it, and Redis sees at most 12
// commands per replica per second for both limits.
func TestGroupThroughRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	store := "          mode: single\n          url: redis://" + srv.Addr
	group := "      groups:\n        - {name: partner-api, max: 500, min: 500, rampUpDuration: 0s}\n"
	var procs []*proc
	byVertex := map[string][]*proc{}
	for _, name := range []string{"orders", "refunds"} {
		cfg := writeConfig(t, redisVertexYAML(name, 400, store, group))
		for i := range 3 {
			p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", strconv.Itoa(i), "--log-level", "debug")
			procs = append(procs, p)
			byVertex[name] = append(byVertex[name], p)
		}
	}
	for _, p := range procs {
		p.metricsAddr()
	}
	// groupEpochs returns what the group granted by epoch, and the
	// replicas in it with all six agreed.
	groupEpochs := func() (map[int64]int64, map[int64]int) {
		granted, eligible := map[int64]int64{}, map[int64]int{}
		for _, p := range procs {
			for e, l := range p.logEpochs(t, "group epoch") {
				granted[e] += l.Granted
				if l.Eligible && l.Replicas == 6 {
					eligible[e]++
				}
			}
		}
		return granted, eligible
	}
	// fullEpochs are the epochs with every replica in the group.
	fullEpochs := func(eligible map[int64]int) []int64 {
		var out []int64
		for e, n := range eligible {
			if n == 6 {
				out = append(out, e)
			}
		}
		slices.Sort(out)
		return out
	}
	runtest.WaitFor(t, "an epoch with all six replicas in the group", func() bool {
		_, eligible := groupEpochs()
		return len(fullEpochs(eligible)) > 0
	}, untilEpochs...)
	// Four epochs with every replica in the group, and five seconds to
	// count Redis's commands over.
	before, at := commandCalls(t, srv), time.Now()
	runtest.WaitFor(t, "four epochs of the group at 95% of 500", func() bool {
		granted, eligible := groupEpochs()
		return time.Since(at) >= 5*time.Second && countReach(fullEpochs(eligible), 475, func(e int64) int64 { return granted[e] }) >= 4
	}, untilEpochs...)
	perReplica := float64(commandCalls(t, srv)-before) / float64(len(procs)) / time.Since(at).Seconds()
	for _, p := range procs {
		if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}

	groupGranted, groupEligible := groupEpochs()
	var rows []string
	for _, e := range slices.Sorted(maps.Keys(groupGranted)) {
		row := fmt.Sprintf("epoch %d: group %d", e, groupGranted[e])
		if groupGranted[e] > 500 {
			t.Errorf("epoch %d: the group granted %d; max 500", e, groupGranted[e])
		}
		for _, name := range []string{"orders", "refunds"} {
			granted, _ := sumEpochs(t, byVertex[name])
			row += fmt.Sprintf(", %s %d", name, granted[e])
			if granted[e] > 400 {
				t.Errorf("epoch %d: %s granted %d; max 400", e, name, granted[e])
			}
		}
		rows = append(rows, row)
	}
	t.Logf("%.1f Redis commands per replica per second\n%s", perReplica, strings.Join(rows, "\n"))
	mostReach(t, "the group with every replica in it, at 95% of 500", fullEpochs(groupEligible), 475, 4,
		func(e int64) int64 { return groupGranted[e] })
	if perReplica > 12 {
		t.Errorf("%.1f Redis commands per replica per second with a group; want at most 12", perReplica)
	}
}
