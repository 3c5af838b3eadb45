package test

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestFaultTokens runs the token rows of the fault suite: three replicas of
// one MonoVertex share 300 a second through Redis, a fault hits one of them
// (or the store), and their own epoch logs, added up per epoch, must show
// that no epoch granted more than its pool, that the others took the share
// of a replica that was away, and that it came back. Each row is a group of
// subtests, named by the fault (freeze/15s/pause/run1, ...), whose cases are
// in the fault_*_test.go file of the fault.
//
// All runs of all rows go at once, up to -faults.parallel, each in a
// subtest run from a goroutine of its own: they wait on real time, not on
// the CPU, and subtests that are not parallel take no slot of
// -test.parallel, which on two cores would run two at a time.
func TestFaultTokens(t *testing.T) {
	t.Parallel()
	// The longest first, so that the short round ends soonest.
	runTokenFaults(t, slices.Concat(freezeCases()[:2], cutCases(), adaptiveCases(), perKeyCases(),
		freezeCases()[2:], storeCases(), clockCases(), killCases()))
}

// faultParallel bounds the runs of the token rows that go at once.
var faultParallel = flag.Int("faults.parallel", 10, "how many runs of the fault suite's token rows go at once")

// The vertex of the token rows.
const (
	tokenMax        = 300
	tokenReplicas   = 3
	tokenStaleAfter = 2 * time.Second // the default lease
	// tokenMargin is how long after a lease runs out the others may take to
	// drop the replica and agree on the smaller pool: the store's margin
	// and a few syncs.
	tokenMargin = 1300 * time.Millisecond
	// tokenJoinTimeout bounds the wait for three replicas to agree at start.
	tokenJoinTimeout = 30 * time.Second
)

// tokenFaultCase is one row of the table: run makes one run of it, filling
// in row what it measured.
type tokenFaultCase struct {
	name string   // the subtest, e.g. "freeze/15s/pause"
	row  faultRow // Fault, Policy and Holds
	run  func(t *testing.T, round int, row *faultRow)
}

// runTokenFaults runs faultRounds rounds of every case, each run a subtest
// of t named case/runN, all at once up to -faults.parallel, and records each
// run's row when it ends: a run that failed, even at its start, counts as a
// failed run.
func runTokenFaults(t *testing.T, cases []tokenFaultCase) {
	t.Helper()
	slots := make(chan struct{}, max(*faultParallel, 1))
	var wg sync.WaitGroup
	for round := range faultRounds(t) {
		for _, c := range cases {
			slots <- struct{}{} // in order: the first rounds go first
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				t.Run(c.name+"/run"+strconv.Itoa(round+1), func(t *testing.T) {
					row := c.row
					row.Runs = 1
					defer func() {
						if t.Failed() {
							row.Failed = 1
						}
						recordFault(row)
					}()
					c.run(t, round, &row)
				})
			}()
		}
	}
	wg.Wait()
}

// tokenVertex is the MonoVertex of a token row.
type tokenVertex struct {
	name   string
	policy string // onStoreFailure
	// stores are the redisStore blocks of the replicas, indented ten
	// spaces, one per replica (each through its own proxy), or one for all.
	stores []string
	// min and ramp default to max and 0s.
	min  int
	ramp string
	// extra are more lines of the rateLimit block (perKey, adaptive),
	// indented six spaces.
	extra string
	// source and sink are their blocks, indented four spaces; by default a
	// generator of 2,000 a second and a blackhole.
	source, sink string
}

func (v tokenVertex) yaml(replica int) string {
	store := v.stores[0]
	if len(v.stores) > 1 {
		store = v.stores[replica]
	}
	lo, ramp := v.min, v.ramp
	if lo == 0 {
		lo = tokenMax
	}
	if ramp == "" {
		ramp = "0s"
	}
	source, sink := v.source, v.sink
	if source == "" {
		source = "    generator:\n      rpu: 2000\n"
	}
	if sink == "" {
		sink = "    blackhole: {}\n"
	}
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: %s
spec:
  limits:
    readBatchSize: 50
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: %s
      onStoreFailure: %s
%s      store:
        redisStore:
%s
  source:
%s  sink:
%s`, v.name, tokenMax, lo, ramp, v.policy, v.extra, store, source, sink)
}

// singleStore is the redisStore block of a Redis at addr.
func singleStore(addr string) string {
	return "          mode: single\n          url: redis://" + addr
}

// tokenGroup is the running replicas of a token row.
type tokenGroup struct {
	procs   []*proc
	stopped time.Time // when stop began: the epoch then is cut short
}

// startTokenGroup starts the replicas of v at debug level and waits until
// they agree on a pool of all of them.
func startTokenGroup(t *testing.T, v tokenVertex) *tokenGroup {
	t.Helper()
	g := &tokenGroup{}
	for i := range tokenReplicas {
		cfg := writeConfig(t, v.yaml(i))
		g.procs = append(g.procs, start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0",
			"--replica", strconv.Itoa(i), "--log-level", "debug"))
	}
	for _, p := range g.procs {
		p.metricsAddr()
	}
	g.waitAgreed(t, tokenJoinTimeout)
	return g
}

// waitAgreed waits, polling the logs, until an epoch in which every replica
// was eligible among all of them has ended.
func (g *tokenGroup) waitAgreed(t *testing.T, timeout time.Duration) {
	t.Helper()
	const poll = 200 * time.Millisecond
	for range int(timeout / poll) {
		grid := g.grid(t, -1, time.Time{})
		for _, e := range grid.epochs {
			if grid.agreed(e, tokenReplicas) {
				return
			}
		}
		time.Sleep(poll)
	}
	t.Fatalf("the %d replicas did not agree on a pool of all of them within %v:\n%s", tokenReplicas, timeout, g.logTails(12))
}

// stop stops every replica with SIGTERM; each must exit 0.
func (g *tokenGroup) stop(t *testing.T) {
	t.Helper()
	g.stopped = time.Now()
	for _, p := range g.procs {
		select {
		case <-p.done: // killed by the run
			continue
		default:
		}
		p.cmd.Process.Signal(syscall.SIGCONT) // a frozen replica must see SIGTERM
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Errorf("replica exited %d; stderr:\n%s", code, p.stderrText())
		}
	}
}

// lastFull is the last epoch that ended before stop began.
func (g *tokenGroup) lastFull() int64 { return g.stopped.Unix() - 1 }

// grid reads the replicas' epochs; the fault hit replica hit (-1 for the
// store) at faultAt.
func (g *tokenGroup) grid(t *testing.T, hit int, faultAt time.Time) *epochGrid {
	t.Helper()
	var logs []string
	for _, p := range g.procs {
		logs = append(logs, p.stderrText())
	}
	return newEpochGrid(t, logs, hit, faultAt)
}

// logTails returns the last n lines of every replica's log.
func (g *tokenGroup) logTails(n int) string {
	var b strings.Builder
	for i, p := range g.procs {
		lines := strings.Split(strings.TrimSpace(p.stderrText()), "\n")
		fmt.Fprintf(&b, "replica %d, last %d lines:\n", i, min(n, len(lines)))
		for _, l := range lines[max(len(lines)-n, 0):] {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	return b.String()
}
