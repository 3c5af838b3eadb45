package test

import (
	"maps"
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
	t.Helper()
	e := &nfExample{t: t}
	if replicas == nil {
		e.procs = append(e.procs, startExample(t, pm, nil, append([]string{"run", "-f", path, "--metrics-addr", "127.0.0.1:0"}, extra...)...))
		return e
	}
	nats := natstest.Start(t, natstest.Options{})
	env := []string{vertexconfig.EnvISBSvcJetStreamURL + "=" + nats.URL}
	for _, v := range slices.Sorted(maps.Keys(replicas)) {
		for r := range replicas[v] {
			args := append([]string{"run", "-f", path, "--vertex", v, "--replica", strconv.Itoa(r), "--metrics-addr", "127.0.0.1:0"}, extra...)
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
	deadline := time.Now().Add(timeout)
	for !cond(e.lines()) {
		for _, p := range e.procs {
			select {
			case <-p.done:
				e.t.Fatalf("%s exited (%v) before %s; stderr:\n%s", strings.Join(p.cmd.Args, " "), p.err, what, p.stderrText())
			default:
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %v waiting for %s; stderr of the first process:\n%s", timeout, what, e.procs[0].stderrText())
		}
		time.Sleep(100 * time.Millisecond)
	}
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
