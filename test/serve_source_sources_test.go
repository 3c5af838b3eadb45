package test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/proctest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf/sourceclient"
)

// The served source over Kafka (kfake over TCP, as test/kafka_test.go runs
// it), core NATS and the http source: each reads what the test feeds it
// through the served socket under max a second.

// servedSourceYAML is the served MonoVertex name whose source is the YAML
// source (indented four spaces), at most max messages a second in batches
// of 20.
func servedSourceYAML(name string, max int, source string) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: %s
spec:
  limits:
    readBatchSize: 20
    rateLimit:
      max: %d
      rampUpDuration: 0s
  source:
%s  sink:
    log: {}
`, name, max, source)
}

// servedCount counts the payloads prefix+i of lines by i, failing on any
// other payload.
func servedCount(t *testing.T, lines []string, prefix string, n int) []int {
	t.Helper()
	got := make([]int, n)
	for _, p := range payloads(t, lines) {
		i, err := strconv.Atoi(strings.TrimPrefix(p, prefix))
		if !strings.HasPrefix(p, prefix) || err != nil || i < 0 || i >= n {
			t.Fatalf("unexpected payload %q", p)
		}
		got[i]++
	}
	return got
}

// servedOnce checks that each payload prefix+i, i < n, is in lines exactly
// once.
func servedOnce(t *testing.T, lines []string, prefix string, n int) {
	t.Helper()
	for i, k := range servedCount(t, lines, prefix, n) {
		if k != 1 {
			t.Errorf("%s%d reached the sink %d times; want once", prefix, i, k)
		}
	}
}

// servedGrants checks the served processes' epochs (none over max) and
// returns their grants, summed, by epoch in order.
func servedGrants(t *testing.T, max int64, procs ...*proc) []int64 {
	t.Helper()
	for _, p := range procs {
		servedEpochsWithin(t, p.stderrText(), max)
	}
	granted, _ := sumEpochs(t, procs)
	var out []int64
	for _, e := range slices.Sorted(maps.Keys(granted)) {
		out = append(out, granted[e])
	}
	return out
}

// servedPending connects to the source served in dir, as Numaflow's runtime
// does to ask it for its pending count.
func servedPending(t *testing.T, dir string) *sourceclient.Client {
	t.Helper()
	c := sourceclient.New(dir, 100*time.Millisecond, zap.NewNop())
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// pendingOf is c's pending count, -2 when it cannot be asked.
func pendingOf(c *sourceclient.Client) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := c.Pending(ctx)
	if err != nil {
		return -2
	}
	return n
}

// servedKafkaYAML is the served MonoVertex over topic in of brokers in
// consumer group group.
func servedKafkaYAML(brokers []string, group string, max int) string {
	return servedSourceYAML("served-kafka", max, fmt.Sprintf(`    kafka:
      brokers: [%s]
      topic: in
      consumerGroup: %s
      config: |
        session.timeout.ms: 3000
        heartbeat.interval.ms: 500
        max.poll.interval.ms: 5000
`, strings.Join(brokers, ", "), group))
}

// TestServeSourceKafka: every record of a topic of three partitions reaches
// the client's sink exactly once through the served source, never more than
// max in an epoch; the served Pending is the group's lag, n before any read
// and 0 once the client acked everything, when the group has committed all
// n; the served source exits 0 on SIGTERM.
func TestServeSourceKafka(t *testing.T) {
	t.Parallel()
	const n, max, group = 400, 100, "served"
	c, cl, adm := kafkaCluster(t)
	produceValues(t, cl, n)
	dir := t.TempDir()
	srv := serveSource(t, dir, servedKafkaYAML(c.ListenAddrs(), group, max))
	pc := servedPending(t, dir)
	var before int64
	runtest.WaitFor(t, "a pending count", func() bool { before = pendingOf(pc); return before > 0 }, runtest.Within(20*time.Second))
	if before != n {
		t.Errorf("pending %d before any read; want the group's lag, %d", before, n)
	}
	began := time.Now()
	client := servedSourceClient(t, dir)
	client.waitFor(30*time.Second, "every record", func() bool { return len(client.lines) >= n })
	took := time.Since(began)
	runtest.WaitFor(t, "pending 0", func() bool { return pendingOf(pc) == 0 }, runtest.Within(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if committed, _, err := offsetSums(ctx, adm, group); err != nil || committed != n {
		t.Errorf("group %s committed %d offsets of in (%v); want all %d", group, committed, err, n)
	}
	if code, _ := client.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("client exit %d; stderr:\n%s", code, client.stderrText())
	}
	if code, _ := srv.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("served source exit %d; stderr:\n%s", code, srv.stderrText())
	}
	servedOnce(t, client.stdoutLines(), "m-", n)
	grants := servedGrants(t, max, srv)
	t.Logf("%d records in %v; pending %d before the first read; grants by epoch %v", n, took.Round(time.Millisecond), before, grants)
}

// TestServeSourceKafkaKilled: the served source is killed (SIGKILL) while
// its client holds a batch it read and did not ack; the source started again
// in its place delivers that batch again (at least once), and every record
// reaches the next client's sink exactly once, as none was committed.
func TestServeSourceKafkaKilled(t *testing.T) {
	t.Parallel()
	const n, max, group = 300, 100, "served-killed"
	c, cl, adm := kafkaCluster(t)
	produceValues(t, cl, n)
	dir := t.TempDir()
	cfg := servedKafkaYAML(c.ListenAddrs(), group, max)
	srv := serveSource(t, dir, cfg)
	first := sourceclient.New(dir, time.Second, zap.NewNop())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := first.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	buf := make([]isb.ReadMessage, 20)
	var got int
	runtest.WaitFor(t, "a first batch", func() bool {
		k, err := first.Read(ctx, buf[got:])
		if err != nil {
			t.Fatal(err)
		}
		got += k
		return got > 0
	}, runtest.Within(20*time.Second))
	held := map[string]bool{}
	for _, m := range buf[:got] {
		held[string(m.Value)] = true
	}
	srv.stop(syscall.SIGKILL, 10*time.Second)
	first.Close()

	// The group gives srv2 the partitions once it drops the killed member,
	// session.timeout.ms (3s) after its last heartbeat.
	srv2 := serveSource(t, dir, cfg)
	client := servedSourceClient(t, dir)
	client.waitFor(30*time.Second, "every record", func() bool { return len(client.lines) >= n })
	pc := servedPending(t, dir)
	runtest.WaitFor(t, "pending 0", func() bool { return pendingOf(pc) == 0 }, runtest.Within(10*time.Second))
	if committed, _, err := offsetSums(ctx, adm, group); err != nil || committed != n {
		t.Errorf("group %s committed %d offsets of in (%v); want all %d", group, committed, err, n)
	}
	if code, _ := client.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("client exit %d; stderr:\n%s", code, client.stderrText())
	}
	if code, _ := srv2.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("served source exit %d; stderr:\n%s", code, srv2.stderrText())
	}
	lines := client.stdoutLines()
	servedOnce(t, lines, "m-", n)
	again := 0
	for _, p := range payloads(t, lines) {
		if held[p] {
			again++
		}
	}
	if again != len(held) {
		t.Errorf("%d of the %d records held unacked at the kill delivered again", again, len(held))
	}
	t.Logf("%d records held unacked at the kill, all delivered again; grants by epoch %v", len(held), servedGrants(t, max, srv2))
}

// TestServeSourceNATS: every message published on a core NATS subject
// reaches the client's sink exactly once through the served source, never
// more than max in an epoch; the served source exits 0 on SIGTERM.
func TestServeSourceNATS(t *testing.T) {
	t.Parallel()
	const n, max = 400, 100
	ns := natstest.Start(t, natstest.Options{})
	dir := t.TempDir()
	// The subscription is made before the role says it serves.
	srv := serveSource(t, dir, servedSourceYAML("served-nats", max, fmt.Sprintf(`    nats:
      url: %s
      subject: events.in
      queue: served
`, ns.URL)))
	nc := ns.Connect(t)
	for i := range n {
		if err := nc.Publish("events.in", []byte("n-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	client := servedSourceClient(t, dir)
	client.waitFor(30*time.Second, "every message", func() bool { return len(client.lines) >= n })
	took := time.Since(began)
	if code, _ := client.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("client exit %d; stderr:\n%s", code, client.stderrText())
	}
	if code, _ := srv.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("served source exit %d; stderr:\n%s", code, srv.stderrText())
	}
	servedOnce(t, client.stdoutLines(), "n-", n)
	t.Logf("%d messages in %v; grants by epoch %v", n, took.Round(time.Millisecond), servedGrants(t, max, srv))
}

// TestServeSourceHTTP: messages posted over HTTPS to the served http source
// from 8 senders, each waiting for its answer, are all answered 204 once the
// client acked them, and each reaches the client's sink exactly once, never
// more than max in an epoch; the served source exits 0 on SIGTERM.
func TestServeSourceHTTP(t *testing.T) {
	t.Parallel()
	const senders, each, max = 8, 50, 100
	port, err := proctest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv := serveSource(t, dir, servedSourceYAML("served-http", max, fmt.Sprintf(`    http:
      ports:
        https: %d
`, port)))
	srv.waitFor(20*time.Second, "the http source", func() bool { return httpsAddrRE.MatchString(srv.stderr.String()) })
	url := fmt.Sprintf("https://127.0.0.1:%d/vertices/served-http", port)
	client := servedSourceClient(t, dir)
	hc := sourceClient(30 * time.Second)
	codes := make([]map[int]int, senders)
	began := time.Now()
	var wg sync.WaitGroup
	for i := range senders {
		codes[i] = map[int]int{}
		wg.Go(func() {
			for j := range each {
				resp, err := hc.Post(url, "text/plain", strings.NewReader("h-"+strconv.Itoa(i*each+j)))
				if err != nil {
					t.Errorf("sender %d, post %d: %v", i, j, err)
					return
				}
				resp.Body.Close()
				codes[i][resp.StatusCode]++
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	total := map[int]int{}
	for _, c := range codes {
		for code, k := range c {
			total[code] += k
		}
	}
	if total[http.StatusNoContent] != senders*each {
		t.Fatalf("answers by status %v; want all %d answered 204", total, senders*each)
	}
	// A post is answered once the client acked it, after its sink wrote it.
	client.waitFor(10*time.Second, "every message", func() bool { return len(client.lines) >= senders*each })
	if code, _ := client.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("client exit %d; stderr:\n%s", code, client.stderrText())
	}
	if code, _ := srv.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("served source exit %d; stderr:\n%s", code, srv.stderrText())
	}
	servedOnce(t, client.stdoutLines(), "h-", senders*each)
	t.Logf("%d posts from %d senders in %v; grants by epoch %v", senders*each, senders, took.Round(time.Millisecond), servedGrants(t, max, srv))
}
