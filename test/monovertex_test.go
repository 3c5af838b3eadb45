package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
)

// monoVertexYAML is a generator → cat → log MonoVertex with the given rateLimit
// block (indented under spec.limits).
func monoVertexYAML(name, rateLimit string, rpu int) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: %s
spec:
  limits:
    readTimeout: 200ms
    rateLimit:
%s
  source:
    generator:
      rpu: %d
      duration: 1s
  udf:
    builtin:
      name: cat
  sink:
    log: {}
`, name, rateLimit, rpu)
}

// TestRampAndLimit runs a throttled MonoVertex for several seconds: its
// pool follows the mode's ramp from 5 to 20 in steps of 3, epoch by epoch,
// exactly as the mode's rule says of the epochs it logged, and never passes
// max; the log sink's lines per second of creation never pass 20 either,
// and most epochs grant the whole pool. (Whether an epoch takes all of its
// pool is the machine's business: a replica not run for a while takes less,
// and then relaxed and onlyIfUsed ramp as their rules say of that.)
func TestRampAndLimit(t *testing.T) {
	t.Parallel()
	const min, step, max = 5, 3, 20
	tests := []struct {
		name, mode string
		// next is the pool of an epoch after prev, given the epochs
		// between them (none logged) and what prev granted.
		next func(prev epochLog, gap int64, l epochLog) float64
	}{
		// A step at each epoch with a call.
		{"relaxed", "relaxed: {}", func(prev epochLog, _ int64, l epochLog) float64 {
			if l.Granted == 0 {
				return prev.Pool
			}
			return prev.Pool + step
		}},
		// A step at each epoch, calls or not.
		{"scheduled", "scheduled: {}", func(prev epochLog, gap int64, _ epochLog) float64 {
			return prev.Pool + step*float64(gap)
		}},
		// A step at an epoch with a call when the last one with a call
		// used all of its share.
		{"onlyIfUsed", "onlyIfUsed: {thresholdPercentage: 100}", func(prev epochLog, _ int64, l epochLog) float64 {
			if l.Granted == 0 || prev.Granted < prev.Share {
				return prev.Pool
			}
			return prev.Pool + step
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := writeConfig(t, monoVertexYAML("ramp", `      max: 20
      min: 5
      rampUpDuration: 5s
      modes:
        `+tt.mode, 1000))
			p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
			p.metricsAddr()
			// Run until the ramp is done and two seconds at max have followed.
			atMax := func() int {
				n := 0
				for _, l := range p.epochs(t) {
					if l.Pool == max {
						n++
					}
				}
				return n
			}
			runtest.WaitFor(t, "three epochs at max", func() bool { return atMax() >= 3 }, untilEpochs...)
			code, _ := p.stop(syscall.SIGTERM, 10*time.Second)
			if code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
			}
			eps := p.epochs(t)
			epochs := slices.Sorted(maps.Keys(eps))
			var pools []string
			for i, e := range epochs {
				l := eps[e]
				pools = append(pools, fmt.Sprintf("%d:%g/%d", e, l.Pool, l.Granted))
				want := float64(min)
				switch {
				case i > 0:
					want = math.Min(tt.next(eps[epochs[i-1]], e-epochs[i-1], l), max)
				case tt.name == "scheduled":
					// Scheduled ramps from the limiter's first epoch, calls or
					// not: if the first read came later, the ramp is already
					// some steps on.
					if l.Pool > min && math.Mod(l.Pool-min, step) == 0 {
						want = l.Pool
					}
				}
				if l.Pool != want || float64(l.Granted) > l.Pool {
					t.Errorf("epoch %d: pool %g, granted %d; want a pool of %g, no more granted (pool/granted by epoch: %v)",
						e, l.Pool, l.Granted, want, pools)
				}
			}
			if n := atMax(); n < 3 {
				t.Errorf("%d epochs at max; want 3 (pool/granted by epoch: %v)", n, pools)
			}
			// The last epoch is cut short by SIGTERM.
			mostReach(t, "the whole pool granted", epochs[:len(epochs)-1], 0, 5, func(e int64) int64 {
				return eps[e].Granted - int64(eps[e].Pool)
			})
			for i, n := range perSecond(t, p.stdoutLines()) {
				if n > max {
					t.Errorf("second %d: %d messages; max is %d (pool/granted by epoch: %v)", i, n, max, pools)
				}
			}
		})
	}
}

// TestGracefulShutdown checks that SIGTERM and SIGINT stop a busy vertex within
// readTimeout plus a few seconds with exit code 0, that every message it read was
// written once, and that the last line on stdout is whole.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			cfg := writeConfig(t, monoVertexYAML("shutdown", "      max: 5000\n      min: 5000\n      rampUpDuration: 0s", 100000))
			p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0")
			addr := p.metricsAddr()
			p.waitFor(20*time.Second, "messages", func() bool { return len(p.lines) >= 1000 })
			code, took := p.stop(sig, 10*time.Second)
			if code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
			}
			if took > 1200*time.Millisecond+3*time.Second {
				t.Fatalf("took %v to stop; want within readTimeout + 3s", took)
			}
			lines := p.stdoutLines()
			seen := map[string]bool{}
			for _, l := range lines {
				id := l[strings.LastIndex(l, " ID - ")+6:]
				if seen[id] {
					t.Fatalf("message %s written twice", id)
				}
				seen[id] = true
				createdSecond(t, l) // every line is a whole message
			}
			if !strings.Contains(p.stderrText(), `"msg":"stopped"`) {
				t.Fatalf("no stop log; stderr:\n%s", p.stderrText())
			}
			_ = addr
		})
	}
}

// TestObservability reads /status, /metrics, /healthz and /readyz of a throttled
// vertex.
func TestObservability(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, monoVertexYAML("observed", "      max: 10\n      min: 10\n      rampUpDuration: 0s", 1000))
	p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", "3")
	addr := "http://" + p.metricsAddr()
	p.waitFor(20*time.Second, "messages", func() bool { return len(p.lines) >= 10 })

	if code, _ := httpGet(t, addr+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	if code, _ := httpGet(t, addr+"/readyz"); code != 200 {
		t.Fatalf("/readyz %d", code)
	}
	// Ten messages a second against a source of a thousand: throttled by the
	// limit, once the batch written is acked and the next read waits.
	var code int
	var body []byte
	var st struct {
		Vertex           string
		Replica          int
		RateLimit        bool
		Mode             string
		Pool             float64
		Share            int64
		GrantedThisEpoch int64
		Replicas         int `json:"poolSize"`
		Throttled        bool
		ThrottledReasons []string
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, body = httpGet(t, addr+"/status")
		if err := json.Unmarshal(body, &st); code != 200 || err != nil {
			t.Fatalf("/status %d %v: %s", code, err, body)
		}
		if st.Throttled || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // real time: the vertex is real
	}
	if st.Vertex != "observed" || st.Replica != 3 || !st.RateLimit || st.Mode != "relaxed" || st.Pool != 10 || st.Share != 10 || st.Replicas != 1 {
		t.Fatalf("/status = %s", body)
	}
	if !st.Throttled || len(st.ThrottledReasons) != 1 || st.ThrottledReasons[0] != "rate_limited" {
		t.Fatalf("/status throttled = %v %v; want rate_limited", st.Throttled, st.ThrottledReasons)
	}
	_, metrics := httpGet(t, addr+"/metrics")
	for _, name := range []string{
		"sluice_forward_read_total", "sluice_forward_write_total", "sluice_forward_ack_total",
		"sluice_forward_drop_total", "sluice_forward_error_total", "sluice_forward_batch_duration_seconds_bucket",
		"sluice_ratelimit_pool_tokens", "sluice_ratelimit_share_tokens", "sluice_ratelimit_granted_total",
		"sluice_ratelimit_deposited_total", "sluice_ratelimit_pool_size", `sluice_ratelimit_throttled_seconds_total{reason="rate_limited"`,
	} {
		if !strings.Contains(string(metrics), name) {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if !regexp.MustCompile(`sluice_forward_write_total\{replica="3",vertex="observed"\} [1-9]`).Match(metrics) {
		t.Errorf("write counter not labelled with vertex and replica, or zero")
	}
	p.stop(syscall.SIGTERM, 10*time.Second)
}

// TestValidate checks `vertex validate`: a summary and exit 0 for a good file,
// every problem and exit 2 for a bad one.
func TestValidate(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(vertexBin, args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	code, out, _ := run("validate", "-f", "../config/examples/monovertex.yaml")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "is valid") {
		t.Fatalf("good file: exit %d, %q", code, out)
	}
	// The summary names each user-defined container.
	code, out, _ = run("validate", "-f", "../config/examples/udf.yaml")
	if want := `(udsource sluice/simplesource:latest → transformer sluice/eventtime:latest → udf sluice/evenodd:latest → udsink sluice/logsink:latest;`; code != 0 || !strings.Contains(out, want) {
		t.Errorf("udf example: exit %d, %q; want it to say %s", code, out, want)
	}
	// Objects as Numaflow writes them back, with null on unset fields
	// ("groupBy": null on a map): null sets nothing.
	for _, file := range []string{"monovertex-numaflow-nulls.yaml", "pipeline-numaflow-nulls.yaml"} {
		code, out, errOut := run("validate", "-f", "../config/testdata/good/"+file)
		if code != 0 || !strings.Contains(out, "is valid") {
			t.Errorf("%s: exit %d, %q, %q; want valid", file, code, out, errOut)
		}
	}
	bad := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: bad
spec:
  limits:
    rateLimit:
      max: 10
      min: 50
  source:
    generatr: {}
  sink:
    log: {}
`)
	code, out, errOut := run("validate", "-f", bad)
	if code != 2 || out != "" {
		t.Fatalf("bad file: exit %d, stdout %q", code, out)
	}
	for _, want := range []string{"spec.limits.rateLimit.min (50) > max (10) (line 9)", `spec.source.generatr: unknown field "generatr"; did you mean "generator"? (line 11)`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
	if code, _, errOut := run("run", "-f", bad); code != 2 || !strings.Contains(errOut, "min (50) > max (10)") {
		t.Fatalf("run of a bad file: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run("run", "-f", "/nonexistent.yaml"); code != 2 || !strings.Contains(errOut, "/nonexistent.yaml") {
		t.Fatalf("run of a missing file: exit %d, %q", code, errOut)
	}
	os.Setenv("NUMAFLOW_REPLICA", "x")
	defer os.Unsetenv("NUMAFLOW_REPLICA")
	if code, _, errOut := run("run", "-f", "../config/examples/monovertex.yaml"); code != 2 || !strings.Contains(errOut, `NUMAFLOW_REPLICA ("x")`) {
		t.Fatalf("bad NUMAFLOW_REPLICA: exit %d, %q", code, errOut)
	}
}

// TestBench checks the output of `vertex bench`: a line per mode and, last, the
// on/off ratio. (The figures themselves are measured with make bench.)
func TestBench(t *testing.T) {
	cmd := exec.Command(vertexBin, "bench", "-f", "../config/examples/bench.yaml", "--duration", "400ms", "--runs", "2")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "off:") || !strings.HasPrefix(lines[1], "on:") ||
		!regexp.MustCompile(`^on/off ratio: [0-9]+\.[0-9]{3}$`).MatchString(lines[2]) {
		t.Fatalf("bench output:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "run 4 of 4") {
		t.Fatalf("no progress on stderr: %q", stderr.String())
	}
}
