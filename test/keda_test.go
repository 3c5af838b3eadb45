package test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/pkg/apis/proto/externalscaler"
)

// kedaVertexYAML is a MonoVertex that reads a JetStream stream's shared
// consumer at most 100 a second, over a Redis store, scaled between 1 and
// 6 replicas without cool-downs.
func kedaVertexYAML(natsURL, redisAddr string) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: orders
spec:
  scale:
    min: 1
    max: 6
    lookbackSeconds: 6
    scaleUpCooldownSeconds: 0
    scaleDownCooldownSeconds: 0
    replicasPerScale: 6
  limits:
    readBatchSize: 20
    readTimeout: 200ms
    rateLimit:
      max: 100
      min: 100
      rampUpDuration: 0s
      store:
        redisStore:
          mode: single
          url: redis://%s
  source:
    jetstream:
      url: %s
      stream: orders
      consumer: orders-reader
  sink:
    log: {}
`, redisAddr, natsURL)
}

// kedaPipelineYAML is a Pipeline whose source vertex in reads the stream
// as kedaVertexYAML's MonoVertex does, its limit in Redis, and writes to
// the log sink vertex out through JetStream buffers.
func kedaPipelineYAML(natsURL, redisAddr string) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: orders
spec:
  limits:
    readBatchSize: 20
    readTimeout: 200ms
  isb:
    jetstream:
      url: %[2]s
  vertices:
    - name: in
      scale:
        min: 1
        max: 6
        lookbackSeconds: 6
        scaleUpCooldownSeconds: 0
        scaleDownCooldownSeconds: 0
        replicasPerScale: 6
      limits:
        rateLimit:
          max: 100
          min: 100
          rampUpDuration: 0s
          store:
            redisStore:
              mode: single
              url: redis://%[1]s
      source:
        jetstream:
          url: %[2]s
          stream: orders
          consumer: orders-reader
    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: out
`, redisAddr, natsURL)
}

// freeAddrs returns n loopback addresses free now.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

var scalerAddrRE = regexp.MustCompile(`"msg":"serving the external scaler".*"addr":"([^"]+)"`)

func scalerClient(t *testing.T, target string) externalscaler.ExternalScalerClient {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return externalscaler.NewExternalScalerClient(conn)
}

func desired(ctx context.Context, c externalscaler.ExternalScalerClient, vertex string) (int, error) {
	resp, err := c.GetMetrics(ctx, &externalscaler.GetMetricsRequest{MetricName: "s0-sluice-desired-replicas",
		ScaledObjectRef: &externalscaler.ScaledObjectRef{Name: "orders", ScalerMetadata: map[string]string{"vertex": vertex}}})
	if err != nil {
		return 0, err
	}
	return int(resp.MetricValues[0].MetricValue), nil
}

// TestKEDAScalerScalesReplicas runs `vertex scaler` beside the replicas of a
// MonoVertex that reads a JetStream backlog at most 100 a second over
// Redis, each replica told to process 40 a second: the pool keeps
// ceil(100/40) = 3 busy. A harness starts and stops replicas as GetMetrics
// says, once a second, over the unix socket; the count rises from 1 to 3
// for the backlog, never past 3, and falls back to 1 once it is drained.
// TCP answers the same.
func TestKEDAScalerScalesReplicas(t *testing.T) {
	t.Parallel()
	runKEDAScaled(t, kedaVertexYAML, "orders", nil)
}

// TestKEDAScalerScalesPipelineVertex is TestKEDAScalerScalesReplicas for
// the source vertex in of a pipeline, whose replicas write to the vertex
// out through JetStream buffers.
func TestKEDAScalerScalesPipelineVertex(t *testing.T) {
	t.Parallel()
	runKEDAScaled(t, kedaPipelineYAML, "in", []string{"--vertex", "in"})
}

// runKEDAScaled runs the scaled replicas of vertex of the file yaml makes
// (run with runArgs; a pipeline's other vertices, one replica each) as
// TestKEDAScalerScalesReplicas says.
func runKEDAScaled(t *testing.T, yaml func(natsURL, redisAddr string) string, vertex string, runArgs []string) {
	const n, slots = 1500, 5
	nats := natstest.Start(t, natstest.Options{})
	rdb := redistest.Start(t, redistest.Options{})
	js, err := jetstream.New(nats.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "orders", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "orders", jetstream.ConsumerConfig{Durable: "orders-reader",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, yaml(nats.URL, rdb.Addr))
	statusFlag, rate := strings.Join(freeAddrs(t, slots), ","), "40"
	addrs := strings.Split(statusFlag, ",")
	if runArgs != nil { // a pipeline: its sink vertex out, and in's replicas named
		out := start(t, "run", "-f", cfg, "--vertex", "out", "--metrics-addr", "127.0.0.1:0")
		out.metricsAddr()
		statusFlag = vertex + "=" + statusFlag
		rate = vertex + "=" + rate
	}
	sock := filepath.Join(t.TempDir(), "scaler.sock")
	scaler := start(t, "scaler", "-f", cfg, "--status", statusFlag, "--replica-rate", rate,
		"--socket", sock, "--addr", "127.0.0.1:0", "--interval", "1s", "--log-level", "debug")
	var tcpAddr string
	scaler.waitFor(20*time.Second, "the scaler's TCP address", func() bool {
		if m := scalerAddrRE.FindStringSubmatch(scaler.stderr.String()); m != nil {
			tcpAddr = m[1]
		}
		return tcpAddr != ""
	})
	unix, tcp := scalerClient(t, "unix://"+sock), scalerClient(t, tcpAddr)

	replicas := make([]*proc, slots)
	running := func() int {
		c := 0
		for _, p := range replicas {
			if p != nil {
				c++
			}
		}
		return c
	}
	scaleTo := func(want int) {
		for i := range replicas {
			switch {
			case i < want && replicas[i] == nil:
				replicas[i] = start(t, append([]string{"run", "-f", cfg, "--metrics-addr", addrs[i], "--replica", strconv.Itoa(i)}, runArgs...)...)
			case i >= want && replicas[i] != nil:
				if code, _ := replicas[i].stop(syscall.SIGTERM, 15*time.Second); code != 0 {
					t.Fatalf("replica %d exit %d; stderr:\n%s", i, code, replicas[i].stderrText())
				}
				replicas[i] = nil
			}
		}
	}
	scaleTo(1)
	replicas[0].metricsAddr()
	for i := range n {
		if _, err := js.Publish(ctx, "orders.new", []byte("k-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	var history []string
	most, drained := 0, false
	began := time.Now()
	for step := 0; step < 60; step++ {
		time.Sleep(time.Second)
		want, err := desired(ctx, unix, vertex)
		if err != nil {
			t.Fatalf("GetMetrics over the unix socket: %v", err)
		}
		if want > 3 {
			t.Errorf("at %v GetMetrics %d: more than the 3 replicas the pool of 100/s keeps busy", time.Since(began).Round(time.Second), want)
		}
		most = max(most, want)
		info, err := js.Consumer(ctx, "orders", "orders-reader")
		if err != nil {
			t.Fatal(err)
		}
		ci, err := info.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pending := ci.NumPending + uint64(ci.NumAckPending)
		history = append(history, fmt.Sprintf("%2ds %d→%d (pending %d)", int(time.Since(began).Seconds()), running(), want, pending))
		drained = drained || pending == 0
		if drained && want == 1 && running() == 1 {
			break
		}
		scaleTo(min(want, slots))
	}
	t.Logf("replicas over time (running→GetMetrics): %s", strings.Join(history, "; "))
	if most < 3 {
		t.Errorf("GetMetrics reached %d; want 3 for a backlog of %d at 100/s", most, n)
	}
	if !drained || running() != 1 {
		t.Errorf("drained %v, %d replicas at the end; want the backlog drained and 1 replica", drained, running())
	}
	if got, err := desired(ctx, tcp, vertex); err != nil || got < 1 {
		t.Errorf("GetMetrics over TCP: %d, %v", got, err)
	}
	active, err := tcp.IsActive(ctx, &externalscaler.ScaledObjectRef{ScalerMetadata: map[string]string{"vertex": vertex}})
	if err != nil {
		t.Errorf("IsActive over TCP: %v", err)
	} else {
		t.Logf("IsActive at the end: %v", active.Result)
	}
	_, err = tcp.IsActive(ctx, &externalscaler.ScaledObjectRef{ScalerMetadata: map[string]string{"vertex": "nope"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("IsActive of an unknown vertex: %v; want InvalidArgument naming it", err)
	}

	// Every replica stopped: IsActive says so, GetMetrics holds the count.
	last, _ := desired(ctx, unix, vertex)
	const warning = "replicas unreachable; holding the last count"
	before := strings.Count(scaler.stderrText(), warning)
	scaleTo(0)
	scaler.waitFor(10*time.Second, "a warning that the replicas are unreachable", func() bool {
		return strings.Count(scaler.stderr.String(), warning) > before
	})
	if _, err := unix.IsActive(ctx, &externalscaler.ScaledObjectRef{ScalerMetadata: map[string]string{"vertex": vertex}}); status.Code(err) != codes.Unavailable {
		t.Errorf("IsActive with every replica stopped: %v; want Unavailable", err)
	}
	if got, err := desired(ctx, unix, vertex); err != nil || got != last {
		t.Errorf("GetMetrics with every replica stopped: %d, %v; want the last count %d", got, err, last)
	}
	if code, _ := scaler.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("scaler exit %d; stderr:\n%s", code, scaler.stderrText())
	}
	if t.Failed() {
		for _, l := range strings.Split(scaler.stderrText(), "\n") {
			if strings.Contains(l, `"decided"`) {
				t.Log(l)
			}
		}
	}
}

// TestKEDAScalerBadInput: a bad flag or file is one error naming it, exit 2.
func TestKEDAScalerBadInput(t *testing.T) {
	t.Parallel()
	mono := writeConfig(t, kedaVertexYAML("nats://127.0.0.1:1", "127.0.0.1:1"))
	pipeline := "../config/examples/pipeline.yaml"
	badScale := writeConfig(t, strings.Replace(kedaVertexYAML("nats://127.0.0.1:1", "127.0.0.1:1"), "lookbackSeconds: 6", "lookbackSeconds: 0", 1))
	sock := filepath.Join(t.TempDir(), "s.sock")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"--status", "127.0.0.1:1", "--socket", sock}, "-f is required"},
		{"no listener", []string{"-f", mono, "--status", "127.0.0.1:1"}, "--addr or --socket is required"},
		{"no status", []string{"-f", mono, "--socket", sock}, "--status is required"},
		{"unknown vertex", []string{"-f", pipeline, "--status", "nope=127.0.0.1:1", "--socket", sock}, `"nope" is not a vertex of the file (vertices: in, even, out)`},
		{"pipeline needs a vertex", []string{"-f", pipeline, "--status", "127.0.0.1:1", "--socket", sock}, "needs VERTEX= for a pipeline"},
		{"bad address", []string{"-f", mono, "--status", "localhost", "--socket", sock}, `"localhost" is not HOST:PORT`},
		{"bad rate", []string{"-f", mono, "--status", "127.0.0.1:1", "--replica-rate", "-3", "--socket", sock}, `--replica-rate ("-3")`},
		{"bad interval", []string{"-f", mono, "--status", "127.0.0.1:1", "--interval", "0s", "--socket", sock}, "--interval (0s)"},
		{"bad scale", []string{"-f", badScale, "--status", "127.0.0.1:1", "--socket", sock}, "spec.scale.lookbackSeconds (0)"},
		{"missing file", []string{"-f", "/nonexistent.yaml", "--status", "127.0.0.1:1", "--socket", sock}, "/nonexistent.yaml"},
		{"bad socket", []string{"-f", mono, "--status", "127.0.0.1:1", "--socket", "/nonexistent/dir/s.sock"}, "--socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(vertexBin, append([]string{"scaler"}, tc.args...)...)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), tc.want) {
				t.Fatalf("exit %d, output %q; want exit 2 naming %q", code, out, tc.want)
			}
			if strings.Count(strings.TrimSpace(string(out)), "\n") > 2 {
				t.Errorf("more than one error: %q", out)
			}
		})
	}
}
