package test

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
)

// TestNackedMessagesComeBackOnce runs a user-defined source, a map that nacks
// every message the first time it sees it and a sink that nacks every odd
// message the first time, all as processes: each nacked message goes back to
// the source and comes round again, so every message reaches the sink exactly
// once; the nack counter counts each nack, the source's acks each message
// once, and no epoch grants more than the limit.
func TestNackedMessagesComeBackOnce(t *testing.T) {
	t.Parallel()
	const count, maxRate = 200, 400
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: nacks
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
`+udContainer("      ", example(t, "simplesource"), map[string]string{"SIMPLESOURCE_COUNT": strconv.Itoa(count)})+`  udf:
`+udContainer("    ", example(t, "nackmap"), nil)+`  sink:
    udsink:
`+udContainer("      ", example(t, "nacksink"), nil))
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
	addr := p.metricsAddr()
	p.waitFor(60*time.Second, "every message at the sink", func() bool { return len(p.lines) >= count })
	// The last batch's ack follows its write: wait for it before reading the
	// counters.
	runtest.WaitFor(t, "every message acked", func() bool {
		return metricValues(t, addr, "sluice_forward_ack_total")["nacks"] >= count
	}, runtest.Within(10*time.Second), runtest.Every(50*time.Millisecond))
	nacked := metricValues(t, addr, "sluice_forward_nack_total")["nacks"]
	acked := metricValues(t, addr, "sluice_forward_ack_total")["nacks"]
	read := metricValues(t, addr, "sluice_forward_read_total")["nacks"]
	code, _ := p.stop(syscall.SIGTERM, 20*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	seen := sinkNumbers(t, p.stdoutLines())
	for n := range count {
		if seen[n] != 1 {
			t.Errorf("message %d reached the sink %d times; want once", n, seen[n])
		}
	}
	if len(p.stdoutLines()) != count {
		t.Errorf("the sink got %d messages; want %d", len(p.stdoutLines()), count)
	}
	// The map nacks each message once, the sink each odd one once more.
	if want := float64(count + count/2); nacked != want || read != float64(count)+want {
		t.Errorf("nacked %v and read %v; want %v and %v", nacked, read, want, float64(count)+want)
	}
	if acked != count {
		t.Errorf("acked %v; want each of the %d messages once", acked, count)
	}
	for e, l := range p.epochs(t) {
		if l.Granted > maxRate {
			t.Errorf("epoch %d granted %d; max is %d", e, l.Granted, maxRate)
		}
	}
}

// TestNackedMessagesComeBackOnceInAPipeline runs the same functions as
// vertices of a pipeline in one process: the map's nacks go back to the
// in-memory buffer it reads, the sink's to the buffer the sink vertex reads,
// and every message reaches the sink exactly once.
func TestNackedMessagesComeBackOnceInAPipeline(t *testing.T) {
	t.Parallel()
	const count = 300
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: nacks
spec:
  limits:
    readBatchSize: 50
    readTimeout: 200ms
  vertices:
    - name: in
      source:
        udsource:
`+udContainer("          ", example(t, "simplesource"), map[string]string{"SIMPLESOURCE_COUNT": strconv.Itoa(count)})+`    - name: map
      udf:
`+udContainer("        ", example(t, "nackmap"), nil)+`    - name: out
      sink:
        udsink:
`+udContainer("          ", example(t, "nacksink"), nil)+`  edges:
    - from: in
      to: map
    - from: map
      to: out
`)
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0")
	addr := p.metricsAddr()
	p.waitFor(60*time.Second, "every message at the sink", func() bool { return len(p.lines) >= count })
	runtest.WaitFor(t, "every message acked", func() bool {
		return metricValues(t, addr, "sluice_forward_ack_total")["out"] >= count
	}, runtest.Within(10*time.Second), runtest.Every(50*time.Millisecond))
	nacked := metricValues(t, addr, "sluice_forward_nack_total")
	code, _ := p.stop(syscall.SIGTERM, 30*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	seen := sinkNumbers(t, p.stdoutLines())
	for n := range count {
		if seen[n] != 1 {
			t.Errorf("message %d reached the sink %d times; want once", n, seen[n])
		}
	}
	if len(p.stdoutLines()) != count {
		t.Errorf("the sink got %d messages; want %d", len(p.stdoutLines()), count)
	}
	if nacked["map"] != count || nacked["out"] != count/2 {
		t.Errorf("nacks per vertex %v; want map %d, out %d", nacked, count, count/2)
	}
}

// TestNumaflowProcessorNacks runs the numa container of a MonoVertex pod
// (`numaflow-rs processor`) with a user-defined source, a map that nacks
// every message the first time and a sink that nacks every odd one the first
// time, each a process of its own as the pod's sidecars are: every message
// reaches the sink once, and monovtx_nack_total{mvtx_name,mvtx_replica},
// Numaflow's per-message nack counter, is exactly the number of nacks (each
// message once at the map, each odd one once more at the sink), as is
// sluice_forward_nack_total; monovtx_ack_total counts each message once.
func TestNumaflowProcessorNacks(t *testing.T) {
	t.Parallel()
	const (
		name    = "nf-nacks"
		replica = 2
		count   = 200
	)
	dir := udsDir(t)
	sidecars := map[string]*proc{}
	for ctr, ex := range map[string]string{"udsource": "simplesource", "udf": "nackmap", "udsink": "nacksink"} {
		cmd := exec.Command(example(t, ex))
		cmd.Env = append(os.Environ(), "SLUICE_UDS_DIR="+dir, "SIMPLESOURCE_COUNT="+strconv.Itoa(count),
			"NUMAFLOW_UD_CONTAINER_TYPE="+ctr, "NUMAFLOW_REPLICA="+strconv.Itoa(replica))
		sidecars[ctr] = startCmd(t, cmd)
	}
	sink := sidecars["udsink"]
	object := `{"metadata":{"name":"` + name + `","namespace":"default","creationTimestamp":null},` +
		`"spec":{"replicas":0,"source":{"udsource":{"container":{"image":"sluice-example-simplesource:dev","resources":{}}}},` +
		`"udf":{"container":{"image":"sluice-example-nackmap:dev","resources":{}},"groupBy":null},` +
		`"sink":{"udsink":{"container":{"image":"sluice-example-nacksink:dev","resources":{}}},"retryStrategy":{}},` +
		`"limits":{"readBatchSize":50,"readTimeout":"200ms","concurrency":50},"scale":{"lookbackSeconds":120},"updateStrategy":{},"lifecycle":{}},` +
		`"status":{"replicas":0,"desiredReplicas":0,"lastUpdated":null,"lastScaledAt":null}}`
	p := startCmd(t, processorCmd(t, name, replica, object, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0",
		"--runtime-addr", "", "--runtime-errors-dir", t.TempDir()))
	base := "https://" + p.metricsAddr()
	sink.waitFor(60*time.Second, "every message at the sink", func() bool { return len(sink.lines) >= count })
	// The last batch's ack follows its write.
	runtest.WaitFor(t, "every message acked", func() bool {
		return monovtx(t, base, "monovtx_ack_total", name, replica) >= count
	}, runtest.Within(10*time.Second), runtest.Every(50*time.Millisecond))
	nacked := monovtx(t, base, "monovtx_nack_total", name, replica)
	acked := monovtx(t, base, "monovtx_ack_total", name, replica)
	_, body := getTLS(t, base+"/metrics")
	sample := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `\{[^}]*\} (\S+)$`).FindStringSubmatch(string(body))
		if m == nil {
			return ""
		}
		return m[1]
	}
	sluiceNacked := sample("sluice_forward_nack_total")
	// monovtx_nack_time: a sample for each batch that had nacks, as sluice's
	// histogram, in microseconds.
	nackCalls, sluiceCalls := sample("monovtx_nack_time_count"), sample("sluice_forward_nack_duration_seconds_count")
	if n, _ := strconv.Atoi(nackCalls); n < 1 || n > count+count/2 || nackCalls != sluiceCalls {
		t.Errorf("monovtx_nack_time_count %q, sluice_forward_nack_duration_seconds_count %q; want the same, between 1 and the nacks",
			nackCalls, sluiceCalls)
	}
	bucket := `(?m)^monovtx_nack_time_bucket\{mvtx_name="` + name + `",mvtx_replica="` + strconv.Itoa(replica) + `",le="100"\} `
	if !regexp.MustCompile(bucket).MatchString(string(body)) {
		t.Errorf("monovtx_nack_time has no bucket of 100µs with Numaflow's labels:\n%s", regexp.MustCompile(`(?m)^monovtx_nack_time.*$`).FindAllString(string(body), -1))
	}
	if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	seen := sinkNumbers(t, sink.stdoutLines())
	for n := range count {
		if seen[n] != 1 {
			t.Errorf("message %d reached the sink %d times; want once", n, seen[n])
		}
	}
	if want := float64(count + count/2); nacked != want {
		t.Errorf("monovtx_nack_total = %v; want %v, one for each nack", nacked, want)
	}
	if sluiceNacked != strconv.FormatFloat(nacked, 'g', -1, 64) {
		t.Errorf("sluice_forward_nack_total %v; want %v, as monovtx_nack_total", sluiceNacked, nacked)
	}
	if acked != count {
		t.Errorf("monovtx_ack_total = %v; want each of the %d messages once", acked, count)
	}
}
