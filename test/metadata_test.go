package test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// checkMetadata checks that the log sink printed every message below count
// once, each with the user metadata its source attached.
func checkMetadata(t *testing.T, lines []string, count int) {
	t.Helper()
	seen := map[string]int{}
	for _, l := range lines {
		value, md, _ := strings.Cut(l, "\t")
		if md != "simplesource/seq="+value {
			t.Errorf("sink line %q; want the value, a tab and simplesource/seq=<value>", l)
		}
		seen[value]++
	}
	for n := range count {
		if c := seen[strconv.Itoa(n)]; c != 1 {
			t.Errorf("message %d reached the sink %d times; want once", n, c)
		}
	}
}

// TestUserMetadataReachesTheSink runs a source that attaches user metadata to
// each message, a map that passes it on and a sink that prints it, all as
// processes: the sink sees the source's metadata on every message.
func TestUserMetadataReachesTheSink(t *testing.T) {
	t.Parallel()
	const count = 100
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: metadata
spec:
  limits:
    readBatchSize: 20
    readTimeout: 100ms
  source:
    udsource:
`+udContainer("      ", example(t, "simplesource"), map[string]string{
		"SIMPLESOURCE_COUNT": strconv.Itoa(count), "SIMPLESOURCE_METADATA": "1"})+`  udf:
`+udContainer("    ", example(t, "cat"), nil)+`  sink:
    udsink:
`+udContainer("      ", example(t, "logsink"), map[string]string{"LOGSINK_METADATA": "1"}))
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0")
	p.waitFor(60*time.Second, "every message at the sink", func() bool { return len(p.lines) >= count })
	if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	checkMetadata(t, p.stdoutLines(), count)
}

// TestUserMetadataCrossesJetStream runs the same steps as vertices of a
// pipeline, each its own process, on JetStream: the metadata travels in the
// buffers between them.
func TestUserMetadataCrossesJetStream(t *testing.T) {
	t.Parallel()
	const count = 100
	nats := natstest.Start(t, natstest.Options{})
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: metadata
spec:
  limits:
    readBatchSize: 20
    readTimeout: 100ms
`+jetStreamISB(nats.URL, "")+`  vertices:
    - name: in
      source:
        udsource:
`+udContainer("          ", example(t, "simplesource"), map[string]string{
		"SIMPLESOURCE_COUNT": strconv.Itoa(count), "SIMPLESOURCE_METADATA": "1"})+`    - name: cat
      udf:
`+udContainer("        ", example(t, "cat"), nil)+`    - name: out
      sink:
        udsink:
`+udContainer("          ", example(t, "logsink"), map[string]string{"LOGSINK_METADATA": "1"})+`  edges:
    - from: in
      to: cat
    - from: cat
      to: out
`)
	out, cat, in := vertexProc(t, cfg, "out", 0), vertexProc(t, cfg, "cat", 0), vertexProc(t, cfg, "in", 0)
	out.waitFor(60*time.Second, "every message at the sink", func() bool { return len(out.lines) >= count })
	for _, p := range []*proc{in, cat, out} {
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	checkMetadata(t, out.stdoutLines(), count)
}
