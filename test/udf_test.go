package test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	examplesMu sync.Mutex
	examples   = map[string]string{}
)

// example builds the SDK example command name once and returns its path.
func example(t *testing.T, name string) string {
	t.Helper()
	examplesMu.Lock()
	defer examplesMu.Unlock()
	if bin, ok := examples[name]; ok {
		return bin
	}
	bin := filepath.Join(filepath.Dir(vertexBin), name)
	out, err := exec.Command("go", "build", "-o", bin, "../pkg/sdk/examples/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("building example %s: %v\n%s", name, err, out)
	}
	examples[name] = bin
	return bin
}

// udsDir returns a new directory for sockets, short enough for a unix socket path.
func udsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "uds")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// udContainer is the YAML of a container block at the given indent: with a
// command when bin is set, else with an image only (the test runs it).
func udContainer(indent, bin string, env map[string]string) string {
	pad := strings.Repeat(" ", len(indent))
	var b strings.Builder
	fmt.Fprintf(&b, "%scontainer:\n", pad)
	if bin == "" {
		fmt.Fprintf(&b, "%s  image: example:latest\n", pad)
	} else {
		fmt.Fprintf(&b, "%s  command: [%q]\n", pad, bin)
	}
	if len(env) > 0 {
		fmt.Fprintf(&b, "%s  env:\n", pad)
		for _, k := range slices.Sorted(maps.Keys(env)) {
			fmt.Fprintf(&b, "%s    - name: %s\n%s      value: %q\n", pad, k, pad, env[k])
		}
	}
	return b.String()
}

// sinkNumbers counts how often each integer payload reached the log sink; a
// line that is not an integer fails the test.
func sinkNumbers(t *testing.T, lines []string) map[int]int {
	t.Helper()
	seen := map[int]int{}
	for _, l := range lines {
		n, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("sink line %q is not a message of the source", l)
		}
		seen[n]++
	}
	return seen
}

// TestUDFMonoVertex runs a MonoVertex made only of user-defined containers,
// started by vertex run --spawn: a source of 600 numbered messages, a
// transformer that drops every tenth, a map that keys by parity and a sink
// that prints them, throttled at 200 messages a second. The sink gets each
// message the transformer kept exactly once and none it dropped, and no epoch
// grants more than the maximum.
func TestUDFMonoVertex(t *testing.T) {
	t.Parallel()
	const count, dropEvery, maxRate = 600, 10, 200
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: udfs
spec:
  limits:
    readBatchSize: 50
    readTimeout: 200ms
    rateLimit:
      max: `+strconv.Itoa(maxRate)+`
      min: `+strconv.Itoa(maxRate)+`
      rampUpDuration: 0s
  source:
    udsource:
`+udContainer("      ", example(t, "simplesource"), map[string]string{
		"SIMPLESOURCE_COUNT": strconv.Itoa(count), "SIMPLESOURCE_DROP_EVERY": strconv.Itoa(dropEvery)})+`    transformer:
`+udContainer("      ", example(t, "eventtime"), nil)+`  udf:
`+udContainer("    ", example(t, "evenodd"), nil)+`  sink:
    udsink:
`+udContainer("      ", example(t, "logsink"), nil))
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
	p.metricsAddr()
	want := count - count/dropEvery
	p.waitFor(60*time.Second, "every kept message at the sink", func() bool { return len(p.lines) >= want })
	code, _ := p.stop(syscall.SIGTERM, 20*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	seen := sinkNumbers(t, p.stdoutLines())
	for n := range count {
		switch {
		case n%dropEvery == 0 && seen[n] != 0:
			t.Errorf("message %d was to be dropped; the sink got it %d times", n, seen[n])
		case n%dropEvery != 0 && seen[n] != 1:
			t.Errorf("message %d reached the sink %d times; want once", n, seen[n])
		}
	}
	if len(p.stdoutLines()) != want {
		t.Errorf("the sink got %d messages; want %d", len(p.stdoutLines()), want)
	}
	var busy int
	for e, l := range p.epochs(t) {
		if l.Granted > maxRate {
			t.Errorf("epoch %d granted %d; max is %d", e, l.Granted, maxRate)
		}
		if l.Granted > 0 {
			busy++
		}
	}
	if busy < count/maxRate {
		t.Errorf("%d messages went through in %d epochs; at %d a second they need %d", count, busy, maxRate, count/maxRate)
	}
	for _, role := range []string{"udsource", "transformer", "udf", "udsink"} {
		if !strings.Contains(p.stderrText(), `"container":"`+role+`"`) {
			t.Errorf("no log of the %s container being started", role)
		}
	}
}

// waitReady polls /readyz at url, for at most 20s, until it is 200 (ready) or
// not; when not, the body must name what is not ready.
func waitReady(t *testing.T, url string, ready bool, what string) {
	t.Helper()
	var code int
	var body []byte
	for range 200 {
		if code, body = httpGet(t, url); (code == 200) == ready {
			if !ready && !strings.Contains(string(body), what) {
				t.Fatalf("/readyz = %d %q; want it to name %s", code, body, what)
			}
			return
		}
		time.Sleep(100 * time.Millisecond) // real processes, real time
	}
	t.Fatalf("/readyz still %d %q after 20s; want ready=%v", code, body, ready)
}

// TestUDFCrash runs the user-defined containers itself, kills the map with
// SIGKILL while messages flow and starts it again: the vertex reports not
// ready, naming the map, until the map is back; every message of the source
// reaches the sink at least once, and the vertex carries on without a
// restart.
func TestUDFCrash(t *testing.T) {
	t.Parallel()
	const count = 1500
	dir := udsDir(t)
	runUD := func(name, role string, env ...string) *proc {
		cmd := exec.Command(example(t, name))
		cmd.Env = append(os.Environ(), "SLUICE_UDS_DIR="+dir, "NUMAFLOW_UD_CONTAINER_TYPE="+role)
		cmd.Env = append(cmd.Env, env...)
		return startCmd(t, cmd)
	}
	runUD("simplesource", "udsource", "SIMPLESOURCE_COUNT="+strconv.Itoa(count), "SIMPLESOURCE_REDELIVERY_TIMEOUT=1s")
	mapper := runUD("evenodd", "udf")
	sink := runUD("logsink", "udsink")
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: crash
spec:
  limits:
    readBatchSize: 20
    readTimeout: 200ms
    rateLimit:
      max: 300
      min: 300
      rampUpDuration: 0s
  source:
    udsource:
`+udContainer("      ", "", nil)+`  udf:
`+udContainer("    ", "", nil)+`  sink:
    udsink:
`+udContainer("      ", "", nil))
	p := start(t, "run", "-f", cfg, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0")
	readyz := "http://" + p.metricsAddr() + "/readyz"
	sink.waitFor(30*time.Second, "messages at the sink", func() bool { return len(sink.lines) >= count/3 })
	if code, body := httpGet(t, readyz); code != 200 {
		t.Fatalf("/readyz = %d %s before the crash", code, body)
	}
	if err := mapper.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-mapper.done
	killedAt := len(sink.stdoutLines())
	waitReady(t, readyz, false, "mapper-server-info")
	runUD("evenodd", "udf")
	waitReady(t, readyz, true, "")
	sink.waitFor(60*time.Second, "every message at the sink", func() bool {
		seen := map[string]bool{}
		for _, l := range sink.lines {
			seen[l] = true
		}
		return len(seen) >= count
	})
	if killedAt >= count {
		t.Fatalf("the map was killed after the sink had every message (%d)", killedAt)
	}
	seen := sinkNumbers(t, sink.stdoutLines())
	for n := range count {
		if seen[n] == 0 {
			t.Errorf("message %d never reached the sink", n)
		}
	}
	if len(seen) != count {
		t.Errorf("the sink got %d distinct messages; the source has %d", len(seen), count)
	}
	code, _ := p.stop(syscall.SIGTERM, 20*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	t.Logf("killed the map after %d of %d messages; the sink got %d lines for %d messages",
		killedAt, count, len(sink.stdoutLines()), len(seen))
}

// TestUDFBench runs vertex bench --spawn on a MonoVertex whose map is the cat
// example: the containers start once for all runs, every run moves messages
// through the gRPC map, and they are stopped at the end.
func TestUDFBench(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: bench-udf
spec:
  limits:
    rateLimit:
      max: 1000000000
      min: 1000000000
      rampUpDuration: 0s
  source:
    generator:
      rpu: 1000000000000
      duration: 1s
  udf:
`+udContainer("    ", example(t, "cat"), nil)+`  sink:
    blackhole: {}
`)
	cmd := exec.Command(vertexBin, "bench", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--duration", "400ms", "--runs", "2")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	var off, on float64
	if _, err := fmt.Sscanf(stdout.String(), "off: %f msg/s", &off); err != nil || off <= 0 {
		t.Fatalf("bench output:\n%s", stdout.String())
	}
	lines := strings.Split(stdout.String(), "\n")
	if _, err := fmt.Sscanf(lines[1], "on: %f msg/s", &on); err != nil || on <= 0 {
		t.Fatalf("bench output:\n%s", stdout.String())
	}
	t.Logf("through the cat example: %.0f msg/s without the limit, %.0f with", off, on)
}

// TestUDFIncompatibleServer: a server whose info file asks for a newer
// Numaflow is refused at start with exit code 2 and a message naming both
// versions.
func TestUDFIncompatibleServer(t *testing.T) {
	t.Parallel()
	dir := udsDir(t)
	info := `{"protocol":"uds","language":"go","minimum_numaflow_version":"9.0.0-z","version":"v9.9.9","metadata":{"MAP_MODE":"unary-map"}}U+005C__END__`
	if err := os.WriteFile(filepath.Join(dir, "mapper-server-info"), []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: incompatible
spec:
  source:
    generator: {}
  udf:
`+udContainer("    ", "", nil)+`  sink:
    log: {}
`)
	p := start(t, "run", "-f", cfg, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0")
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("vertex still running; stderr:\n%s", p.stderrText())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 2 {
		t.Fatalf("exit code %d, want 2; stderr:\n%s", code, p.stderrText())
	}
	for _, want := range []string{"requires Numaflow 9.0.0 or later", "compatible with Numaflow 1.8"} {
		if !strings.Contains(p.stderrText(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, p.stderrText())
		}
	}
}
