package test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluiceflow/sluice/internal/redistest"
)

// Kafka brokers cannot be installed here: these tests run franz-go's
// in-process cluster (kfake) in the test process, and the vertices reach it
// over real TCP on 127.0.0.1 like any broker.

// kafkaCluster starts a one-broker cluster with topics in and out of three
// partitions each, and a client of it.
func kafkaCluster(t *testing.T) (*kfake.Cluster, *kgo.Client, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "in", "out"),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl, kadm.NewClient(cl)
}

// produceValues writes n records m-0 … m-(n-1) to topic in, keyed k-(i%7).
func produceValues(t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Key: []byte("k-" + strconv.Itoa(i%7)), Value: []byte("m-" + strconv.Itoa(i))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// outCounts reads topic out from the start and counts each value.
func outCounts(t *testing.T, c *kfake.Cluster) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("out"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	counts := map[string]int{}
	for read := int64(0); read < want; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d records of out", read, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			counts[string(r.Value)]++
			read++
		})
	}
	return counts
}

// offsetSums returns the offsets committed by group over topic in, and the end
// offsets of topic out: what was committed as done, and what was written.
func offsetSums(ctx context.Context, adm *kadm.Client, group string) (committed, written int64, err error) {
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, 0, err
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == "in" && o.At > 0 {
			committed += o.At
		}
	})
	ends, err := adm.ListEndOffsets(ctx, "out")
	if err != nil {
		return 0, 0, err
	}
	ends.Each(func(o kadm.ListedOffset) { written += o.Offset })
	return committed, written, nil
}

// watchCommits checks, every 50ms until stop, that the group never committed
// more of topic in than was written to topic out, reading the commits first:
// offsets are committed only after writes. It returns how many checks ran.
func watchCommits(t *testing.T, adm *kadm.Client, group string) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	checks := 0
	wg.Go(func() {
		for ctx.Err() == nil {
			committed, written, err := offsetSums(ctx, adm, group)
			if err == nil {
				checks++
				if committed > written {
					t.Errorf("group %s committed %d offsets of in with only %d records written to out", group, committed, written)
					return
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	return func() int { cancel(); wg.Wait(); return checks }
}

// waitGroupMembers waits until group is stable with n members.
func waitGroupMembers(t *testing.T, adm *kadm.Client, group string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		gs, err := adm.DescribeGroups(ctx, group)
		cancel()
		if err == nil {
			if g, ok := gs[group]; ok && g.State == "Stable" && len(g.Members) == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not settle with %d members: %v %v", group, n, gs, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the broker, bounded by the deadline
	}
}

// waitWritten waits until group has committed n offsets of topic in and
// topic out holds at least n records: n messages of in written, each at least
// once, as offsets are committed only after writes. Records of out alone
// would not say so after a replica is killed: the copies its successor
// writes again count among them.
func waitWritten(t *testing.T, adm *kadm.Client, group string, n int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		committed, written, err := offsetSums(ctx, adm, group)
		cancel()
		if err == nil && committed >= n && written >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d offsets of in committed and %d records written to out after %v (%v)", committed, n, written, timeout, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the broker, bounded by the deadline
	}
}

// kafkaVertexYAML is a MonoVertex from topic in to topic out, limited to max
// a second through the Redis at redisAddr.
func kafkaVertexYAML(brokers []string, group string, max int, redisAddr string) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: %s
spec:
  limits:
    readBatchSize: 100
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
      store:
        redisStore:
          mode: single
          url: redis://%s
  source:
    kafka:
      brokers: [%s]
      topic: in
      consumerGroup: %s
      config: |
        session.timeout.ms: 3000
        heartbeat.interval.ms: 500
  sink:
    kafka:
      brokers: [%s]
      topic: out
      setKey: true
`, group, max, max, redisAddr, strings.Join(brokers, ", "), group, strings.Join(brokers, ", "))
}

// startKafkaReplicas starts two replicas of the MonoVertex of kafkaVertexYAML
// sharing max a second through a Redis of their own, and waits until both are
// in the consumer group.
func startKafkaReplicas(t *testing.T, c *kfake.Cluster, adm *kadm.Client, group string, max int) []*proc {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	cfg := writeConfig(t, kafkaVertexYAML(c.ListenAddrs(), group, max, srv.Addr))
	var procs []*proc
	for i := range 2 {
		procs = append(procs, start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", strconv.Itoa(i), "--log-level", "debug"))
	}
	for _, p := range procs {
		p.metricsAddr()
	}
	waitGroupMembers(t, adm, group, 2)
	return procs
}

// TestKafkaReplicasShareTheLimit runs two replicas of a MonoVertex reading
// topic in (three partitions) in one consumer group and writing topic out,
// sharing 500 messages a second through Redis. Every message reaches out
// exactly once, no epoch grants more than 500 in all, the group never commits
// an offset before its message is written, and in the end it has committed
// everything.
func TestKafkaReplicasShareTheLimit(t *testing.T) {
	t.Parallel()
	const n, max, group = 3000, 500, "share"
	c, cl, adm := kafkaCluster(t)
	procs := startKafkaReplicas(t, c, adm, group, max)
	stop := watchCommits(t, adm, group)
	began := time.Now()
	produceValues(t, cl, n)
	waitWritten(t, adm, group, n, 30*time.Second)
	took := time.Since(began)
	for _, p := range procs {
		if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
	}
	checks := stop()

	counts := outCounts(t, c)
	for i := range n {
		if got := counts["m-"+strconv.Itoa(i)]; got != 1 {
			t.Errorf("m-%d written %d times; want once", i, got)
		}
	}
	if len(counts) != n {
		t.Errorf("%d distinct values in out; want %d", len(counts), n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	committed, _, err := offsetSums(ctx, adm, group)
	if err != nil || committed != n {
		t.Errorf("committed %d offsets (%v); want all %d", committed, err, n)
	}
	granted, _ := sumEpochs(t, procs)
	epochs := slices.Sorted(maps.Keys(granted))
	var perEpoch []string
	for _, e := range epochs {
		if granted[e] > max {
			t.Errorf("epoch %d granted %d in all; max %d", e, granted[e], max)
		}
		perEpoch = append(perEpoch, strconv.FormatInt(granted[e], 10))
	}
	t.Logf("%d messages in %v (%.0f/s); %d commit checks; grants per epoch: %s", n, took.Round(time.Millisecond),
		float64(n)/took.Seconds(), checks, strings.Join(perEpoch, " "))
	if took < time.Duration(n/max-2)*time.Second { // the first and last epochs may be cut short
		t.Errorf("%d messages took %v at a limit of %d/s", n, took, max)
	}
}

// TestKafkaReplicaKilled kills one of two replicas with SIGKILL mid-run: the
// other takes its partitions over once the group drops it, and every message
// reaches out at least once; those written twice are at most what the killed
// replica had read and not committed.
func TestKafkaReplicaKilled(t *testing.T) {
	t.Parallel()
	const n, max, group = 3000, 500, "killed"
	c, cl, adm := kafkaCluster(t)
	procs := startKafkaReplicas(t, c, adm, group, max)
	stop := watchCommits(t, adm, group)
	produceValues(t, cl, n)
	waitWritten(t, adm, group, n/3, 30*time.Second)
	procs[1].cmd.Process.Kill()
	<-procs[1].done
	killedAt := time.Now()
	waitWritten(t, adm, group, n, 60*time.Second)
	t.Logf("all %d written %v after the kill", n, time.Since(killedAt).Round(time.Millisecond))
	if code, _ := procs[0].stop(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, procs[0].stderrText())
	}
	stop()

	counts := outCounts(t, c)
	twice := 0
	for i := range n {
		switch got := counts["m-"+strconv.Itoa(i)]; {
		case got == 0:
			t.Errorf("m-%d lost", i)
		case got > 1:
			twice += got - 1
		}
	}
	// The killed replica read at most one batch a partition ahead of its
	// commits: readBatchSize, as it commits each batch it writes.
	if twice > 100*3 {
		t.Errorf("%d messages written again; want at most what the killed replica held", twice)
	}
	granted, _ := sumEpochs(t, procs)
	for e, g := range granted {
		if g > max {
			t.Errorf("epoch %d granted %d in all; max %d", e, g, max)
		}
	}
	t.Logf("%d written again after the kill", twice)
}
