package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

// The benchmarks run the sync script on a redis-server of their own, beside
// the script as it was before sizes went into a sorted set
// (testdata/sync_v1.lua, which read every reported size at every sync), on
// sets of simulated replicas: each round measures the old and the new script
// in turn, and the results are the medians over the rounds. Redis's own
// figures (INFO commandstats, INFO cpu) are what count, not the client's
// times, so a busy machine blurs them little. Run them with a fixed number of
// rounds, e.g.
//
//	go test -run '^$' -bench . -benchtime 5x ./pkg/ratelimit/redisstore/

// benchLease is the simulated replicas' staleAfter: long enough that none goes
// stale while another set is measured.
const benchLease = 10 * time.Minute

// benchReplicas are simulated replicas on one version of the script.
type benchReplicas struct {
	sha  string
	keys []string
	ids  []string
	next int // the member that syncs next, round robin
}

// newBenchReplicas loads src and registers n members in a store of its own, each
// reporting n, so that the replicas agree.
func newBenchReplicas(b *testing.B, c *redis.Client, src, prefix, sizesKey string, n int) *benchReplicas {
	b.Helper()
	ctx := context.Background()
	sha, err := c.ScriptLoad(ctx, src).Result()
	if err != nil {
		b.Fatal(err)
	}
	base := "sluice:{" + prefix + "}:"
	p := &benchReplicas{sha: sha, keys: []string{base + "heartbeats", base + sizesKey, base + "members", base + "resume", base + "adaptive", base + "limit"}}
	for i := range n {
		p.ids = append(p.ids, fmt.Sprintf("%s-pod-%05d", prefix, i))
	}
	for range 2 {
		if err := p.syncs(ctx, c, n); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// split returns k sets of the same keys, sharing out the members.
func (p *benchReplicas) split(k int) []*benchReplicas {
	parts := make([]*benchReplicas, k)
	for i := range parts {
		parts[i] = &benchReplicas{sha: p.sha, keys: p.keys}
	}
	for i, id := range p.ids {
		parts[i%k].ids = append(parts[i%k].ids, id)
	}
	return parts
}

// syncs runs n syncs of the next members, as Store.Sync calls the script, in
// pipelines of up to 100.
func (p *benchReplicas) syncs(ctx context.Context, c *redis.Client, n int) error {
	size, lease, ttl := len(p.ids), benchLease.Milliseconds(), share.DefaultTTL.Milliseconds()
	for n > 0 {
		k := min(n, 100)
		pipe := c.Pipeline()
		for range k {
			pipe.EvalSha(ctx, p.sha, p.keys, p.ids[p.next], size, lease, ttl, "", 0, 0, 0, 0, "", 0)
			p.next = (p.next + 1) % len(p.ids)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// usecPerCall runs calls syncs of p and returns the time Redis spent in each,
// by INFO commandstats.
func usecPerCall(b *testing.B, c *redis.Client, p *benchReplicas, calls int) float64 {
	b.Helper()
	ctx := context.Background()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	if err := p.syncs(ctx, c, calls); err != nil {
		b.Fatal(err)
	}
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	stats := infoFields(info, "cmdstat_evalsha")
	n, usec := stats["calls"], stats["usec"]
	if n != float64(calls) {
		b.Fatalf("INFO commandstats counts %v EVALSHA calls; want %d", n, calls)
	}
	return usec / n
}

// infoFields returns the numbers of the INFO line name:k=v,k=v,...
func infoFields(info, name string) map[string]float64 {
	fields := map[string]float64{}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), name+":")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			fields[k], _ = strconv.ParseFloat(v, 64)
		}
	}
	return fields
}

// infoNumber returns the number of the INFO line name:v.
func infoNumber(info, name string) float64 {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func median(xs []float64) float64 {
	xs = slices.Sorted(slices.Values(xs))
	if len(xs) == 0 {
		return 0
	}
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// BenchmarkSyncScript measures the time Redis spends in one sync, by replica
// count, for the old and the new script: usec/call at that count, and its ratio
// to 10 replicas (measured in the same rounds). A round syncs each set 200
// times, round robin over its members.
func BenchmarkSyncScript(b *testing.B) {
	const calls = 200
	srv := redistest.Start(b, redistest.Options{})
	c := srv.Client(b)
	oldSrc, newSrc := readScripts(b)
	old10 := newBenchReplicas(b, c, oldSrc, "old-10", "reports", 10)
	new10 := newBenchReplicas(b, c, newSrc, "new-10", "sizes", 10)
	for _, n := range []int{10, 100, 1000, 5000} {
		b.Run(fmt.Sprint("members=", n), func(b *testing.B) {
			sets := []*benchReplicas{old10, new10}
			if n != 10 {
				sets = append(sets,
					newBenchReplicas(b, c, oldSrc, fmt.Sprint("old-", n), "reports", n),
					newBenchReplicas(b, c, newSrc, fmt.Sprint("new-", n), "sizes", n))
			}
			samples := make([][]float64, len(sets))
			var oldRatio, newRatio []float64
			for round := 0; b.Loop(); round++ {
				got := make([]float64, len(sets))
				for j := range sets { // each round in another order
					k := (round + j) % len(sets)
					got[k] = usecPerCall(b, c, sets[k], calls)
					samples[k] = append(samples[k], got[k])
				}
				if n != 10 {
					oldRatio = append(oldRatio, got[2]/got[0])
					newRatio = append(newRatio, got[3]/got[1])
				}
			}
			at := len(sets) - 2 // the sets of n members
			b.ReportMetric(median(samples[at]), "old-usec/call")
			b.ReportMetric(median(samples[at+1]), "new-usec/call")
			if n != 10 {
				b.ReportMetric(median(oldRatio), "old-vs-10")
				b.ReportMetric(median(newRatio), "new-vs-10")
			}
		})
	}
}

// BenchmarkRedisCPU measures the CPU Redis spends on 1,000
// replicas that each sync at the default interval, 10,000 syncs a second in
// all, for the old and the new script: the share of one core (user and
// system, INFO cpu) over 3s, the syncs a second Redis and the client kept up
// with, and the share of a core 10,000 syncs a second take at the CPU per sync
// measured (the same when they kept up; over 100 when one Redis cannot).
func BenchmarkRedisCPU(b *testing.B) {
	const (
		replicas = 1000
		senders  = 8 // goroutines, each syncing its share of the members
		warmUp   = 500 * time.Millisecond
		window   = 3 * time.Second
	)
	srv := redistest.Start(b, redistest.Options{})
	c := srv.Client(b)
	oldSrc, newSrc := readScripts(b)
	sets := []*benchReplicas{
		newBenchReplicas(b, c, oldSrc, "old", "reports", replicas),
		newBenchReplicas(b, c, newSrc, "new", "sizes", replicas),
	}
	// Each sender syncs each of its members once per sync interval: it sends
	// the syncs due by now, up to 100 at a time, catching up when it fell behind.
	perSec := float64(replicas) / senders / ratelimit.DefaultSyncInterval.Seconds()
	const target = replicas * float64(time.Second/ratelimit.DefaultSyncInterval)
	measure := func(p *benchReplicas) (core, rate float64) {
		ctx, cancel := context.WithCancel(context.Background())
		var done atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for _, part := range p.split(senders) {
			wg.Go(func() {
				sent := 0
				for ctx.Err() == nil {
					due := int(time.Since(start).Seconds()*perSec) - sent
					if due <= 0 {
						time.Sleep(time.Millisecond)
						continue
					}
					due = min(due, 100)
					if err := part.syncs(ctx, c, due); err != nil {
						if ctx.Err() == nil {
							b.Error(err)
						}
						return
					}
					sent += due
					done.Add(int64(due))
				}
			})
		}
		cpu := func() float64 {
			info, err := c.Info(ctx, "cpu").Result()
			if err != nil {
				b.Fatal(err)
			}
			return infoNumber(info, "used_cpu_user") + infoNumber(info, "used_cpu_sys")
		}
		time.Sleep(warmUp) // the senders get into step
		cpu0, n0, t0 := cpu(), done.Load(), time.Now()
		time.Sleep(window)
		cpu1, n1, t1 := cpu(), done.Load(), time.Now()
		cancel()
		wg.Wait()
		secs := t1.Sub(t0).Seconds()
		return 100 * (cpu1 - cpu0) / secs, float64(n1-n0) / secs
	}
	var cores, rates, atTarget [2][]float64
	for round := 0; b.Loop(); round++ {
		for j := range sets {
			k := (round + j) % len(sets)
			core, rate := measure(sets[k])
			cores[k] = append(cores[k], core)
			rates[k] = append(rates[k], rate)
			atTarget[k] = append(atTarget[k], core*target/rate)
		}
	}
	for k, name := range []string{"old", "new"} {
		b.ReportMetric(median(cores[k]), name+"-%core")
		b.ReportMetric(median(rates[k]), name+"-syncs/s")
		b.ReportMetric(median(atTarget[k]), name+"-%core@10k/s")
	}
}

// readScripts returns the script as it was and as it is.
func readScripts(b *testing.B) (old, cur string) {
	b.Helper()
	o, err := os.ReadFile("testdata/sync_v1.lua")
	if err != nil {
		b.Fatal(err)
	}
	n, err := os.ReadFile("sync.lua")
	if err != nil {
		b.Fatal(err)
	}
	return string(o), string(n)
}
