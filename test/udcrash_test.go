package test

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestUDCrashKeepsVertexAlive runs an unthrottled MonoVertex of user-defined
// containers that the test starts itself (source, transformer, map, sink),
// kills one of the transformer, the map and the sink with SIGKILL once a
// third of the 6000 messages reached the sink, and
// starts it again on the same socket directory: the vertex process stays up
// (the same pid, never exited), /readyz names the server-info file of the
// killed server until it is back, and then every message of the source
// reaches the sink at least once, none is dropped, and the failed calls are
// counted under the function's stage of sluice_forward_error_total. The sink's
// retryStrategy drops what it fails once, and the map's what it fails
// once: a crash uses neither, the messages in flight when the server died
// are retried once it is back. Duplicates (messages the killed sink printed
// but could not answer for, or that came back from the source after its
// redelivery timeout) are counted and logged.
func TestUDCrashKeepsVertexAlive(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		role, example, info, stage string
	}{
		{"transformer", "eventtime", "sourcetransformer-server-info", "transform"},
		{"udf", "evenodd", "mapper-server-info", "map"},
		{"udsink", "logsink", "sinker-server-info", "write"},
	} {
		t.Run(tt.role, func(t *testing.T) {
			t.Parallel()
			testUDCrash(t, tt.role, tt.example, tt.info, tt.stage)
		})
	}
}

// stageErrors returns sluice_forward_error_total of stage.
func stageErrors(t *testing.T, addr, stage string) float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	re := regexp.MustCompile(`(?m)^sluice_forward_error_total\{[^}]*stage="` + stage + `"[^}]*\} (\S+)$`)
	var sum float64
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}

func testUDCrash(t *testing.T, role, example_, info, stage string) {
	const count = 6000 // unthrottled, so that a batch is in flight when the server dies
	dir := udsDir(t)
	runUD := func(name, role string, env ...string) *proc {
		cmd := exec.Command(example(t, name))
		cmd.Env = append(os.Environ(), "SLUICE_UDS_DIR="+dir, "NUMAFLOW_UD_CONTAINER_TYPE="+role)
		cmd.Env = append(cmd.Env, env...)
		return startCmd(t, cmd)
	}
	runUD("simplesource", "udsource", "SIMPLESOURCE_COUNT="+strconv.Itoa(count), "SIMPLESOURCE_REDELIVERY_TIMEOUT=5s")
	procs := map[string]*proc{
		"transformer": runUD("eventtime", "transformer"),
		"udf":         runUD("evenodd", "udf"),
		"udsink":      runUD("logsink", "udsink"),
	}
	sinks := []*proc{procs["udsink"]}
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: crash
spec:
  limits:
    readBatchSize: 20
    readTimeout: 200ms
  source:
    udsource:
`+udContainer("      ", "", nil)+`    transformer:
`+udContainer("      ", "", nil)+`  udf:
`+udContainer("    ", "", nil)+`    retryStrategy:
      backoff: {interval: 1ms, steps: 1}
      onFailure: drop
  sink:
    udsink:
`+udContainer("      ", "", nil)+`    retryStrategy:
      backoff: {interval: 1ms, steps: 1}
      onFailure: drop
`)
	p := start(t, "run", "-f", cfg, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0")
	pid := p.cmd.Process.Pid
	addr := p.metricsAddr()
	readyz := "http://" + addr + "/readyz"
	sinks[0].waitFor(30*time.Second, "messages at the sink", func() bool { return len(sinks[0].lines) >= count/3 })
	if code, body := httpGet(t, readyz); code != 200 {
		t.Fatalf("/readyz = %d %s before the crash", code, body)
	}
	killed := procs[role]
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	killedAt := len(sinks[0].stdoutLines())
	waitReady(t, readyz, false, info)
	select {
	case <-p.done:
		t.Fatalf("the vertex exited (%v) once the %s was killed; stderr:\n%s", p.err, role, p.stderrText())
	default:
	}
	back := runUD(example_, role)
	if role == "udsink" {
		sinks = append(sinks, back)
	}
	waitReady(t, readyz, true, "")
	lines := func() []string {
		var all []string
		for _, s := range sinks {
			all = append(all, s.stdoutLines()...)
		}
		return all
	}
	last := sinks[len(sinks)-1]
	last.waitFor(60*time.Second, "every message at the sink", func() bool {
		seen := map[string]bool{}
		for _, s := range sinks {
			if s != last {
				s.mu.Lock()
			}
			for _, l := range s.lines {
				seen[l] = true
			}
			if s != last {
				s.mu.Unlock()
			}
		}
		return len(seen) >= count
	})
	if killedAt >= count {
		t.Fatalf("the %s was killed after the sink had every message (%d)", role, killedAt)
	}
	seen := sinkNumbers(t, lines())
	dups := 0
	for n := range count {
		switch {
		case seen[n] == 0:
			t.Errorf("message %d never reached the sink", n)
		case seen[n] > 1:
			dups += seen[n] - 1
		}
	}
	if len(seen) != count {
		t.Errorf("the sink got %d distinct messages; the source has %d", len(seen), count)
	}
	errs := stageErrors(t, addr, stage)
	if errs < 1 {
		t.Errorf("sluice_forward_error_total{stage=%q} = %v; want the failed calls counted", stage, errs)
	}
	if d := metricValues(t, addr, "sluice_forward_drop_total")["crash"]; d != 0 {
		t.Errorf("sluice_forward_drop_total = %v; want no message dropped for a crash", d)
	}
	if p.cmd.Process.Pid != pid {
		t.Errorf("vertex pid %d; want %d", p.cmd.Process.Pid, pid)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the vertex (pid %d) is gone: %v", pid, err)
	}
	code, _ := p.stop(syscall.SIGTERM, 20*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	t.Logf("killed the %s after %d of %d messages; %v failed %s calls; the sink got %d lines, %d duplicates; the vertex (pid %d) stayed up",
		role, killedAt, count, errs, stage, len(lines()), dups, pid)
}
