package test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/proctest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb/route"
)

// orderedParts is the partitions of the ordered vertices of these tests.
const orderedParts = 3

// orderedKeys are the keys the tests post with: two of each partition of 3.
var orderedKeys = []string{"a", "b", "key-0", "key-1", "user-123", "a:b"}

// randomCat is the container of the slowcat example waiting a random time
// from 0 to delay for each message, at indent 8 (a udf's fields).
func randomCat(t *testing.T, delay string) string {
	return "      udf:\n" + udContainer("        ", example(t, "slowcat"), map[string]string{"SLOWCAT_DELAY": delay, "SLOWCAT_RANDOM": "1"})
}

// orderedPipeline is http source in | map cat (3 partitions, slowcat with a
// random delay) | log sink out (3 partitions), with spec.ordered.enabled as
// ordered, readBatchSize batch and isb added to spec.
func orderedPipeline(t *testing.T, name string, ordered bool, batch int, delay, isb string) string {
	return orderedPipelineWith(name, ordered, batch, randomCat(t, delay), isb)
}

// orderedPipelineWith is orderedPipeline with cat's fields at indent 6
// (its udf, and limits).
func orderedPipelineWith(name string, ordered bool, batch int, cat, isb string) string {
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: ` + name + `
spec:
  ordered:
    enabled: ` + strconv.FormatBool(ordered) + `
  limits:
    readBatchSize: ` + strconv.Itoa(batch) + `
    readTimeout: 100ms
` + isb + `  vertices:
    - name: in
      source:
        http: {}
    - name: cat
      partitions: 3
` + cat + `    - name: out
      partitions: 3
      sink:
        log: {}
  edges:
    - from: in
      to: cat
    - from: cat
      to: out
`
}

// orderedPost is a message posted: the source it goes to, its key, and its
// payload <source>/<key>/<n>, n counting the posts of the key to the source.
type orderedPost struct{ source, key, payload string }

// orderedPosts are n messages to each of sources, taking the keys in turn.
func orderedPosts(sources []string, n int) []orderedPost {
	var out []orderedPost
	seq := map[string]int{}
	for i := range n {
		for _, s := range sources {
			k := orderedKeys[i%len(orderedKeys)]
			out = append(out, orderedPost{s, k, fmt.Sprintf("%s/%s/%d", s, k, seq[s+k])})
			seq[s+k]++
		}
	}
	return out
}

// postOrdered posts msgs one at a time, in order, each to urls[its source]
// with its key, retrying one until the source takes it (within a minute),
// until ctx ends.
func postOrdered(ctx context.Context, t *testing.T, urls map[string]string, msgs []orderedPost) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	for i, m := range msgs {
		deadline := time.Now().Add(time.Minute)
		for {
			if ctx.Err() != nil {
				return
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, urls[m.source], strings.NewReader(m.payload))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("X-Numaflow-Id", m.payload)
			req.Header.Set("X-Numaflow-Keys", m.key)
			resp, err := c.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					break
				}
				err = fmt.Errorf("%s", resp.Status)
			}
			if ctx.Err() != nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("posting message %d (%s): %v", i, m.payload, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// orderedPayloads are the payloads of log-sink lines, checking that each
// carries the key in its payload.
func orderedPayloads(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		payload, rest, ok := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
		key, _, _ := strings.Cut(rest, " EventTime - ")
		if parts := strings.Split(payload, "/"); !ok || len(parts) != 3 || parts[1] != key {
			t.Fatalf("not a log-sink line of a posted message with its key: %q", l)
		}
		out = append(out, payload)
	}
	return out
}

// partitionOf is the partition of out (and of cat) that payload's key goes to.
func partitionOf(payload string) int {
	return route.OrderedPartition([]string{strings.Split(payload, "/")[1]}, orderedParts)
}

// wantOrder is, per partition and source, the payloads of msgs in the order
// posted.
func wantOrder(msgs []orderedPost) map[[2]string][]string {
	out := map[[2]string][]string{}
	for _, m := range msgs {
		k := [2]string{strconv.Itoa(partitionOf(m.payload)), m.source}
		out[k] = append(out[k], m.payload)
	}
	return out
}

// gotOrder is, per partition and source, the payloads in the order written.
func gotOrder(payloads []string) map[[2]string][]string {
	out := map[[2]string][]string{}
	for _, p := range payloads {
		k := [2]string{strconv.Itoa(partitionOf(p)), strings.Split(p, "/")[0]}
		out[k] = append(out[k], p)
	}
	return out
}

// checkExactOrder checks that each partition's messages of each source were
// written exactly once each, in the order they were posted.
func checkExactOrder(t *testing.T, msgs []orderedPost, payloads []string) {
	t.Helper()
	want, got := wantOrder(msgs), gotOrder(payloads)
	for k, w := range want {
		if g := got[k]; strings.Join(g, " ") != strings.Join(w, " ") {
			t.Errorf("partition %s, source %s: written %d messages in the order\n%v\nwant the %d posted, in order\n%v", k[0], k[1], len(g), g, len(w), w)
		}
	}
	if len(payloads) != len(msgs) {
		t.Errorf("%d messages written; want the %d posted", len(payloads), len(msgs))
	}
}

// checkOrderWithRedelivery checks each partition's messages of each source
// as at-least-once delivery through restarts allows: the sequence written
// is runs of consecutive messages in the order posted, the first from the
// first message, each later run starting no later than one past the
// furthest message written before it (a run starting earlier is a
// redelivery of a contiguous suffix of what was written), the last ending
// with the last message posted. It returns the messages written more than
// once.
func checkOrderWithRedelivery(t *testing.T, msgs []orderedPost, payloads []string) (dups int) {
	t.Helper()
	want, got := wantOrder(msgs), gotOrder(payloads)
	for k, w := range want {
		pos := map[string]int{}
		for i, p := range w {
			pos[p] = i
		}
		g := got[k]
		furthest := -1
		for i, p := range g {
			n := pos[p]
			switch {
			case i > 0 && n == pos[g[i-1]]+1:
			case n <= furthest+1:
				if n <= furthest {
					dups += min(furthest, len(w)) - n + 1
				}
			default:
				t.Errorf("partition %s, source %s: message %d written is %s, position %d of the order posted, after %d "+
					"(furthest %d): a gap, not a redelivery; written:\n%v", k[0], k[1], i, p, n, pos[g[max(0, i-1)]], furthest, g)
				return dups
			}
			furthest = max(furthest, n)
		}
		if len(g) == 0 || pos[g[len(g)-1]] != len(w)-1 || furthest != len(w)-1 {
			t.Errorf("partition %s, source %s: %d written, not ending with the last of the %d posted: %v", k[0], k[1], len(g), len(w), g)
		}
	}
	return dups
}

// checkKeysSpread checks that the test's keys go to every partition.
func checkKeysSpread(t *testing.T) {
	t.Helper()
	seen := map[int]bool{}
	for _, k := range orderedKeys {
		seen[route.OrderedPartition([]string{k}, orderedParts)] = true
	}
	if len(seen) != orderedParts {
		t.Fatalf("the keys %v go to partitions %v of %d; want every one", orderedKeys, seen, orderedParts)
	}
}

// TestOrderedInOneProcess runs http | cat (3 partitions) | log (3
// partitions) with spec.ordered.enabled in one process on the memory ISB,
// reading batches of 50, with cat: slowcat delaying each message at random
// from 0 to 5ms; nackmap, which nacks every message once with a delay of
// 2ms, throttled to 200 deliveries a second so that messages queue (on an
// unordered vertex the memory buffer takes a nacked message back and queued
// ones overtake it); and slowcat throttled to 300 messages a second. The messages posted one after another over six keys reach the
// sink each exactly once, every partition's in the order posted.
func TestOrderedInOneProcess(t *testing.T) {
	t.Parallel()
	checkKeysSpread(t)
	throttled := func(n int) string {
		return fmt.Sprintf("      limits:\n        rateLimit:\n          max: %d\n          min: %d\n          rampUpDuration: 0s\n", n, n)
	}
	for _, tc := range []struct {
		name string
		cat  func(t *testing.T) string
		n    int
	}{
		{"random delay", func(t *testing.T) string { return randomCat(t, "5ms") }, 600},
		{"nacked once", func(t *testing.T) string {
			return "      udf:\n" + udContainer("        ", example(t, "nackmap"), map[string]string{"NACKMAP_DELAY": "2ms"}) + throttled(200)
		}, 300},
		{"throttled", func(t *testing.T) string { return randomCat(t, "5ms") + throttled(300) }, 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := writeConfig(t, orderedPipelineWith("ordered-local", true, 50, tc.cat(t), ""))
			msgs := orderedPosts([]string{"in"}, tc.n)
			p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
			url := sourceURL(p, httpsAddrRE, "in")
			postOrdered(context.Background(), t, map[string]string{"in": url}, msgs)
			p.waitFor(60*time.Second, "every message at the sink", func() bool { return len(p.lines) >= len(msgs) })
			if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
			}
			checkExactOrder(t, msgs, orderedPayloads(t, p.stdoutLines()))
		})
	}
}

// TestOrderedOnJetStream runs the same pipeline on JetStream with a process
// per replica: in, cat-0..2 and out-0..2 (an ordered vertex's replica i
// reads partition i alone), consumer ackWait 1s. cat-1 is killed with
// SIGKILL while messages flow and started again 500ms later. Every message
// posted is written by the out replica of its partition, and no other;
// each partition's sequence is the order posted, but that a contiguous run
// already written may be written again after the restart
// (checkOrderWithRedelivery): no message overtakes one posted before it.
func TestOrderedOnJetStream(t *testing.T) {
	t.Parallel()
	checkKeysSpread(t)
	nats := natstest.Start(t, natstest.Options{})
	cfg := writeConfig(t, orderedPipeline(t, "ordered-js", true, 50, "10ms", jetStreamISB(nats.URL, "      ackWait: 1s\n")))
	msgs := orderedPosts([]string{"in"}, 900)
	port, err := proctest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var outs, cats []*proc
	for i := range orderedParts {
		outs = append(outs, vertexProc(t, cfg, "out", i))
		cats = append(cats, vertexProc(t, cfg, "cat", i))
	}
	in := vertexProc(t, cfg, "in", 0, "--http-addr", addr)
	url := sourceURL(in, httpsAddrRE, "in")
	posted := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { // a test that fails early stops the posts first
		cancel()
		<-posted
	})
	go func() {
		defer close(posted)
		postOrdered(ctx, t, map[string]string{"in": url}, msgs)
	}()
	written := func() int {
		n := 0
		for _, o := range outs {
			n += len(o.stdoutLines())
		}
		return n
	}
	runtest.WaitFor(t, "a sixth of the messages at the sinks", func() bool { return written() >= len(msgs)/6 },
		runtest.Within(60*time.Second), runtest.Every(20*time.Millisecond))
	cats[1].stop(syscall.SIGKILL, 10*time.Second)
	killedAt := written()
	time.Sleep(500 * time.Millisecond)
	cats[1] = vertexProc(t, cfg, "cat", 1)
	select {
	case <-posted:
	case <-time.After(2 * time.Minute):
		t.Fatal("posting did not finish within 2m")
	}
	runtest.WaitFor(t, "every message at the sinks", func() bool {
		seen := map[string]bool{}
		for _, o := range outs {
			for _, l := range o.stdoutLines() {
				payload, _, _ := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
				seen[payload] = true
			}
		}
		return len(seen) >= len(msgs)
	}, runtest.Within(90*time.Second), runtest.Every(100*time.Millisecond), runtest.Showing(func() string {
		return fmt.Sprintf("%d lines at the sinks; stderr of cat-1:\n%s", written(), cats[1].stderrText())
	}))
	for _, p := range append(append([]*proc{in}, cats...), outs...) {
		if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	var all []string
	for i, o := range outs {
		payloads := orderedPayloads(t, o.stdoutLines())
		for _, p := range payloads {
			if partitionOf(p) != i {
				t.Errorf("out-%d wrote %s, of partition %d: a replica reads its own partition alone", i, p, partitionOf(p))
				break
			}
		}
		all = append(all, payloads...)
	}
	dups := checkOrderWithRedelivery(t, msgs, all)
	t.Logf("cat-1 killed with %d of %d messages written; %d written again after its restart", killedAt, len(msgs), dups)
}

// numaflowOrderedYAMLs are Numaflow's ordered-processing pipelines, under
// $NUMAFLOW_DIR.
var numaflowOrderedYAMLs = []string{
	"examples/41-ordered-processing.yaml",
	"test/e2e/testdata/ordered-processing.yaml",
	"test/e2e/testdata/ordered-processing-multi-source.yaml",
}

var (
	nfMapCatRE    = regexp.MustCompile(`(?m)^ +container:\n +image: quay\.io/numaio/numaflow-rs/map-cat:stable\n( +imagePullPolicy: .*\n)?`)
	nfRedisSinkRE = regexp.MustCompile(`(?ms)^( +)udsink:\n.*?\n(  edges:)`)
	httpVertexRE  = regexp.MustCompile(`- name: (\S+)\n +source: *\n +http: \{\}`)
)

// TestNumaflowOrderedPipelines runs Numaflow's three ordered-processing
// pipelines in one process, their numaflow-rs images replaced: map-cat by
// the slowcat example delaying each message at random from 0 to 5ms, the
// redis sink by a log sink. Each http source gets 300 messages, posted in
// turn to every source, over six keys; every partition's messages of each
// source reach the sink once each, in the order posted. It is skipped
// without $NUMAFLOW_DIR.
func TestNumaflowOrderedPipelines(t *testing.T) {
	dir := os.Getenv(envNumaflowDir)
	if dir == "" {
		t.Skipf("%s is not set: Numaflow's ordered-processing pipelines are not run (set it to Numaflow's source tree)", envNumaflowDir)
	}
	checkKeysSpread(t)
	for _, rel := range numaflowOrderedYAMLs {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			y := string(raw)
			if !nfMapCatRE.MatchString(y) {
				t.Fatalf("%s: no map-cat container to replace", rel)
			}
			y = nfMapCatRE.ReplaceAllLiteralString(y, udContainer("        ", example(t, "slowcat"),
				map[string]string{"SLOWCAT_DELAY": "5ms", "SLOWCAT_RANDOM": "1"}))
			y = nfRedisSinkRE.ReplaceAllString(y, "${1}log: {}\n${2}")
			// Each http source on a free port of its own.
			urls := map[string]string{}
			var sources []string
			for _, m := range httpVertexRE.FindAllStringSubmatch(y, -1) {
				port, err := proctest.FreePort()
				if err != nil {
					t.Fatal(err)
				}
				urls[m[1]] = "https://127.0.0.1:" + strconv.Itoa(port) + "/vertices/" + m[1]
				sources = append(sources, m[1])
			}
			y = httpVertexRE.ReplaceAllStringFunc(y, func(v string) string {
				name := httpVertexRE.FindStringSubmatch(v)[1]
				port, _, _ := strings.Cut(strings.TrimPrefix(urls[name], "https://127.0.0.1:"), "/")
				return strings.Replace(v, "http: {}", "http:\n          ports: {https: "+port+"}", 1)
			})
			if len(sources) == 0 {
				t.Fatalf("%s: no http source", rel)
			}
			p := start(t, "run", "-f", writeConfig(t, y), "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0")
			p.waitFor(20*time.Second, "the http sources listening", func() bool {
				return strings.Count(p.stderr.String(), `"msg":"http source listening"`) == len(sources)
			})
			msgs := orderedPosts(sources, 300)
			postOrdered(context.Background(), t, urls, msgs)
			p.waitFor(60*time.Second, "every message at the sink", func() bool { return len(p.lines) >= len(msgs) })
			if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
			}
			checkExactOrder(t, msgs, orderedPayloads(t, p.stdoutLines()))
		})
	}
}
