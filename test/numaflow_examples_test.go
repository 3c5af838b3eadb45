package test

import (
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/numaflowgo"
	"github.com/sluiceflow/sluice/internal/podmantest"
	"github.com/sluiceflow/sluice/internal/proctest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// envNumaflowDir names a directory holding the source of Numaflow, whose
// example pipelines the tests of this file run as they are.
const envNumaflowDir = "NUMAFLOW_DIR"

// numaflowExample returns the path of Numaflow's examples/<name>.yaml and
// the podman that runs its images, numaflow-go's examples built from
// $NUMAFLOW_GO_DIR under the names the YAML gives them. It skips the test
// without either source tree or without podman.
func numaflowExample(t *testing.T, name string, images ...string) (string, *podmantest.Podman) {
	t.Helper()
	dir, src := os.Getenv(envNumaflowDir), os.Getenv(numaflowgo.EnvDir)
	if dir == "" || src == "" {
		t.Skipf("%s and %s are not both set: Numaflow's example %s is not run (set them to Numaflow's and numaflow-go's source trees)",
			envNumaflowDir, numaflowgo.EnvDir, name)
	}
	path := filepath.Join(dir, "examples", name+".yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s=%s: %v", envNumaflowDir, dir, err)
	}
	pm := podmantest.New(t)
	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	pm.NumaflowGoImages(t, src, images...)
	return path, pm
}

// startExample runs vertex with args, its containers run by podman.
func startExample(t *testing.T, pm *podmantest.Podman, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(vertexBin, args...)
	cmd.Env = append(append(os.Environ(), pm.EngineEnv(t)...), env...)
	return startCmd(t, cmd)
}

// nfExample is a run of one of Numaflow's example pipelines: in one process
// (procs has one), or as a process per vertex replica on JetStream.
type nfExample struct {
	t     *testing.T
	procs []*proc
}

// runExample runs the pipeline at path as it is, in one process, or, with
// replicas, as a process per replica of each vertex named there (replicas
// of each vertex) on a nats-server of the test's own, named in
// $NUMAFLOW_ISBSVC_JETSTREAM_URL as in Numaflow's pods. extra are flags of
// every process.
func runExample(t *testing.T, pm *podmantest.Podman, path string, replicas map[string]int, extra ...string) *nfExample {
	return runExampleWith(t, pm, path, replicas, func(string) []string { return extra })
}

// runExampleWith is runExample with the extra flags of each vertex's
// processes (vertex "" for the one process).
func runExampleWith(t *testing.T, pm *podmantest.Podman, path string, replicas map[string]int, extra func(vertex string) []string) *nfExample {
	t.Helper()
	e := &nfExample{t: t}
	if replicas == nil {
		e.procs = append(e.procs, startExample(t, pm, nil, append([]string{"run", "-f", path, "--metrics-addr", "127.0.0.1:0"}, extra("")...)...))
		return e
	}
	nats := natstest.Start(t, natstest.Options{})
	env := []string{vertexconfig.EnvISBSvcJetStreamURL + "=" + nats.URL}
	for _, v := range slices.Sorted(maps.Keys(replicas)) {
		for r := range replicas[v] {
			args := append([]string{"run", "-f", path, "--vertex", v, "--replica", strconv.Itoa(r), "--metrics-addr", "127.0.0.1:0"}, extra(v)...)
			e.procs = append(e.procs, startExample(t, pm, env, args...))
		}
	}
	return e
}

// lines are the stdout lines of every process.
func (e *nfExample) lines() []string {
	var out []string
	for _, p := range e.procs {
		out = append(out, p.stdoutLines()...)
	}
	return out
}

// waitFor waits, at most timeout, until cond holds of the lines so far.
func (e *nfExample) waitFor(timeout time.Duration, what string, cond func(lines []string) bool) {
	e.t.Helper()
	runtest.WaitFor(e.t, what, func() bool {
		for _, p := range e.procs {
			select {
			case <-p.done:
				e.t.Fatalf("%s exited (%v) before %s; stderr:\n%s", strings.Join(p.cmd.Args, " "), p.err, what, p.stderrText())
			default:
			}
		}
		return cond(e.lines())
	}, runtest.Within(timeout), runtest.Showing(func() string { return "stderr of the first process:\n" + e.procs[0].stderrText() }))
}

// stop stops every process with SIGTERM and checks they exit 0, within the
// 30s a process of every vertex drains its in-memory buffers for and the 5s
// its containers have to stop.
func (e *nfExample) stop() {
	e.t.Helper()
	for _, p := range e.procs {
		if code, _ := p.stop(syscall.SIGTERM, 50*time.Second); code != 0 {
			e.t.Errorf("%s: exit code %d; stderr:\n%s", strings.Join(p.cmd.Args, " "), code, p.stderrText())
		}
	}
}

// stderr is the stderr of every process.
func (e *nfExample) stderr() string {
	var b strings.Builder
	for _, p := range e.procs {
		b.WriteString(p.stderrText())
	}
	return b.String()
}

const nfgoImage = "quay.io/numaio/numaflow-go/"

// Numaflow's example 14: a generator's messages go through numaflow-go's cat
// to its fallback sink example, which sends every message to the fallback,
// the same example, which prints it and answers fallback again, which a
// fallback sink may not answer (Numaflow's runtime fails then): the first
// batch is printed by the sink, then by the fallback sink at each retry,
// never lost, with an error that says why.
func TestNumaflowExampleFallback(t *testing.T) {
	for _, procs := range []map[string]int{nil, {"in": 1, "cat": 1, "output": 1}} {
		t.Run(map[bool]string{true: "one process", false: "processes"}[procs == nil], func(t *testing.T) {
			t.Parallel()
			path, pm := numaflowExample(t, "14-simple-fallback-pipeline", nfgoImage+"map-cat:stable", nfgoImage+"fb-sink-log:stable")
			e := runExample(t, pm, path, procs)
			const printed = "Primary sink under maintenance, writing to fallback sink - "
			counts := func(lines []string) map[string]int {
				c := map[string]int{}
				for _, l := range lines {
					if v, ok := strings.CutPrefix(l, printed); ok {
						c[v]++
					}
				}
				return c
			}
			e.waitFor(2*time.Minute, "a batch of 5 messages printed 3 times each", func(lines []string) bool {
				n := 0
				for _, c := range counts(lines) {
					if c >= 3 {
						n++
					}
				}
				return n >= 5
			})
			e.stop()
			if why := "which the fallback stage may not answer"; !strings.Contains(e.stderr(), why) {
				t.Errorf("no error says %q; stderr:\n%s", why, e.stderr())
			}
			t.Logf("%d messages printed by the sink and its fallback", len(counts(e.lines())))
		})
	}
}

// httpExample runs one of Numaflow's examples whose source, in, is an http
// source, serving on a free loopback port, and returns the run and the
// source's URL.
func httpExample(t *testing.T, pm *podmantest.Podman, path string, replicas map[string]int, extra ...string) (*nfExample, string) {
	t.Helper()
	port, err := proctest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	e := runExampleWith(t, pm, path, replicas, func(v string) []string {
		if v == "" || v == "in" {
			return append([]string{"--http-addr", addr}, extra...)
		}
		return extra
	})
	return e, "https://" + addr + "/vertices/in"
}

// post is a message the test sends to an http source: its payload and
// event time.
type post struct {
	payload string
	at      time.Time
}

// feed sends each message to url, as Numaflow's docs do with curl -k, one
// at a time, each with an ID of its own and its event time, retrying each
// until the source takes it (within a minute).
func feed(t *testing.T, url string, msgs []post) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i, m := range msgs {
		deadline := time.Now().Add(time.Minute)
		for {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(m.payload))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Numaflow-Id", run+"-"+strconv.Itoa(i))
			req.Header.Set("X-Numaflow-Event-Time", strconv.FormatInt(m.at.UnixMilli(), 10))
			resp, err := c.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					break
				}
				err = fmt.Errorf("%s", resp.Status)
			}
			if time.Now().After(deadline) {
				t.Fatalf("posting message %d to %s: %v", i, url, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// evenOdd are the messages for numaflow-go's even-odd map: the numbers
// 1..n, one every step of event time from t0, and a payload no number,
// which the map drops, at last, whose event time moves the watermark on.
func evenOdd(n int, t0 time.Time, step, last time.Duration) []post {
	var msgs []post
	for i := 1; i <= n; i++ {
		msgs = append(msgs, post{strconv.Itoa(i), t0.Add(time.Duration(i-1) * step)})
	}
	return append(msgs, post{"tick", t0.Add(last)})
}

// keyOf is the key numaflow-go's even-odd map gives the number v.
func keyOf(v int) string { return map[bool]string{true: "even", false: "odd"}[v%2 == 0] }

// exampleResults are the results of the example's reduce the log sink
// printed: by window end (ms) and key, the numbers the results carry.
func exampleResults(t *testing.T, lines []string) map[windowKey][]int {
	t.Helper()
	_, res := nfgoSinkLines(lines)
	out := map[windowKey][]int{}
	for _, r := range res {
		v, err := strconv.Atoi(r.payload)
		if err != nil {
			t.Fatalf("a result that is no number: %+v", r)
		}
		k := windowKey{strings.Trim(r.keys, "[]"), r.eventTime + 1}
		out[k] = append(out[k], v)
	}
	return out
}

// windowSums are, by window end (ms) and key, the sums of the numbers of
// msgs in the windows of length every slide that hold their event times.
func windowSums(msgs []post, length, slide time.Duration) map[windowKey]int {
	want := map[windowKey]int{}
	l, sl := length.Milliseconds(), slide.Milliseconds()
	for _, m := range msgs {
		v, err := strconv.Atoi(m.payload)
		if err != nil {
			continue
		}
		et := m.at.UnixMilli()
		for end := (et/sl + 1) * sl; end-l <= et; end += sl {
			want[windowKey{keyOf(v), end}] += v
		}
	}
	return want
}

// exampleReplicas are the processes of the examples with a map and a reduce
// of two partitions: the map's three replicas of example 6 (scale.min),
// a replica per partition of the reduce.
func exampleReplicas(mapVertex string, mapReplicas int, reduce string) map[string]int {
	return map[string]int{"in": 1, mapVertex: mapReplicas, reduce: 2, "sink": 1}
}

// The processes of the examples, and "one process".
func exampleModes(replicas map[string]int) []map[string]int { return []map[string]int{nil, replicas} }

func modeName(replicas map[string]int) string {
	if replicas == nil {
		return "one process"
	}
	return "processes"
}

// Numaflow's examples 6 and 7: numbers posted to the http source, keyed
// even or odd by numaflow-go's map, summed per window by its reducer, fixed
// (one minute) and sliding (a minute every 10s). Every window that closed
// has one result per key, the sum of that key's numbers in it.
func TestNumaflowExampleReduce(t *testing.T) {
	for _, c := range []struct {
		name, mapVertex, reduce string
		mapReplicas             int
		length, slide           time.Duration
	}{
		{"6-reduce-fixed-window", "atoi", "compute-sum", 3, time.Minute, time.Minute},
		{"7-reduce-sliding-window", "map", "reduce-sliding", 1, time.Minute, 10 * time.Second},
	} {
		for _, procs := range exampleModes(exampleReplicas(c.mapVertex, c.mapReplicas, c.reduce)) {
			t.Run(c.name+"/"+modeName(procs), func(t *testing.T) {
				t.Parallel()
				path, pm := numaflowExample(t, c.name, nfgoImage+"map-even-odd:stable", nfgoImage+"reduce-sum:stable")
				e, url := httpExample(t, pm, path, procs, "--state-dir", t.TempDir())
				t0 := time.Now().Add(-time.Hour).Truncate(time.Minute)
				msgs := evenOdd(100, t0, 3*time.Second, 10*time.Minute) // 5 minutes of numbers
				feed(t, url, msgs)
				want := windowSums(msgs, c.length, c.slide)
				closed := t0.Add(5 * time.Minute).UnixMilli() // every window of numbers ends by then
				e.waitFor(2*time.Minute, "a result of every window", func(lines []string) bool {
					got := exampleResults(t, lines)
					for w := range want {
						if w.end <= closed && len(got[w]) == 0 {
							return false
						}
					}
					return true
				})
				e.stop()
				got := exampleResults(t, e.lines())
				n := 0
				for w, sum := range want {
					if w.end > closed {
						continue
					}
					n++
					if g := got[w]; len(g) != 1 || g[0] != sum {
						t.Errorf("window ending %s, key %s: results %v; want one, %d", time.UnixMilli(w.end).UTC().Format("15:04:05"), w.key, g, sum)
					}
				}
				t.Logf("%d numbers posted; %d windows and keys, each with its sum", len(msgs)-1, n)
			})
		}
	}
}

// Numaflow's example 12: numbers posted to the http source, keyed even or
// odd, counted per session (closed after 120s without a message) by
// numaflow-go's session counter. Each key's one session, closed by a
// message far later, counts that key's numbers.
func TestNumaflowExampleSession(t *testing.T) {
	for _, procs := range exampleModes(map[string]int{"in": 1, "even-odd": 1, "compute-count": 1, "sink": 1}) {
		t.Run(modeName(procs), func(t *testing.T) {
			t.Parallel()
			path, pm := numaflowExample(t, "12-simple-session-pipeline", nfgoImage+"map-even-odd:stable", nfgoImage+"session-counter:stable")
			e, url := httpExample(t, pm, path, procs, "--state-dir", t.TempDir())
			t0 := time.Now().Add(-time.Hour).Truncate(time.Minute)
			msgs := evenOdd(41, t0, time.Second, 10*time.Minute) // 21 odd, 20 even, in 41s
			feed(t, url, msgs)
			counts := func(lines []string) map[string][]int {
				out := map[string][]int{}
				for w, vs := range exampleResults(t, lines) {
					out[w.key] = append(out[w.key], vs...)
				}
				return out
			}
			e.waitFor(2*time.Minute, "a count of each key", func(lines []string) bool {
				c := counts(lines)
				return len(c["even"]) > 0 && len(c["odd"]) > 0
			})
			e.stop()
			if c := counts(e.lines()); len(c["even"]) != 1 || c["even"][0] != 20 || len(c["odd"]) != 1 || c["odd"][0] != 21 {
				t.Errorf("counts %v; want even [20], odd [21]", c)
			}
		})
	}
}

// Numaflow's example 13: numbers posted to the http source, keyed even or
// odd, summed over 10-minute windows by numaflow-go's reduce streamer,
// which sends the sum whenever it reaches 100 and starts again, and what is
// left when the window closes. Its results come while the window is open:
// each at least 100, in all no more than the key's numbers; once a message
// far later closes the window, they add up to them.
func TestNumaflowExampleStreamingReduce(t *testing.T) {
	for _, procs := range exampleModes(exampleReplicas("atoi", 1, "compute-sum")) {
		t.Run(modeName(procs), func(t *testing.T) {
			t.Parallel()
			path, pm := numaflowExample(t, "13-streaming-reduce-pipeline", nfgoImage+"map-even-odd:stable", nfgoImage+"reduce-stream-sum:stable")
			e, url := httpExample(t, pm, path, procs, "--state-dir", t.TempDir())
			t0 := time.Now().Add(-time.Hour).Truncate(10 * time.Minute)
			msgs := evenOdd(60, t0, time.Second, 0)
			open := msgs[:len(msgs)-1] // no message after them: the window stays open
			feed(t, url, open)
			total := map[string]int{}
			for _, m := range open {
				v, _ := strconv.Atoi(m.payload)
				total[keyOf(v)] += v
			}
			sums := func(lines []string) map[string][]int {
				out := map[string][]int{}
				for w, vs := range exampleResults(t, lines) {
					out[w.key] = append(out[w.key], vs...)
				}
				return out
			}
			e.waitFor(2*time.Minute, "results of each key while the window is open", func(lines []string) bool {
				s := sums(lines)
				return len(s["even"]) > 0 && len(s["odd"]) > 0
			})
			early := sums(e.lines())
			for k, vs := range early {
				sum := 0
				for _, v := range vs {
					sum += v
					if v < 100 {
						t.Errorf("key %s: an early result %d; want each at least 100", k, v)
					}
				}
				if sum > total[k] {
					t.Errorf("key %s: early results %v add up to %d, more than the key's %d", k, vs, sum, total[k])
				}
			}
			feed(t, url, []post{{"tick", t0.Add(time.Hour)}})
			e.waitFor(2*time.Minute, "the window's last results", func(lines []string) bool {
				s := sums(lines)
				for k, want := range total {
					got := 0
					for _, v := range s[k] {
						got += v
					}
					if got < want {
						return false
					}
				}
				return true
			})
			e.stop()
			for k, vs := range sums(e.lines()) {
				sum := 0
				for _, v := range vs {
					sum += v
				}
				if sum != total[k] {
					t.Errorf("key %s: results %v add up to %d; want %d", k, vs, sum, total[k])
				}
			}
			t.Logf("early results %v; totals %v", early, total)
		})
	}
}
