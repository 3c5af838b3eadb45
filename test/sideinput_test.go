package test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// numaflowGoSrc is $NUMAFLOW_GO_DIR made absolute; the test is skipped
// without it.
func numaflowGoSrc(t *testing.T) string {
	t.Helper()
	src := os.Getenv(envNumaflowGo)
	if src == "" {
		t.Skipf("%s is not set: numaflow-go's side-input examples are not run (set it to a numaflow-go source tree)", envNumaflowGo)
	}
	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// startNumaflowGo runs the pipeline yaml in one process with --spawn and no
// --uds-dir, so that numaflow-go's servers find /var/run/numaflow; it skips
// the test when that directory is not to be had.
func startNumaflowGo(t *testing.T, yaml string, extra ...string) *proc {
	t.Helper()
	p := start(t, append([]string{"run", "-f", writeConfig(t, yaml), "--spawn", "--metrics-addr", "127.0.0.1:0"}, extra...)...)
	numaflowGoStarted(t, p, "numaflow-go's side-input examples")
	return p
}

// countLines is the number of lines holding s.
func countLines(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// sideInputPipeline is in (a generator) | tag (a map container naming the
// side input) | out (log), with the side input's container asked every
// second, on the buffers isb says ("" for memory).
func sideInputPipeline(name, isb, sideInput, sideInputBin, mapBin string, mapEnv map[string]string) string {
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: ` + name + `
spec:
` + isb + `  sideInputs:
    - name: ` + sideInput + `
      container:
        command: [` + strconv.Quote(sideInputBin) + `]
      trigger:
        schedule: "* * * * * *"
  vertices:
    - name: in
      source:
        generator:
          rpu: 20
          duration: 100ms
    - name: tag
      sideInputs: [` + sideInput + `]
      udf:
` + udContainer("        ", mapBin, mapEnv) + `    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: tag
    - from: tag
      to: out
`
}

// TestSideInputsInOneProcess runs the SDK's ticker side input (a counter)
// and its sitag map, which appends the side input's value to each payload, in
// one process with --spawn: every message the sink prints carries a value
// (the map reads nothing before the first), and the values grow as the
// ticker is asked again each second.
func TestSideInputsInOneProcess(t *testing.T) {
	t.Parallel()
	siDir := filepath.Join(t.TempDir(), "side-inputs")
	yaml := sideInputPipeline("si-one", "", "ticker", example(t, "ticker"), example(t, "sitag"), nil)
	p := start(t, "run", "-f", writeConfig(t, yaml), "--spawn", "--uds-dir", udsDir(t), "--side-inputs-dir", siDir,
		"--metrics-addr", "127.0.0.1:0")
	p.waitFor(30*time.Second, "messages tagged with the ticker's third value", func() bool { return maxTicker(p.lines) >= 3 })
	if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	checkTicked(t, p.stdoutLines(), siDir)
}

// tagged matches a line the sink printed of a message sitag tagged.
var tagged = regexp.MustCompile(`\|ticker=(\d+) Keys`)

// maxTicker is the highest ticker value in lines.
func maxTicker(lines []string) int {
	m := 0
	for _, l := range lines {
		if g := tagged.FindStringSubmatch(l); g != nil {
			n, _ := strconv.Atoi(g[1])
			m = max(m, n)
		}
	}
	return m
}

// checkTicked checks that every message in lines carries a ticker value, and
// that the file in siDir holds the last value printed or a later one.
func checkTicked(t *testing.T, lines []string, siDir string) {
	t.Helper()
	for _, l := range lines {
		if strings.HasPrefix(l, "Payload - ") && !tagged.MatchString(l) {
			t.Fatalf("a message without the side input's value: %q", l)
		}
	}
	b, err := os.ReadFile(filepath.Join(siDir, "ticker"))
	if n, _ := strconv.Atoi(string(b)); err != nil || n < maxTicker(lines) {
		t.Errorf("the side input's file holds %q (%v); want at least %d, the last value printed", b, err, maxTicker(lines))
	}
}

// TestSideInputsAcrossProcesses runs the same pipeline on JetStream, a
// process per vertex and one for the side inputs (--side-inputs-manager):
// the ticker's values reach the tag vertex through the bucket
// si-js-side-inputs, and tag waits for the first before it reads.
func TestSideInputsAcrossProcesses(t *testing.T) {
	t.Parallel()
	nats := natstest.Start(t, natstest.Options{})
	siDir := filepath.Join(t.TempDir(), "side-inputs")
	cfg := writeConfig(t, sideInputPipeline("si-js", jetStreamISB(nats.URL, ""), "ticker", example(t, "ticker"), example(t, "sitag"), nil))
	out := vertexProc(t, cfg, "out", 0)
	tag := vertexProc(t, cfg, "tag", 0, "--side-inputs-dir", siDir)
	in := vertexProc(t, cfg, "in", 0)
	// Until the manager runs, tag says what it waits for, and is not ready.
	tagAddr := "http://" + tag.metricsAddr()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, body := httpGet(t, tagAddr+"/status")
		if strings.Contains(string(body), "waiting for side inputs: ticker") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tag's /status never said it waits for the side input: %s", body)
		}
	}
	if code, body := httpGet(t, tagAddr+"/readyz"); code == 200 {
		t.Fatalf("tag ready without the side input's value: %s", body)
	}
	manager := start(t, "run", "-f", cfg, "--side-inputs-manager", "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0")
	out.waitFor(30*time.Second, "messages tagged with the ticker's third value", func() bool { return maxTicker(out.lines) >= 3 })
	for _, p := range []*proc{in, tag, out, manager} {
		if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	checkTicked(t, out.stdoutLines(), siDir)
}

// TestSideInputNumaflowGo runs numaflow-go's map_sideinput example (a side
// input that alternates "even" and "odd") and its udf (a map that appends
// "-even-data" or "-odd-data" to each payload after the value it last read
// from /var/numaflow/side-inputs/myticker, and drops messages before it has
// one), both unchanged, in one process with --spawn and no --uds-dir, so that
// both serve in /var/run/numaflow, the only directory they know; the side
// input goes to /var/numaflow/side-inputs, the only one the udf reads. Both
// values show in what the sink prints. It is skipped without
// NUMAFLOW_GO_DIR, and when /var/run/numaflow cannot be had.
func TestSideInputNumaflowGo(t *testing.T) {
	src := numaflowGoSrc(t)
	server := numaflowGoExample(t, src, "sideinput/map_sideinput")
	udf := numaflowGoExample(t, src, "sideinput/map_sideinput/udf")
	p := startNumaflowGo(t, sideInputPipeline("si-nfgo", "", "myticker", server, udf, nil))
	p.waitFor(60*time.Second, "messages with -even-data and with -odd-data", func() bool {
		return countLines(p.lines, "-even-data Keys") > 0 && countLines(p.lines, "-odd-data Keys") > 0
	})
	if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	lines := p.stdoutLines()
	t.Logf("%d messages printed: %d with -even-data, %d with -odd-data", countLines(lines, "Payload - "),
		countLines(lines, "-even-data Keys"), countLines(lines, "-odd-data Keys"))
}

// TestReduceSideInputNumaflowGo runs numaflow-go's reduce_sideinput example
// (a side input counting its retrievals) and its udf (a reducer that sums
// each window's integer payloads and, once it has read the side input from
// /var/numaflow/side-inputs/myticker, answers "reduce_sideinput"), both
// unchanged, as the side input and the container of the keyed pipeline's
// count vertex, in one process: the results arrive. Skipped as
// TestSideInputNumaflowGo is.
func TestReduceSideInputNumaflowGo(t *testing.T) {
	src := numaflowGoSrc(t)
	server := numaflowGoExample(t, src, "sideinput/reduce_sideinput")
	udf := numaflowGoExample(t, src, "sideinput/reduce_sideinput/udf")
	spec := jetStreamISB("nats://127.0.0.1:9", "") + "  sideInputs:\n    - name: myticker\n      container:\n        command: [" +
		strconv.Quote(server) + "]\n      trigger:\n        schedule: \"* * * * * *\"\n"
	yaml := reducePipeline("red-si-nfgo", fixedWindow, udf, spec, "      sideInputs: [myticker]\n")
	blob := "          valueBlob: " + base64.StdEncoding.EncodeToString([]byte("7")) + "\n"
	if !strings.Contains(yaml, "keyCount: 3\n") {
		t.Fatal("the keyed pipeline's generator has no keyCount")
	}
	yaml = strings.Replace(yaml, "keyCount: 3\n", "keyCount: 3\n"+blob, 1)
	p := startNumaflowGo(t, yaml, "--state-dir", t.TempDir())
	p.waitFor(60*time.Second, "six reduce_sideinput results", func() bool {
		return countLines(p.lines, "Payload - reduce_sideinput ") >= 6
	})
	if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	t.Logf("%d reduce_sideinput results", countLines(p.stdoutLines(), "Payload - reduce_sideinput "))
}

// numaflowGoSideInputSpec is the spec.sideInputs block of numaflow-go's e2e
// pipelines for its sink and source examples: sideinput_function (which
// answers "e2e-odd" and "e2e-even" in turn) as myticker, asked every second.
func numaflowGoSideInputSpec(bin string) string {
	return `  sideInputs:
    - name: myticker
      container:
        command: [` + strconv.Quote(bin) + `]
      trigger:
        schedule: "* * * * * *"
`
}

// TestSinkSideInputNumaflowGo runs numaflow-go's sink_sideinput example (a
// sink that watches /var/numaflow/side-inputs with fsnotify, keeps the
// content of myticker each time that file is created, and for each message
// adds one to that content's count in redis at redis:6379, logging the
// outcome and acknowledging the message either way) as the udsink of a
// vertex naming myticker, with sideinput_function as myticker, both
// unchanged, in one process, as numaflow-go's e2e pipeline pairs them. The
// sink starts (it exits when the directory is missing), logs the file's
// creation, and handles messages after it; the counts it keeps are in a
// redis this test does not reach, so a line per message says "Set Error"
// unless redis:6379 answers, when it names e2e-even or e2e-odd. Skipped as
// TestSideInputNumaflowGo is. The generator makes five messages a second, so
// that the sink, which opens a redis client for each, keeps up and the
// process drains its buffers in the seconds it is given to stop.
func TestSinkSideInputNumaflowGo(t *testing.T) {
	src := numaflowGoSrc(t)
	server := numaflowGoExample(t, src, "sideinput/sideinput_function")
	sink := numaflowGoExample(t, src, "sideinput/sink_sideinput")
	yaml := `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: si-sink-nfgo
spec:
` + numaflowGoSideInputSpec(server) + `  vertices:
    - name: in
      source:
        generator:
          rpu: 5
          duration: 1s
    - name: out
      sideInputs: [myticker]
      sink:
        udsink:
` + udContainer("          ", sink, map[string]string{"SINK_HASH_KEY": "si-sink-nfgo-out"}) + `  edges:
    - from: in
      to: out
`
	const created = "Side input file has been created: /var/numaflow/side-inputs/myticker"
	handled := regexp.MustCompile(`Set Error - |Incremented by 1 the no\. of occurrences of e2e-(even|odd) under hash key si-sink-nfgo-out`)
	handledAfterCreated := func(s string) int {
		i := strings.Index(s, created)
		if i < 0 {
			return 0
		}
		return len(handled.FindAllStringIndex(s[i:], -1))
	}
	p := startNumaflowGo(t, yaml)
	p.waitFor(60*time.Second, "the side input's file created, then 10 messages handled", func() bool {
		return handledAfterCreated(p.stderr.String()) >= 10
	})
	if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	stderr := p.stderrText()
	t.Logf("myticker's file created %d times; %d messages handled after the first, %d counted in redis",
		strings.Count(stderr, created), handledAfterCreated(stderr), strings.Count(stderr, "Incremented by 1 "))
}

// TestSourceSideInputNumaflowGo runs numaflow-go's
// simple_source_with_sideinput example (a source that watches
// /var/numaflow/side-inputs with fsnotify and emits one message holding the
// content of myticker each time that file is created) as the udsource of a
// vertex naming myticker, with sideinput_function as myticker, both
// unchanged, in one process, as numaflow-go's e2e pipeline pairs them, and a
// log sink: the sink prints e2e-even and e2e-odd, and nothing else. Skipped as
// TestSideInputNumaflowGo is.
func TestSourceSideInputNumaflowGo(t *testing.T) {
	src := numaflowGoSrc(t)
	server := numaflowGoExample(t, src, "sideinput/sideinput_function")
	source := numaflowGoExample(t, src, "sideinput/simple_source_with_sideinput")
	yaml := `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: si-source-nfgo
spec:
` + numaflowGoSideInputSpec(server) + `  vertices:
    - name: in
      sideInputs: [myticker]
      source:
        udsource:
` + udContainer("          ", source, nil) + `    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: out
`
	p := startNumaflowGo(t, yaml)
	p.waitFor(60*time.Second, "two messages of e2e-even and two of e2e-odd", func() bool {
		return countLines(p.lines, "Payload - e2e-even Keys") >= 2 && countLines(p.lines, "Payload - e2e-odd Keys") >= 2
	})
	if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	lines := p.stdoutLines()
	for _, l := range lines {
		if strings.HasPrefix(l, "Payload - ") && !strings.HasPrefix(l, "Payload - e2e-even Keys") && !strings.HasPrefix(l, "Payload - e2e-odd Keys") {
			t.Errorf("the sink printed a message that is not a value of myticker: %q", l)
		}
	}
	t.Logf("%d messages printed: %d e2e-even, %d e2e-odd", countLines(lines, "Payload - "),
		countLines(lines, "Payload - e2e-even Keys"), countLines(lines, "Payload - e2e-odd Keys"))
}
