package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
)

// evenOddPipeline is the YAML of a pipeline: a simplesource of count numbered
// messages, the evenodd map (its input in two partitions), which tags each by
// parity, and two log sinks, even and odd, on edges with tag conditions. udfLimits is added to the evenodd
// vertex (indented by 6), isb to spec.
func evenOddPipeline(t *testing.T, name string, count int, udfLimits, isb string, sourceEnv map[string]string) string {
	env := map[string]string{"SIMPLESOURCE_COUNT": strconv.Itoa(count)}
	for k, v := range sourceEnv {
		env[k] = v
	}
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: ` + name + `
spec:
  limits:
    readBatchSize: 100
    readTimeout: 200ms
` + isb + `  vertices:
    - name: in
      source:
        udsource:
` + udContainer("          ", example(t, "simplesource"), env) + `    - name: evenodd
      partitions: 2
      udf:
` + udContainer("        ", example(t, "evenodd"), nil) + udfLimits + `    - name: even
      sink:
        log: {}
    - name: odd
      sink:
        log: {}
  edges:
    - from: in
      to: evenodd
    - from: evenodd
      to: even
      conditions:
        tags:
          values: [even-tag]
    - from: evenodd
      to: odd
      conditions:
        tags:
          operator: or
          values: [odd-tag]
`
}

// logValues parses log-sink lines of integer payloads, checking that each
// carries the key of its parity, and counts each value.
func logValues(t *testing.T, lines []string) map[int]int {
	t.Helper()
	seen := map[int]int{}
	for _, l := range lines {
		payload, rest, ok := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
		n, err := strconv.Atoi(payload)
		if !ok || err != nil {
			t.Fatalf("not a log-sink line of a number: %q", l)
		}
		key, _, _ := strings.Cut(rest, " ")
		if want := []string{"even", "odd"}[n%2]; key != want {
			t.Fatalf("message %d has key %q; want %q", n, key, want)
		}
		seen[n]++
	}
	return seen
}

// metricValues returns the values of a counter per vertex label from /metrics.
func metricValues(t testing.TB, addr, name string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	re := regexp.MustCompile(`(?m)^` + name + `\{[^}]*vertex="([^"]+)"[^}]*\} (\S+)$`)
	out := map[string]float64{}
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] += v
	}
	return out
}

// TestPipelineInOneProcess runs the even/odd pipeline, the same YAML as on
// JetStream (whose spec.isb goes unused here), in one process on the memory
// ISB, its user-defined containers spawned: every message reaches the sink of
// its parity exactly once, and SIGTERM stops it cleanly.
func TestPipelineInOneProcess(t *testing.T) {
	t.Parallel()
	const count = 1000
	cfg := writeConfig(t, evenOddPipeline(t, "local", count, "", jetStreamISB("nats://127.0.0.1:9", ""), nil))
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0")
	addr := p.metricsAddr()
	p.waitFor(60*time.Second, "every message at a sink", func() bool { return len(p.lines) >= count })
	written := metricValues(t, addr, "sluice_forward_write_total")
	code, _ := p.stop(syscall.SIGTERM, 30*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	seen := logValues(t, p.stdoutLines())
	for n := range count {
		if seen[n] != 1 {
			t.Errorf("message %d reached a sink %d times; want once", n, seen[n])
		}
	}
	if len(p.stdoutLines()) != count {
		t.Errorf("%d lines at the sinks; want %d", len(p.stdoutLines()), count)
	}
	want := fmt.Sprint(map[string]float64{"in": count, "evenodd": count, "even": count / 2, "odd": count / 2})
	if fmt.Sprint(written) != want {
		t.Errorf("written per vertex = %v; want %v", written, want)
	}
}

// jetStreamISB is the spec.isb block of a pipeline on the given server.
func jetStreamISB(url, extra string) string {
	return "  isb:\n    jetstream:\n      url: " + url + "\n" + extra
}

// vertexProc starts one replica of one vertex of the pipeline in cfg, with its
// own socket directory for its spawned containers.
func vertexProc(t *testing.T, cfg, vertex string, replica int, extra ...string) *proc {
	return vertexProcEnv(t, nil, cfg, vertex, replica, extra...)
}

// vertexProcEnv is vertexProc with env added to the process's environment.
func vertexProcEnv(t *testing.T, env []string, cfg, vertex string, replica int, extra ...string) *proc {
	args := append([]string{"run", "-f", cfg, "--vertex", vertex, "--replica", strconv.Itoa(replica),
		"--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(vertexBin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	p := startCmd(t, cmd)
	p.metricsAddr()
	return p
}

// checkParity checks that a sink got exactly the numbers below count of one
// parity, each once.
func checkParity(t *testing.T, sink *proc, count, parity int) {
	t.Helper()
	seen := logValues(t, sink.stdoutLines())
	for n := range count {
		want := 0
		if n%2 == parity {
			want = 1
		}
		if seen[n] != want {
			t.Errorf("sink of parity %d got message %d %d times; want %d", parity, n, seen[n], want)
		}
	}
	if len(seen) != count/2 {
		t.Errorf("sink of parity %d got %d distinct messages; want %d", parity, len(seen), count/2)
	}
}

// TestPipelineOnJetStream runs the even/odd pipeline with every vertex its own
// process on JetStream, the evenodd vertex in three replicas sharing 300
// messages a second through Redis, with messages alone and in frames of 16:
// each sink gets exactly the messages of its parity, once; no epoch grants
// more than 300 over the three replicas. With NUMAFLOW_READ_AHEAD=true, the
// same.
func TestPipelineOnJetStream(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		frame     int
		readAhead bool
	}{{1, false}, {16, false}, {1, true}} {
		t.Run(fmt.Sprintf("frameSize=%d,readAhead=%t", tt.frame, tt.readAhead), func(t *testing.T) {
			t.Parallel()
			testPipelineOnJetStream(t, tt.frame, tt.readAhead)
		})
	}
}

func testPipelineOnJetStream(t *testing.T, frame int, readAhead bool) {
	const count, maxRate = 1500, 300
	nats := natstest.Start(t, natstest.Options{})
	redis := redistest.Start(t, redistest.Options{})
	limits := fmt.Sprintf(`      limits:
        rateLimit:
          max: %d
          min: %d
          rampUpDuration: 0s
          store:
            redisStore:
              mode: single
              url: redis://%s
`, maxRate, maxRate, redis.Addr)
	cfg := writeConfig(t, evenOddPipeline(t, "js", count, limits, jetStreamISB(nats.URL, fmt.Sprintf("      frameSize: %d\n", frame)), nil))
	env := []string{"NUMAFLOW_READ_AHEAD=" + strconv.FormatBool(readAhead)}
	even, odd := vertexProcEnv(t, env, cfg, "even", 0), vertexProcEnv(t, env, cfg, "odd", 0)
	var udfs []*proc
	for i := range 3 {
		udfs = append(udfs, vertexProcEnv(t, env, cfg, "evenodd", i, "--log-level", "debug"))
	}
	in := vertexProcEnv(t, env, cfg, "in", 0)
	even.waitFor(60*time.Second, "the even messages", func() bool { return len(even.lines) >= count/2 })
	odd.waitFor(30*time.Second, "the odd messages", func() bool { return len(odd.lines) >= count/2 })
	for _, p := range append([]*proc{in, even, odd}, udfs...) {
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	checkParity(t, even, count, 0)
	checkParity(t, odd, count, 1)
	granted, _ := sumEpochs(t, udfs)
	var total int64
	for e, n := range granted {
		if n > maxRate {
			t.Errorf("epoch %d: the evenodd replicas were granted %d; max is %d", e, n, maxRate)
		}
		total += n
	}
	if total < count {
		t.Errorf("the evenodd replicas were granted %d in all; they read %d", total, count)
	}
	t.Logf("%d epochs; granted per epoch: %v", len(granted), granted)
}

// TestPipelineUDFKilled kills one of two evenodd replicas with SIGKILL while
// messages flow, and starts it again: the messages it had read and not acked
// are delivered again after ackWait, so every message reaches its sink. With
// messages alone, what the replica had written already is kept out of the
// sinks' buffers by JetStream's duplicate window, so each sink gets its
// messages exactly once; in frames of 16, messages regrouped after the crash
// are not caught, so they arrive at least once.
func TestPipelineUDFKilled(t *testing.T) {
	t.Parallel()
	for _, frame := range []int{1, 16} {
		t.Run(fmt.Sprintf("frameSize=%d", frame), func(t *testing.T) {
			t.Parallel()
			testPipelineUDFKilled(t, frame)
		})
	}
}

func testPipelineUDFKilled(t *testing.T, frame int) {
	const count = 2000
	nats := natstest.Start(t, natstest.Options{})
	limits := `      limits:
        rateLimit:
          max: 400
          min: 400
          rampUpDuration: 0s
`
	isb := jetStreamISB(nats.URL, fmt.Sprintf("      ackWait: 2s\n      frameSize: %d\n", frame))
	cfg := writeConfig(t, evenOddPipeline(t, "kill", count, limits, isb, nil))
	even, odd := vertexProc(t, cfg, "even", 0), vertexProc(t, cfg, "odd", 0)
	victim := vertexProc(t, cfg, "evenodd", 0)
	other := vertexProc(t, cfg, "evenodd", 1)
	in := vertexProc(t, cfg, "in", 0)
	lines := func() int { return len(even.stdoutLines()) + len(odd.stdoutLines()) }
	distinct := func(p *proc) int { return len(logValues(t, p.stdoutLines())) }
	even.waitFor(30*time.Second, "messages at the sinks", func() bool { return len(even.lines) >= count/8 })
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-victim.done: // its spawned map died with it, closing their stdout
	case <-time.After(10 * time.Second):
		t.Fatal("the killed replica's output is still open 10s later: its spawned map outlived it")
	}
	killedAt := lines()
	victim = vertexProc(t, cfg, "evenodd", 0)
	deadline := time.Now().Add(60 * time.Second)
	for distinct(even) < count/2 || distinct(odd) < count/2 {
		if time.Now().After(deadline) {
			t.Fatalf("after 60s the sinks have %d and %d distinct messages; want %d each", distinct(even), distinct(odd), count/2)
		}
		time.Sleep(100 * time.Millisecond) // real processes, real time
	}
	for _, p := range []*proc{in, victim, other, even, odd} {
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	if killedAt >= count {
		t.Fatalf("the replica was killed after every message had arrived (%d)", killedAt)
	}
	if frame == 1 {
		checkParity(t, even, count, 0)
		checkParity(t, odd, count, 1)
	}
	t.Logf("killed one evenodd replica after %d of %d messages had reached the sinks; %d lines at the sinks in all",
		killedAt, count, lines())
}

// TestPipelineBackPressure runs a pipeline whose sink vertex takes 100
// messages a second, below what comes in: the buffer before it never holds
// more than its bufferMaxLength, the vertex writing to it pauses (throttled:
// downstream_full) while it is full and goes on as it drains, and every
// message arrives once.
func TestPipelineBackPressure(t *testing.T) {
	t.Parallel()
	const count, maxLen = 600, 100
	nats := natstest.Start(t, natstest.Options{})
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: bp
spec:
  limits:
    readBatchSize: 50
    readTimeout: 200ms
`+jetStreamISB(nats.URL, "")+`  vertices:
    - name: in
      source:
        udsource:
`+udContainer("          ", example(t, "simplesource"), map[string]string{"SIMPLESOURCE_COUNT": strconv.Itoa(count)})+`    - name: cat
      udf:
        builtin:
          name: cat
      limits:
        bufferMaxLength: `+strconv.Itoa(maxLen)+`
        bufferUsageLimit: 50
    - name: out
      sink:
        log: {}
      limits:
        rateLimit:
          max: 100
          min: 100
          rampUpDuration: 0s
  edges:
    - from: in
      to: cat
    - from: cat
      to: out
`)
	out, cat := vertexProc(t, cfg, "out", 0), vertexProc(t, cfg, "cat", 0)
	catAddr := addrRE.FindStringSubmatch(cat.stderrText())[1]
	in := vertexProc(t, cfg, "in", 0)
	conn, err := jetstream.Connect(testContext(t), jetstream.Config{URL: nats.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var most uint64
	var fullSeen bool
	deadline := time.Now().Add(60 * time.Second)
	for len(out.stdoutLines()) < count {
		if time.Now().After(deadline) {
			t.Fatalf("after 60s the sink has %d of %d messages", len(out.stdoutLines()), count)
		}
		if bi, err := conn.BufferInfo(testContext(t), "bp-out-0"); err == nil {
			most = max(most, bi.Messages)
		}
		if _, body := httpGet(t, "http://"+catAddr+"/status"); strings.Contains(string(body), "downstream_full") {
			fullSeen = true
		}
		time.Sleep(20 * time.Millisecond) // polls real processes
	}
	for _, p := range []*proc{in, cat, out} {
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	if most > maxLen {
		t.Errorf("the sink's buffer held %d messages; bufferMaxLength is %d", most, maxLen)
	}
	if !fullSeen {
		t.Error("the cat vertex never reported downstream_full while its output buffer was full")
	}
	seen := map[string]int{}
	for _, l := range out.stdoutLines() {
		payload, _, _ := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
		seen[payload]++
	}
	for n := range count {
		if seen[strconv.Itoa(n)] != 1 {
			t.Errorf("message %d arrived %d times; want once", n, seen[strconv.Itoa(n)])
		}
	}
	t.Logf("the sink's buffer held at most %d messages (bufferMaxLength %d, usage limit 50%%)", most, maxLen)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestPipelineUsageErrors checks that bad pipeline command lines exit 2 with
// one message naming the flag, field or value, and that vertex isb creates,
// describes and deletes a pipeline's buffers.
func TestPipelineUsageErrors(t *testing.T) {
	t.Parallel()
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(vertexBin, args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	nats := natstest.Start(t, natstest.Options{User: "sluice", Password: "right"})
	pipeline := func(isb string) string {
		return writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: cli
spec:
`+isb+`  vertices:
    - name: in
      source:
        generator: {}
    - name: mid
      udf:
        builtin:
          name: cat
      partitions: 2
    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: mid
    - from: mid
      to: out
`)
	}
	noISB := pipeline("")
	user, password := writeSecret(t, "sluice"), writeSecret(t, "right")
	good := pipeline(jetStreamISB(nats.URL, "      user: {file: "+user+"}\n      password: {file: "+password+"}\n"))
	wrong := pipeline(jetStreamISB(nats.URL, "      user: {file: "+user+"}\n      password: {file: "+writeSecret(t, "wrong")+"}\n"))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown vertex", []string{"run", "-f", good, "--vertex", "nope"}, `--vertex "nope": no such vertex in pipeline "cli" (vertices: in, mid, out)`},
		{"no isb", []string{"run", "-f", noISB, "--vertex", "mid"}, "spec.isb.jetstream: required"},
		{"vertex of a MonoVertex", []string{"run", "-f", "../config/examples/monovertex.yaml", "--vertex", "x"}, `--vertex "x"`},
		{"bad isb", []string{"run", "-f", good, "--isb", "kafka"}, `--isb "kafka": want memory or jetstream`},
		{"wrong password", []string{"run", "-f", wrong, "--vertex", "mid", "--metrics-addr", "127.0.0.1:0"}, "spec.isb.jetstream"},
		{"isb of a MonoVertex", []string{"isb", "create", "-f", "../config/examples/monovertex.yaml"}, "is a MonoVertex, which has no buffers"},
		{"isb without subcommand", []string{"isb"}, "a subcommand is required"},
		{"isb wrong password", []string{"isb", "create", "-f", wrong}, "spec.isb.jetstream"},
	}
	for _, tt := range tests {
		code, _, errOut := run(tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tt.name, code, errOut, tt.want)
		}
		if strings.Contains(errOut, "right") || strings.Contains(errOut, "wrong\n") {
			t.Errorf("%s: stderr shows a password: %q", tt.name, errOut)
		}
	}
	code, out, errOut := run("isb", "create", "-f", good)
	if code != 0 || out != "created cli-mid-0 (bufferMaxLength 30000, bufferUsageLimit 80%)\ncreated cli-mid-1 (bufferMaxLength 30000, bufferUsageLimit 80%)\ncreated cli-out-0 (bufferMaxLength 30000, bufferUsageLimit 80%)\n" {
		t.Fatalf("isb create: exit %d, %q, %q", code, out, errOut)
	}
	if code, out, _ := run("isb", "info", "-f", good); code != 0 || !strings.Contains(out, "cli-mid-1: 0 messages (0 unread, 0 read and not acked) of at most 30000") {
		t.Fatalf("isb info: exit %d, %q", code, out)
	}
	if code, out, _ := run("isb", "delete", "-f", good); code != 0 || strings.Count(out, "deleted ") != 3 {
		t.Fatalf("isb delete: exit %d, %q", code, out)
	}
	if code, _, errOut := run("isb", "info", "-f", good); code != 1 || !strings.Contains(errOut, "cli-mid-0") {
		t.Fatalf("isb info after delete: exit %d, %q; want 1, naming the missing buffer", code, errOut)
	}
}
