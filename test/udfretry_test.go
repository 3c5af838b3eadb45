package test

import (
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// failedByStage returns sluice_forward_udf_failed_total of stage.
func failedByStage(t *testing.T, addr, stage string) float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	re := regexp.MustCompile(`(?m)^sluice_forward_udf_failed_total\{[^}]*stage="` + stage + `"[^}]*\} (\S+)$`)
	var sum float64
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}

// TestUDFRetryStrategy runs simplesource → failmap (which fails each payload
// its first two calls, U+005C__FAIL__) → log, spawned, with the map's
// retryStrategy of steps 1: with onFailure retry, which goes on past the
// steps, each message is called three times and written once (2 failed
// calls each); with onFailure drop each is called twice, failed both times,
// and dropped, never written, yet acked.
func TestUDFRetryStrategy(t *testing.T) {
	t.Parallel()
	const count = 200
	for _, tt := range []struct {
		name, strategy   string
		written, dropped int
		failedPerMessage float64
	}{
		{"retry", "backoff: {interval: 1ms, steps: 1}\n      onFailure: retry", count, 0, 2},
		{"drop", "backoff: {interval: 1ms, steps: 1}\n      onFailure: drop", 0, count, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: retries
spec:
  limits:
    readBatchSize: 20
    readTimeout: 200ms
  source:
    udsource:
`+udContainer("      ", example(t, "simplesource"), map[string]string{"SIMPLESOURCE_COUNT": strconv.Itoa(count)})+`  udf:
`+udContainer("    ", example(t, "failmap"), nil)+`    retryStrategy:
      `+tt.strategy+`
  sink:
    log: {}
`)
			p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0")
			addr := p.metricsAddr()
			var acked float64
			for i := 0; ; i++ {
				if acked = metricValues(t, addr, "sluice_forward_ack_total")["retries"]; acked >= count || i == 300 {
					break
				}
				time.Sleep(100 * time.Millisecond) // real processes, real time
			}
			if acked != count {
				t.Fatalf("%v messages acked after 30s; want %d", acked, count)
			}
			if got, want := failedByStage(t, addr, "map"), tt.failedPerMessage*count; got != want {
				t.Errorf("sluice_forward_udf_failed_total{stage=map} = %v; want %v", got, want)
			}
			if got := metricValues(t, addr, "sluice_forward_drop_total")["retries"]; got != float64(tt.dropped) {
				t.Errorf("sluice_forward_drop_total = %v; want %d", got, tt.dropped)
			}
			if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
			}
			seen := sinkNumbers(t, payloads(t, p.stdoutLines()))
			if len(p.stdoutLines()) != tt.written {
				t.Errorf("%d lines at the sink; want %d", len(p.stdoutLines()), tt.written)
			}
			for n, c := range seen {
				if c != 1 {
					t.Errorf("message %d written %d times; want once", n, c)
				}
			}
		})
	}
}
