package test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time (user and system) the process pid has used,
// from /proc/<pid>/stat.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: count from after it.
	i := strings.LastIndexByte(string(b), ')')
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	// fields[0] is the state, field 3 of the file: utime and stime are 14 and 15.
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return time.Duration(utime+stime) * time.Second / time.Duration(clockTicks(t))
}

// clockTicks is the unit of the times in /proc/<pid>/stat, per second.
func clockTicks(t *testing.T) int64 {
	t.Helper()
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100 // USER_HZ on every Linux architecture Go supports
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("getconf CLK_TCK = %q", out)
	}
	return n
}

// TestDrySourceIsNotSpunOn runs a user-defined source that answers an empty
// read at once (simplesource with SIMPLESOURCE_READ_WAIT=0s), through vertex
// run --spawn with a rate limit, to the log sink. Once its messages are out
// and the source is dry, the vertex costs less than 5% of a core, and the
// granted-token counter stays at one token per message read.
func TestDrySourceIsNotSpunOn(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	t.Parallel()
	const count = 200
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: dry
spec:
  limits:
    readBatchSize: 50
    rateLimit:
      max: 1000
      min: 1000
      rampUpDuration: 0s
  source:
    udsource:
`+udContainer("      ", example(t, "simplesource"), map[string]string{
		"SIMPLESOURCE_COUNT": strconv.Itoa(count), "SIMPLESOURCE_READ_WAIT": "0s"})+`  sink:
    log: {}
`)
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0")
	addr := p.metricsAddr()
	p.waitFor(60*time.Second, "every message at the sink", func() bool { return len(p.lines) >= count })
	// Let the pauses between empty reads grow to their cap (127ms in all).
	time.Sleep(500 * time.Millisecond)

	const dry = 3 * time.Second
	pid := p.cmd.Process.Pid
	granted := metricValues(t, addr, "sluice_ratelimit_granted_total")["dry"]
	read := metricValues(t, addr, "sluice_forward_read_total")["dry"]
	cpu0, t0 := cpuTime(t, pid), time.Now()
	time.Sleep(dry) // real processes, real time: dryness is measured over it
	cpu, elapsed := cpuTime(t, pid)-cpu0, time.Since(t0)
	grantedAfter := metricValues(t, addr, "sluice_ratelimit_granted_total")["dry"]
	share := float64(cpu) / float64(elapsed)
	t.Logf("dry for %v: the vertex used %v of CPU, %.2f%% of a core", elapsed.Round(time.Millisecond), cpu, 100*share)

	if share >= 0.05 {
		t.Errorf("the vertex used %.1f%% of a core while its source was dry; want under 5%%", 100*share)
	}
	if read != count || granted != count || grantedAfter != granted {
		t.Errorf("read %v, granted %v, then %v after %v of dryness; want %d, %d and no change", read, granted, grantedAfter, dry, count, count)
	}
	code, _ := p.stop(syscall.SIGTERM, 20*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	if seen := logSinkNumbers(t, p.stdoutLines()); len(seen) != count {
		t.Errorf("the sink got %d distinct messages; want %d", len(seen), count)
	}
}

// logSinkNumbers parses log-sink lines of integer payloads and counts each value.
func logSinkNumbers(t *testing.T, lines []string) map[int]int {
	t.Helper()
	seen := map[int]int{}
	for _, l := range lines {
		payload, _, ok := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
		n, err := strconv.Atoi(payload)
		if !ok || err != nil {
			t.Fatalf("not a log-sink line of a number: %q", l)
		}
		seen[n]++
	}
	return seen
}
