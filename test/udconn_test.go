package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// errorsByStage returns sluice_forward_error_total of the read and ack stages.
func errorsByStage(t *testing.T, addr string) (read, ack float64) {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	re := regexp.MustCompile(`(?m)^sluice_forward_error_total\{[^}]*stage="(read|ack)"[^}]*\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "read" {
			read += v
		} else {
			ack += v
		}
	}
	return read, ack
}

// payloads returns the payloads of log-sink lines.
func payloads(t *testing.T, lines []string) []string {
	t.Helper()
	out := make([]string, len(lines))
	for i, l := range lines {
		payload, _, ok := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
		if !ok || !strings.HasPrefix(l, "Payload - ") {
			t.Fatalf("not a log-sink line: %q", l)
		}
		out[i] = payload
	}
	return out
}

// udSource starts sluice's simplesource example serving in dir, count
// messages from start.
func udSource(t *testing.T, dir string, start, count int) *proc {
	cmd := exec.Command(example(t, "simplesource"))
	cmd.Env = append(os.Environ(), "SLUICE_UDS_DIR="+dir, "NUMAFLOW_UD_CONTAINER_TYPE=udsource",
		"SIMPLESOURCE_COUNT="+strconv.Itoa(count), "SIMPLESOURCE_START="+strconv.Itoa(start))
	return startCmd(t, cmd)
}

// stopClean sends SIGTERM, expects exit code 0, and fails if the vertex logged
// a reconnection or a cancelled context while it stopped.
func stopClean(t *testing.T, p *proc) {
	t.Helper()
	before := len(p.stderrText())
	if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	after := p.stderrText()[before:]
	for _, bad := range []string{"reconnecting", "context canceled", "failed"} {
		if strings.Contains(after, bad) {
			t.Errorf("the vertex logged %q while it stopped:\n%s", bad, after)
		}
	}
}

// TestUDSourceRestart kills the user-defined source, started by the test
// rather than spawned, with SIGKILL while messages flow, and starts it again
// from the first message the sink does not have (the example keeps its state
// in memory): within a second of the restart, read and ack errors stop; every
// message reaches the sink once and is acked once; the source's pending count
// is exported; and SIGTERM then stops the vertex without logging a
// reconnection or a cancelled context.
func TestUDSourceRestart(t *testing.T) {
	t.Parallel()
	const count = 1200
	dir := udsDir(t)
	first := udSource(t, dir, 0, count)
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: restart
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
`+udContainer("      ", "", nil)+`  sink:
    log: {}
`)
	p := start(t, "run", "-f", cfg, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0")
	addr := p.metricsAddr()
	p.waitFor(30*time.Second, "messages at the sink", func() bool { return len(p.lines) >= count/3 })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done

	// Once the batch in flight is written, nothing moves until the source is
	// back: the sink has 0..killedAt-1, each once.
	killedAt := -1
	for range 100 {
		read := metricValues(t, addr, "sluice_forward_read_total")["restart"]
		written := metricValues(t, addr, "sluice_forward_write_total")["restart"]
		if n := len(p.stdoutLines()); float64(n) == read && read == written {
			if n == killedAt {
				break
			}
			killedAt = n
		} else {
			killedAt = -1
		}
		time.Sleep(200 * time.Millisecond) // real processes, real time
	}
	seen := sinkNumbers(t, payloads(t, p.stdoutLines()))
	if killedAt < 0 || killedAt >= count || len(seen) != killedAt {
		t.Fatalf("after the kill the sink has %d lines, %d distinct; want it settled on 0..n-1 with n < %d", killedAt, len(seen), count)
	}
	for n := range killedAt {
		if seen[n] != 1 {
			t.Fatalf("before the restart, message %d reached the sink %d times", n, seen[n])
		}
	}
	readErrs, ackErrs := errorsByStage(t, addr)

	second := udSource(t, dir, killedAt, count)
	restarted := time.Now()
	p.waitFor(10*time.Second, "a message after the restart", func() bool { return len(p.lines) > killedAt })
	resumed := time.Since(restarted)
	time.Sleep(time.Until(restarted.Add(time.Second))) // errors may still come in the first second
	readAt1s, ackAt1s := errorsByStage(t, addr)
	p.waitFor(60*time.Second, "every message at the sink", func() bool { return len(p.lines) >= count })
	for i := 0; metricValues(t, addr, "sluice_source_pending")["restart"] != 0; i++ {
		if i == 100 {
			t.Fatalf("sluice_source_pending = %v 20s after the last message; want 0", metricValues(t, addr, "sluice_source_pending"))
		}
		time.Sleep(200 * time.Millisecond) // the vertex asks every 5s
	}
	if readEnd, ackEnd := errorsByStage(t, addr); readEnd != readAt1s || ackEnd != ackAt1s {
		t.Errorf("errors went on after the restart: read %v then %v, ack %v then %v", readAt1s, readEnd, ackAt1s, ackEnd)
	}
	seen = sinkNumbers(t, payloads(t, p.stdoutLines()))
	for n := range count {
		if seen[n] != 1 {
			t.Errorf("message %d reached the sink %d times; want once", n, seen[n])
		}
	}
	if n := len(p.stdoutLines()); n != count {
		t.Errorf("%d lines at the sink; want %d", n, count)
	}
	if acked := metricValues(t, addr, "sluice_forward_ack_total")["restart"]; acked != count {
		t.Errorf("%v messages acked; want each of the %d once", acked, count)
	}
	if read := metricValues(t, addr, "sluice_forward_read_total")["restart"]; read != count {
		t.Errorf("%v messages read; want %d", read, count)
	}
	stopClean(t, p)
	if code, _ := second.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Errorf("the source exited %d; stderr:\n%s", code, second.stderrText())
	}
	if s := second.stderrText(); s != "" {
		t.Errorf("the source logged:\n%s", s)
	}
	t.Logf("killed the source after %d of %d messages; errors before the restart: read %v, ack %v; 1s after it and at the end: read %v, ack %v; "+
		"the first message after the restart reached the sink %v after it", killedAt, count, readErrs, ackErrs, readAt1s, ackAt1s, resumed.Round(time.Millisecond))
}

// TestUDSocketDir: the vertex creates a missing socket directory, logs which
// server-info file it waits for, and /readyz and /status name that file until
// the server is up. A pipeline in one process whose only vertex with
// user-defined containers is its source gives that vertex the base directory
// itself, where its spawned server listens.
func TestUDSocketDir(t *testing.T) {
	t.Parallel()
	const count = 50
	t.Run("missing directory", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(udsDir(t), "not", "yet")
		cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: waits
spec:
  limits:
    readTimeout: 100ms
  source:
    udsource:
`+udContainer("      ", "", nil)+`  sink:
    log: {}
`)
		p := start(t, "run", "-f", cfg, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0")
		addr := p.metricsAddr()
		info := filepath.Join(dir, "sourcer-server-info")
		p.waitFor(20*time.Second, "the log line naming the info file", func() bool {
			return strings.Contains(p.stderr.String(), `"msg":"waiting for the UDF server's server-info file"`) &&
				strings.Contains(p.stderr.String(), `"file":"`+info+`"`)
		})
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("the socket directory was not created: %v", err)
		}
		waitReady(t, "http://"+addr+"/readyz", false, "waiting for the server-info file "+info)
		if _, body := httpGet(t, "http://"+addr+"/status"); !strings.Contains(string(body), info) {
			t.Errorf("/status does not name %s: %s", info, body)
		}
		src := udSource(t, dir, 0, count)
		waitReady(t, "http://"+addr+"/readyz", true, "")
		p.waitFor(30*time.Second, "every message at the sink", func() bool { return len(p.lines) >= count })
		stopClean(t, p)
		if code, _ := src.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
			t.Errorf("the source exited %d; stderr:\n%s", code, src.stderrText())
		}
		if n := strings.Count(p.stderrText(), "waiting for the UDF server's server-info file"); n != 1 {
			t.Errorf("the wait was logged %d times; want once", n)
		}
	})
	t.Run("one-process pipeline", func(t *testing.T) {
		t.Parallel()
		base := filepath.Join(udsDir(t), "base")
		cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: onedir
spec:
  limits:
    readTimeout: 100ms
  vertices:
    - name: in
      source:
        udsource:
`+udContainer("          ", example(t, "simplesource"), map[string]string{"SIMPLESOURCE_COUNT": strconv.Itoa(count)})+`    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: out
`)
		p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", base, "--metrics-addr", "127.0.0.1:0")
		p.metricsAddr()
		p.waitFor(30*time.Second, "every message at the sink", func() bool { return len(p.lines) >= count })
		if _, err := os.Stat(filepath.Join(base, "sourcer-server-info")); err != nil {
			t.Errorf("the source's server-info file is not in the base directory: %v", err)
		}
		if _, err := os.Stat(filepath.Join(base, "in")); !os.IsNotExist(err) {
			t.Errorf("a directory of the vertex's own: %v", err)
		}
		stopClean(t, p)
	})
}
