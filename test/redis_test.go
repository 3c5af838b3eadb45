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

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
)

// redisVertexYAML is a generator → log MonoVertex sharing its limit through the
// given redisStore block.
func redisVertexYAML(name string, max int, store, extra string) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: %s
spec:
  limits:
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
%s      store:
        redisStore:
%s
  source:
    generator:
      rpu: 100000
  sink:
    log: {}
`, name, max, max, extra, store)
}

// epochLog is a replica's own account of one epoch (the debug log "epoch",
// or "group epoch" for a shared limit, named by Group).
type epochLog struct {
	Group    string
	Epoch    int64
	Pool     float64
	Granted  int64
	Share    int64
	Replicas int `json:"poolSize"`
	Eligible bool
	// With rateLimit.shadow: what the readers took beyond the grants, and
	// all they took.
	ShadowThrottled int64
	Read            int64
	// Max is the limit in force, and Switched is true in the first epoch of
	// a live change of it.
	Max      int64
	Switched bool
}

// startReplicas starts n replicas of `vertex run -f cfg` at debug level,
// each with its metrics on a free port, args added, and returns them with
// their metrics addresses.
func startReplicas(t *testing.T, cfg string, n int, args ...string) ([]*proc, []string) {
	t.Helper()
	var procs []*proc
	for i := range n {
		procs = append(procs, start(t, append([]string{"run", "-f", cfg, "--metrics-addr", "127.0.0.1:0",
			"--replica", strconv.Itoa(i), "--log-level", "debug"}, args...)...))
	}
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.metricsAddr())
	}
	return procs, addrs
}

// epochs returns a replica's per-epoch accounting from its debug log.
func (p *proc) epochs(t *testing.T) map[int64]epochLog {
	t.Helper()
	return p.logEpochs(t, "epoch")
}

// logEpochs returns a replica's per-epoch accounting from the debug log
// lines of message msg: "epoch" for its own limit, "group epoch" for its
// shared limits.
func (p *proc) logEpochs(t *testing.T, msg string) map[int64]epochLog {
	t.Helper()
	out := map[int64]epochLog{}
	for _, line := range strings.Split(p.stderrText(), "\n") {
		if !strings.Contains(line, `"msg":"`+msg+`"`) {
			continue
		}
		var e epochLog
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("epoch log %q: %v", line, err)
		}
		out[e.Epoch] = e
	}
	return out
}

// sumEpochs adds the replicas' grants and counts the eligible ones per epoch.
func sumEpochs(t *testing.T, procs []*proc) (granted map[int64]int64, eligible map[int64]int) {
	granted, eligible = map[int64]int64{}, map[int64]int{}
	for _, p := range procs {
		for e, l := range p.epochs(t) {
			granted[e] += l.Granted
			if l.Eligible {
				eligible[e]++
			}
		}
	}
	return granted, eligible
}

// generatorValues checks that a replica wrote its generator's values 0, 1, 2, ...
// with none missing: no message read was lost.
func generatorValues(t *testing.T, p *proc) int {
	t.Helper()
	lines := p.stdoutLines()
	seen := make([]bool, len(lines))
	for _, l := range lines {
		payload, _, _ := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
		var m struct{ Data struct{ Value int } }
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if m.Data.Value >= len(seen) || seen[m.Data.Value] {
			t.Fatalf("value %d out of order or repeated (%d lines)", m.Data.Value, len(lines))
		}
		seen[m.Data.Value] = true
	}
	return len(lines)
}

// TestReplicasShareThroughRedis runs five replicas of one MonoVertex sharing 997
// messages a second through Redis. No epoch grants more than 997 in all; with all
// five agreed their shares make exactly 997, and most epochs deliver at
// least 99.5% of it; after one is killed with SIGKILL, the survivors take back
// its share within staleAfter + 1s; when it comes back it rejoins; Redis sees at
// most 12 commands per replica per second.
func TestReplicasShareThroughRedis(t *testing.T) {
	t.Parallel()
	const max, most = 997, 992 // 99.5% of max
	srv := redistest.Start(t, redistest.Options{})
	cfg := writeConfig(t, redisVertexYAML("shared", max, "          mode: single\n          url: redis://"+srv.Addr, ""))
	var procs []*proc
	for i := range 5 {
		procs = append(procs, start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", strconv.Itoa(i), "--log-level", "debug"))
	}
	for _, p := range procs {
		p.metricsAddr()
	}
	// The five agree and take the pool: three epochs at 99.5% of it, and
	// five seconds to count Redis's commands over.
	statsBefore := commandCalls(t, srv)
	statsAt := time.Now()
	runtest.WaitFor(t, "three epochs of five replicas granting 99.5% of 997", func() bool {
		r := readEpochs(t, procs, 5)
		return time.Since(statsAt) >= 5*time.Second && countReach(r.full(5, 0, forever), most, r.grantedIn) >= 3
	}, untilEpochs...)
	statsAfter := commandCalls(t, srv)
	perReplica := float64(statsAfter-statsBefore) / 5 / time.Since(statsAt).Seconds()

	killedAt := time.Now()
	procs[4].cmd.Process.Kill()
	<-procs[4].done
	killEpoch := killedAt.Unix()
	reclaimedBy := killedAt.Add(2*time.Second + time.Second).Unix() // staleAfter + 1s
	runtest.WaitFor(t, "three epochs after the kill of four survivors granting 99.5% of 997", func() bool {
		r := readEpochs(t, procs[:4], 4)
		return countReach(r.full(4, reclaimedBy+1, forever), most, r.grantedIn) >= 3
	}, untilEpochs...)
	stoppingAt := time.Now().Unix() // epochs from here on see the pool change again

	// Replica 4 comes back and rejoins the replicas.
	rejoined := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", "4", "--log-level", "debug")
	rejoined.metricsAddr()
	back := append(slices.Clone(procs[:4]), rejoined)
	runtest.WaitFor(t, "two epochs of five replicas granting 99.5% of 997 after replica 4 came back", func() bool {
		r := readEpochs(t, back, 5)
		return countReach(r.full(5, stoppingAt+1, forever), most, r.grantedIn) >= 2
	}, untilEpochs...)
	procs = append(procs, rejoined) // procs[4] is the killed one, procs[5] its return
	for _, p := range back {
		if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}

	granted, _ := sumEpochs(t, procs)
	epochs := slices.Sorted(maps.Keys(granted))
	if testing.Verbose() {
		for i, p := range procs {
			var row []string
			ep := p.epochs(t)
			for _, e := range epochs {
				if l, ok := ep[e]; ok {
					row = append(row, fmt.Sprintf("%d/%d/%v", l.Granted, l.Replicas, l.Eligible))
				} else {
					row = append(row, "-")
				}
			}
			t.Logf("replica %d: %s", i, strings.Join(row, " "))
		}
	}
	for _, e := range epochs {
		if granted[e] > max {
			t.Errorf("epoch %d granted %d; max %d", e, granted[e], max)
		}
	}
	// Five agreed before the kill, and after the return: their shares
	// make the pool, and most epochs use it.
	five, after := readEpochs(t, procs[:5], 5), readEpochs(t, back, 5)
	for _, r := range []struct {
		epochs []int64
		shares map[int64]int64
	}{{five.full(5, 0, killEpoch-1), five.shares}, {after.full(5, stoppingAt+1, forever), after.shares}} {
		for _, e := range r.epochs {
			if r.shares[e] != max {
				t.Errorf("epoch %d: five replicas' shares make %d; want exactly %d", e, r.shares[e], max)
			}
		}
	}
	mostReach(t, "five replicas before the kill", five.full(5, 0, killEpoch-1), most, 3, five.grantedIn)
	mostReach(t, "five replicas after the return", after.full(5, stoppingAt+1, forever), most, 2, after.grantedIn)
	// The survivors reclaim the dead replica's share within staleAfter + 1s:
	// from then on the four are among four replicas whose shares make 997.
	four := readEpochs(t, procs[:4], 4)
	for e := reclaimedBy + 1; e < stoppingAt; e++ {
		if four.eligible[e] != 4 || four.shares[e] != max {
			t.Errorf("epoch %d (%ds after the kill): %d survivors among four, their shares make %d; they should have reclaimed the share",
				e, e-killEpoch, four.eligible[e], four.shares[e])
		}
	}
	mostReach(t, "four survivors", four.full(4, reclaimedBy+1, stoppingAt-1), most, 3, four.grantedIn)
	for _, p := range back {
		generatorValues(t, p)
	}
	if perReplica > 12 {
		t.Errorf("%.1f Redis commands per replica per second; want at most 12", perReplica)
	}
	t.Logf("%.1f Redis commands per replica per second", perReplica)
}

// clientCommands are the commands a replica sends. INFO commandstats also counts
// the commands its scripts run inside Redis, which cost no round trip.
var clientCommands = []string{"evalsha", "eval", "script|load", "ping", "hello", "auth", "select", "client|setinfo"}

// commandCalls returns the number of commands clients have sent Redis.
func commandCalls(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	info := fmt.Sprint(srv.Do(t, "INFO", "commandstats"))
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !strings.HasPrefix(line, "cmdstat_") || !slices.Contains(clientCommands, name) {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		calls, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		total += n
	}
	return total
}

// TestRedisOutage stops Redis for 10 seconds under each onStoreFailure policy:
// no message read is lost; with pause no epoch ever exceeds the limit; within
// two seconds of Redis's return the replicas both agree again, their
// shares make the whole pool, and they use it.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"pause", "lastKnown"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Options{})
			cfg := writeConfig(t, redisVertexYAML("outage-"+strings.ToLower(policy), 100,
				"          mode: single\n          url: redis://"+srv.Addr, "      onStoreFailure: "+policy+"\n"))
			var procs []*proc
			for i := range 2 {
				procs = append(procs, start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", strconv.Itoa(i), "--log-level", "debug"))
			}
			for _, p := range procs {
				p.metricsAddr()
			}
			if !runtest.WaitFor(t, "an epoch of both replicas among two", func() bool {
				return len(readEpochs(t, procs, 2).full(2, 0, forever)) > 0
			}, untilEpochs...) {
				t.Fatal("the replicas never agreed on a count of two")
			}
			srv.Stop()
			stoppedAt := time.Now()
			time.Sleep(10 * time.Second)
			srv.Restart(t)
			backAt := time.Now()
			rejoinBy := backAt.Add(2*time.Second).Unix() + 1 // the first epoch both must be in
			runtest.WaitFor(t, "both replicas' epochs to 5s after Redis came back, one granting all 100", func() bool {
				r := readEpochs(t, procs, 2)
				return logged(t, procs, backAt.Unix()+4) && countReach(r.full(2, rejoinBy, forever), 100, r.grantedIn) > 0
			}, untilEpochs...)
			for _, p := range procs {
				if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
					t.Fatalf("exit %d", code)
				}
				generatorValues(t, p)
			}
			r := readEpochs(t, procs, 2)
			for e, g := range r.granted {
				if g > 100 && policy == "pause" {
					t.Errorf("epoch %d granted %d; max 100", e, g)
				}
			}
			// Paused replicas take nothing once the lease (2s) has run out.
			if policy == "pause" {
				for e := stoppedAt.Unix() + 3; e < backAt.Unix(); e++ {
					if r.granted[e] != 0 {
						t.Errorf("epoch %d, Redis down for %ds: %d granted while paused", e, e-stoppedAt.Unix(), r.granted[e])
					}
				}
			}
			// Normal again within two seconds of Redis's return: a replica
			// whose lease ran out rejoins the replicas.
			for e := rejoinBy; e < backAt.Unix()+5; e++ {
				if r.eligible[e] != 2 || r.shares[e] != 100 {
					t.Errorf("epoch %d, %v after Redis came back: %d replicas among two with shares of %d; want 2 and 100",
						e, time.Unix(e, 0).Sub(backAt), r.eligible[e], r.shares[e])
				}
			}
			mostReach(t, "after Redis came back", r.full(2, rejoinBy, forever), 100, 1, r.grantedIn)
			for _, p := range procs {
				if !strings.Contains(p.stderrText(), "store is reachable again") {
					t.Errorf("no log of the store's return")
				}
			}
		})
	}
}

// TestSentinelFailover shares a limit through Redis behind sentinels and fails
// the master over: the replicas keep throttling, never above the limit.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	sn := redistest.StartSentinel(t, redistest.Options{Password: "s3cret"})
	pass := writeSecret(t, "s3cret")
	endpoints := `["` + strings.Join(sn.Endpoints(), `", "`) + `"]`
	cfg := writeConfig(t, redisVertexYAML("failover", 50, `          mode: sentinel
          sentinel:
            masterName: `+sn.MasterName+`
            endpoints: `+endpoints+`
            redisAuth:
              password:
                file: `+pass, ""))
	var procs []*proc
	for i := range 2 {
		procs = append(procs, start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", strconv.Itoa(i), "--log-level", "debug"))
	}
	for _, p := range procs {
		p.metricsAddr()
	}
	agreed := func() bool { return len(readEpochs(t, procs, 2).full(2, 0, forever)) > 0 }
	if !runtest.WaitFor(t, "an epoch of both replicas among two", agreed, untilEpochs...) {
		t.Fatal("the replicas never agreed on a count of two")
	}
	sn.Failover(t)
	failedOverAt := time.Now()
	from, to := failedOverAt.Unix()+3, failedOverAt.Unix()+5 // the last seconds checked
	runtest.WaitFor(t, "the epochs to 6s after the failover, one granting all 50", func() bool {
		r := readEpochs(t, procs, 2)
		return logged(t, procs, to) && countReach(r.full(2, from, forever), 50, r.grantedIn) > 0
	}, untilEpochs...)
	for _, p := range procs {
		if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
	r := readEpochs(t, procs, 2)
	for e, g := range r.granted {
		if g > 50 {
			t.Errorf("epoch %d granted %d; max 50", e, g)
		}
	}
	// Throttling goes on through the failover: in the last seconds both
	// replicas agree, their shares make the limit, and they use it.
	for e := from; e <= to; e++ {
		if r.eligible[e] != 2 || r.shares[e] != 50 {
			t.Errorf("epoch %d after the failover: %d replicas among two with shares of %d; want 2 and 50", e, r.eligible[e], r.shares[e])
		}
	}
	mostReach(t, "after the failover", r.full(2, from, forever), 50, 1, r.grantedIn)
}

// TestRedisConfigErrors: a wrong password, a bad CA or an unknown host stop
// `vertex run` at start with exit code 2 and the field to fix.
func TestRedisConfigErrors(t *testing.T) {
	t.Parallel()
	plain := redistest.Start(t, redistest.Options{Password: "s3cret", Users: []redistest.User{{Name: "app", Password: "apppass"}}})
	secure := redistest.Start(t, redistest.Options{TLS: true})
	wrong := writeSecret(t, "nope")
	otherCA := writeSecret(t, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----")
	for _, tt := range []struct {
		name, store, want string
	}{
		{"wrong password in url", "          mode: single\n          url: redis://:nope@" + plain.Addr,
			"spec.limits.rateLimit.store.redisStore.url"},
		{"wrong ACL password", "          mode: single\n          url: redis://" + plain.Addr +
			"\n          redisAuth:\n            username:\n              file: " + writeSecret(t, "app") +
			"\n            password:\n              file: " + wrong,
			"spec.limits.rateLimit.store.redisStore.redisAuth"},
		{"bad CA", "          mode: single\n          url: rediss://" + secure.Addr +
			"\n          redisTLS:\n            caCertSecret:\n              file: " + otherCA,
			"spec.limits.rateLimit.store.redisStore.redisTLS"},
		{"CA of another authority", "          mode: single\n          url: rediss://" + secure.Addr,
			"spec.limits.rateLimit.store.redisStore.url"},
		{"unknown host", "          mode: single\n          url: redis://" + redistest.UnresolvableHost + ":6379",
			"spec.limits.rateLimit.store.redisStore.url"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeConfig(t, redisVertexYAML("cfg-errors", 10, tt.store, ""))
			p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0")
			<-p.done
			if code := p.cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(p.stderrText(), tt.want) {
				t.Fatalf("exit %d; stderr:\n%s\nwant exit 2 naming %s", code, p.stderrText(), tt.want)
			}
			if strings.Contains(p.stderrText(), "s3cret") || strings.Contains(p.stderrText(), "apppass") {
				t.Fatal("a secret in the log")
			}
		})
	}
	// The right ACL user and password work.
	cfg := writeConfig(t, redisVertexYAML("acl-ok", 10, "          mode: single\n          url: redis://"+plain.Addr+
		"\n          redisAuth:\n            username:\n              file: "+writeSecret(t, "app")+
		"\n            password:\n              file: "+writeSecret(t, "apppass"), ""))
	p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0")
	p.waitFor(20*time.Second, "messages", func() bool { return len(p.lines) >= 10 })
	p.stop(syscall.SIGTERM, 10*time.Second)
}

// TestReplicaCountStore runs three replicas with no store: each takes its rank's
// share of the limit, and together they take all of it.
func TestReplicaCountStore(t *testing.T) {
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: counted
spec:
  limits:
    readTimeout: 200ms
    rateLimit:
      max: 100
      min: 100
      rampUpDuration: 0s
      store:
        replicaCountStore: {}
  source:
    generator:
      rpu: 10000
  sink:
    log: {}
`)
	t.Setenv("NUMAFLOW_REPLICAS", "3")
	procs, _ := startReplicas(t, cfg, 3)
	time.Sleep(3 * time.Second)
	for _, p := range procs {
		p.stop(syscall.SIGTERM, 10*time.Second)
	}
	for i, want := range []int64{34, 33, 33} {
		for e, l := range procs[i].epochs(t) {
			if l.Share != want || l.Replicas != 3 {
				t.Errorf("replica %d, epoch %d: share %d of %d; want %d of 3", i, e, l.Share, l.Replicas, want)
			}
		}
	}
	// A replica index beyond the count is refused at start.
	p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", "3")
	<-p.done
	if code := p.cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(p.stderrText(), "--replica (3)") {
		t.Fatalf("replica 3 of 3: exit %d, %s", code, p.stderrText())
	}
}
