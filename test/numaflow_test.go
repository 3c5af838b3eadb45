package test

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// insecureClient is how Numaflow's probes and MonoVertex daemon reach port
// 2469: HTTPS without verifying the self-signed certificate.
var insecureClient = &http.Client{Timeout: 5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// numaflowRS links the vertex binary under the name Numaflow's pods run:
// numaflow-rs.
func numaflowRS(t *testing.T) string {
	t.Helper()
	link := filepath.Join(t.TempDir(), "numaflow-rs")
	if err := os.Symlink(vertexBin, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// getTLS GETs url with insecureClient.
func getTLS(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := insecureClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// monovtx scrapes /metrics the way Numaflow's MonoVertex daemon does (its
// text parser) and returns the one sample of family name: an untyped value for
// a counter, a gauge's for monovtx_pending_raw. The sample must carry the
// labels mvtx_name and mvtx_replica.
func monovtx(t *testing.T, base, name, mvtx string, replica int) float64 {
	t.Helper()
	resp, err := insecureClient.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	mf, ok := mfs[name]
	if !ok || len(mf.GetMetric()) != 1 {
		t.Fatalf("/metrics has %v for %s; want one sample", mf, name)
	}
	m := mf.GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["mvtx_name"] != mvtx || labels["mvtx_replica"] != strconv.Itoa(replica) {
		t.Fatalf("%s labels %v; want mvtx_name=%q, mvtx_replica=%q", name, labels, mvtx, strconv.Itoa(replica))
	}
	if mf.GetType() == dto.MetricType_GAUGE {
		return m.GetGauge().GetValue()
	}
	if mf.GetType() != dto.MetricType_UNTYPED {
		t.Fatalf("%s is %v; Numaflow's daemon reads it as untyped", name, mf.GetType())
	}
	return m.GetUntyped().GetValue()
}

// TestNumaflowProcessor runs the binary as Numaflow's pods run their numa
// container, `numaflow-rs processor`, with the env they get: a MonoVertex
// serialised as Numaflow does (a user-defined source started by the test, a
// rate limit of 50 a second, a log sink), replica 1. Port 2469's routes answer
// over HTTPS; monovtx_read_total rises by exactly the limit each second, never
// more, as Numaflow's daemon reads it; monovtx_pending_raw is the source's
// pending count; SIGTERM exits 0.
func TestNumaflowProcessor(t *testing.T) {
	t.Parallel()
	const (
		name     = "nf-e2e"
		replica  = 1
		maxRate  = 50
		count    = 100000
		measured = 5 // seconds
	)
	dir := udsDir(t)
	src := exec.Command(example(t, "simplesource"))
	src.Env = append(os.Environ(), "SLUICE_UDS_DIR="+dir, "SIMPLESOURCE_COUNT="+strconv.Itoa(count),
		"NUMAFLOW_UD_CONTAINER_TYPE=udsource", "NUMAFLOW_REPLICA="+strconv.Itoa(replica))
	startCmd(t, src)

	object := fmt.Sprintf(`{"metadata":{"name":%q,"namespace":"default","creationTimestamp":null},`+
		`"spec":{"replicas":0,"source":{"udsource":{"container":{"image":"sluice-example-simplesource:dev","resources":{}}}},`+
		`"sink":{"log":{},"retryStrategy":{}},`+
		`"limits":{"readBatchSize":500,"readTimeout":"1s","rateLimit":{"max":%d,"min":%d,"rampUpDuration":"0s","store":{"inMemoryStore":{}}},"concurrency":500},`+
		`"scale":{"lookbackSeconds":120},"updateStrategy":{},"lifecycle":{}},`+
		`"status":{"replicas":0,"desiredReplicas":0,"lastUpdated":null,"lastScaledAt":null}}`, name, maxRate, maxRate)
	p := startCmd(t, processorCmd(t, name, replica, object, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0",
		"--runtime-addr", "127.0.0.1:0", "--runtime-errors-dir", t.TempDir(), "--log-level", "debug"))
	base := "https://" + p.metricsAddr()

	// Probes.
	var code int
	var body []byte
	for range 600 {
		if code, body = getTLS(t, base+"/readyz"); code == 200 {
			break
		}
		time.Sleep(100 * time.Millisecond) // a real process: poll, at most 60s
	}
	if code != 200 {
		t.Fatalf("/readyz = %d %q after 60s; want 200", code, body)
	}
	for _, path := range []string{"/livez", "/sidecar-livez", "/healthz", "/status"} {
		if code, body := getTLS(t, base+path); code != 200 {
			t.Errorf("%s = %d %q; want 200", path, code, body)
		}
	}
	// The status page and its JSON, on the HTTPS port too.
	if code, body := getTLS(t, base+"/"); code != 200 || !strings.Contains(string(body), "status/live") {
		t.Errorf("/ = %d, %d bytes; want 200 and the status page", code, len(body))
	}
	if code, body := getTLS(t, base+"/status/live"); code != 200 || !strings.Contains(string(body), `"vertices"`) {
		t.Errorf("/status/live = %d %.200q; want 200 and the vertex", code, body)
	}
	if code, body := httpGet(t, "http://"+base[len("https://"):]+"/livez"); code != http.StatusBadRequest {
		t.Errorf("plain HTTP /livez = %d %q; want 400: the port speaks HTTPS only", code, body)
	}
	// Port 2470, as the numa container of Numaflow's main-branch pods serves it.
	checkRuntimeErrors(t, "https://"+p.logAddr(runtimeAddrRE), "[]")

	// The rate. Epochs are whole seconds of the clock, and each second's share
	// is read at its start: reading the counter in the middle of each second
	// gives exactly one second's reads between two readings.
	read := func() float64 { return monovtx(t, base, "monovtx_read_total", name, replica) }
	for i := 0; read() == 0; i++ {
		if i == 300 {
			t.Fatal("monovtx_read_total still 0 after 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A reading that a busy machine delays by more than a few hundred
	// milliseconds (the request, or the process answering it) may see the
	// next second's reads too: the rise up to it and from it is not one
	// second's, and only the epochs' own counts check those seconds.
	next := time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)
	time.Sleep(time.Until(next))
	samples := []float64{read()}
	onTime := []bool{time.Since(next) < 400*time.Millisecond}
	for range measured {
		next = next.Add(time.Second)
		time.Sleep(time.Until(next))
		samples = append(samples, read())
		onTime = append(onTime, time.Since(next) < 400*time.Millisecond)
	}
	var perSecond []float64
	for i := 1; i < len(samples); i++ {
		perSecond = append(perSecond, samples[i]-samples[i-1])
	}
	rate := (samples[len(samples)-1] - samples[0]) / measured
	t.Logf("monovtx_read_total rose by %v in successive seconds: %.1f a second over %ds (max %d); readings on time %v",
		perSecond, rate, measured, maxRate, onTime)
	for i, n := range perSecond {
		if n > maxRate && onTime[i] && onTime[i+1] {
			t.Errorf("second %d: monovtx_read_total rose by %v; max is %d", i+1, n, maxRate)
		}
	}
	if rate < 0.9*maxRate {
		t.Errorf("monovtx_read_total rose %.1f a second; want about %d", rate, maxRate)
	}
	for e, l := range p.epochs(t) {
		if l.Granted > maxRate {
			t.Errorf("epoch %d granted %d; max is %d", e, l.Granted, maxRate)
		}
	}

	// The other counters and the pending gauge.
	readNow := read()
	if w := monovtx(t, base, "monovtx_sink_write_total", name, replica); w > readNow || w < samples[len(samples)-1] {
		t.Errorf("monovtx_sink_write_total %v; read %v", w, readNow)
	}
	if a := monovtx(t, base, "monovtx_ack_total", name, replica); a > readNow || a < samples[len(samples)-2] {
		t.Errorf("monovtx_ack_total %v; read %v", a, readNow)
	}
	if d := monovtx(t, base, "monovtx_dropped_total", name, replica); d != 0 {
		t.Errorf("monovtx_dropped_total %v; want 0", d)
	}
	// The source was last asked up to 5s ago: it had at most count and at
	// least count - readNow messages pending.
	if pending := monovtx(t, base, "monovtx_pending_raw", name, replica); pending > count || pending < count-readNow {
		t.Errorf("monovtx_pending_raw %v; want between %v and %d", pending, count-readNow, count)
	}

	code, took := p.stop(syscall.SIGTERM, 15*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM; stderr:\n%s", code, p.stderrText())
	}
	t.Logf("exited 0 %v after SIGTERM", took.Round(time.Millisecond))
	if n := len(p.stdoutLines()); float64(n) < samples[len(samples)-1] {
		t.Errorf("the log sink printed %d messages; %v were read before the last sample", n, samples[len(samples)-1])
	}
}

// processorCmd is `numaflow-rs processor args...` with the env Numaflow's
// controller gives the numa container of replica replica of the MonoVertex
// name, object its JSON.
func processorCmd(t *testing.T, name string, replica int, object string, args ...string) *exec.Cmd {
	cmd := exec.Command(numaflowRS(t), append([]string{"processor"}, args...)...)
	cmd.Env = append(os.Environ(),
		"NUMAFLOW_MONO_VERTEX_OBJECT="+base64.StdEncoding.EncodeToString([]byte(object)),
		"NUMAFLOW_READ_AHEAD=false", "NUMAFLOW_NAMESPACE=default", "NUMAFLOW_POD="+name+"-mv-"+strconv.Itoa(replica)+"-abcde",
		"NUMAFLOW_REPLICA="+strconv.Itoa(replica), "NUMAFLOW_MONO_VERTEX_NAME="+name,
		"NUMAFLOW_CPU_LIMIT=2", "NUMAFLOW_CPU_REQUEST=0", "NUMAFLOW_MEMORY_LIMIT=0", "NUMAFLOW_MEMORY_REQUEST=0")
	return cmd
}

// runtimeAddrRE finds the address of the runtime errors in a log.
var runtimeAddrRE = regexp.MustCompile(`"msg":"serving runtime errors".*"addr":"([^"]+)"`)

// logAddr waits for the address re finds in the process's log. (waitFor's
// conditions run with p.mu held: they read p.stderr.)
func (p *proc) logAddr(re *regexp.Regexp) string {
	var addr string
	p.waitFor(20*time.Second, "the address in the log", func() bool {
		if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

// checkRuntimeErrors checks GET base/runtime/errors over HTTPS, whose data
// must be the JSON data, and HEAD, with which Numaflow's MonoVertex daemon
// tells whether a pod is active.
func checkRuntimeErrors(t *testing.T, base, data string) {
	t.Helper()
	code, body := getTLS(t, base+"/runtime/errors")
	if want := `{"errorMessage":null,"data":` + data + `}`; code != 200 || strings.TrimSpace(string(body)) != want {
		t.Errorf("GET /runtime/errors = %d %s; want 200 %s", code, body, want)
	}
	req, _ := http.NewRequest(http.MethodHead, base+"/runtime/errors", nil)
	resp, err := insecureClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("HEAD /runtime/errors = %d; want 200", resp.StatusCode)
	}
	if code, _ := httpGet(t, "http://"+strings.TrimPrefix(base, "https://")+"/runtime/errors"); code != http.StatusBadRequest {
		t.Errorf("plain HTTP /runtime/errors = %d; want 400: the port speaks HTTPS only", code)
	}
}

// TestNumaflowProcessorBesideMonitor runs the numa and monitor containers of
// a Numaflow v1.8 pod, `numaflow-rs monitor` first and `numaflow-rs
// processor` after it, on one runtime address and directory: the processor
// leaves the port to the monitor and says so, and runs; the monitor serves
// what the processor records. The other way round, a monitor started while
// the processor holds the port waits for it, and takes it once the
// processor is gone. Both exit 0 on SIGTERM.
func TestNumaflowProcessorBesideMonitor(t *testing.T) {
	t.Parallel()
	const name = "nf-beside"
	errs := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runtimeAddr := ln.Addr().String()
	ln.Close()
	object := `{"metadata":{"name":"` + name + `","namespace":"default","creationTimestamp":null},` +
		`"spec":{"replicas":0,"source":{"generator":{"rpu":10,"duration":"1s","msgSize":8}},"sink":{"log":{},"retryStrategy":{}},` +
		`"limits":{"readBatchSize":500,"readTimeout":"1s"},"scale":{"lookbackSeconds":120},"updateStrategy":{},"lifecycle":{}},` +
		`"status":{"replicas":0,"desiredReplicas":0,"lastUpdated":null,"lastScaledAt":null}}`
	processor := func() *proc {
		return startCmd(t, processorCmd(t, name, 0, object, "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0",
			"--runtime-addr", runtimeAddr, "--runtime-errors-dir", errs))
	}
	monitor := func() *proc {
		return startCmd(t, exec.Command(numaflowRS(t), "monitor", "--addr", runtimeAddr, "--dir", errs))
	}
	stop := func(p *proc, what string) {
		t.Helper()
		if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM; stderr:\n%s", what, code, p.stderrText())
		}
	}
	// An error of a user-defined container, as the processor records it.
	if err := os.MkdirAll(filepath.Join(errs, "udf"), 0o777); err != nil {
		t.Fatal(err)
	}
	entry := `{"container":"udf","timestamp":1700000000,"code":"Internal error","message":"UDF_EXECUTION_ERROR(udf): boom","details":""}`
	if err := os.WriteFile(filepath.Join(errs, "udf", "1700000000-numa.json"), []byte(entry), 0o666); err != nil {
		t.Fatal(err)
	}

	// v1.8: the monitor first.
	mon := monitor()
	if got := mon.logAddr(runtimeAddrRE); got != runtimeAddr {
		t.Fatalf("the monitor serves %s; want %s", got, runtimeAddr)
	}
	numa := processor()
	base := "https://" + numa.metricsAddr()
	numa.waitFor(20*time.Second, "the processor leaving the port to the monitor", func() bool {
		return strings.Contains(numa.stderr.String(), "the pod's monitor sidecar serves them")
	})
	for i := 0; ; i++ {
		if code, _ := getTLS(t, base+"/readyz"); code == 200 {
			break
		}
		if i == 300 {
			t.Fatal("/readyz not 200 after 30s")
		}
		time.Sleep(100 * time.Millisecond) // a real process: poll, at most 30s
	}
	checkRuntimeErrors(t, "https://"+runtimeAddr, "["+entry+"]")
	stop(numa, "the processor")
	stop(mon, "the monitor")

	// The processor first: the monitor waits, and takes the port when the
	// processor is gone.
	numa = processor()
	if got := numa.logAddr(runtimeAddrRE); got != runtimeAddr {
		t.Fatalf("the processor serves %s; want %s", got, runtimeAddr)
	}
	checkRuntimeErrors(t, "https://"+runtimeAddr, "["+entry+"]")
	mon = monitor()
	mon.waitFor(20*time.Second, "the monitor waiting for the port", func() bool {
		return strings.Contains(mon.stderr.String(), "the numa container serves them")
	})
	stop(numa, "the processor")
	if got := mon.logAddr(runtimeAddrRE); got != runtimeAddr {
		t.Fatalf("the monitor serves %s; want %s", got, runtimeAddr)
	}
	checkRuntimeErrors(t, "https://"+runtimeAddr, "["+entry+"]")
	stop(mon, "the monitor")
}
