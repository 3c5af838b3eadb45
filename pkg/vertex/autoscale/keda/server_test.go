package keda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluiceflow/sluice/pkg/apis/proto/externalscaler"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale/keda"
)

// replica serves a replica's /status and /metrics over real HTTP, with the
// values the test sets.
type replica struct {
	mu      sync.Mutex
	status  vertex.Status
	pending float64
	srv     *httptest.Server
}

func newReplica(t *testing.T) *replica {
	r := &replica{pending: -1}
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		json.NewEncoder(w).Encode(r.status)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		fmt.Fprintf(w, "# TYPE sluice_source_pending gauge\nsluice_source_pending %g\nsluice_source_pending_other 7\n", r.pending)
	})
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *replica) addr() string { return strings.TrimPrefix(r.srv.URL, "http://") }

func (r *replica) set(f func(s *vertex.Status), pending float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.status)
	r.pending = pending
}

// fast is a rule without cool-downs, with a lookback of 1s and replicas of
// 50/s.
func fast() autoscale.Config {
	c := autoscale.DefaultConfig()
	c.Min, c.Max, c.ReplicaRate = 1, 20, 50
	c.Lookback, c.ScaleUpCooldown, c.ScaleDownCooldown = time.Second, 0, 0
	c.ReplicasPerScaleUp, c.ReplicasPerScaleDown = 100, 100
	return c
}

// serve serves srv over real gRPC on network ("unix" or "tcp") and returns
// a client of it.
func serve(t *testing.T, srv *keda.Server, network string) externalscaler.ExternalScalerClient {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "scaler.sock")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	externalscaler.RegisterExternalScalerServer(gs, srv)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	target := ln.Addr().String()
	if network == "unix" {
		target = "unix://" + addr
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return externalscaler.NewExternalScalerClient(conn)
}

func newServer(t *testing.T, clk clock.Clock, vs ...keda.Vertex) *keda.Server {
	t.Helper()
	srv, err := keda.New(keda.Config{Vertices: vs}, keda.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func ref(vertex string) *externalscaler.ScaledObjectRef {
	return &externalscaler.ScaledObjectRef{Name: "so", Namespace: "default", ScalerMetadata: map[string]string{"vertex": vertex}}
}

func metric(t *testing.T, c externalscaler.ExternalScalerClient, vertex string) int64 {
	t.Helper()
	resp, err := c.GetMetrics(context.Background(), &externalscaler.GetMetricsRequest{ScaledObjectRef: ref(vertex), MetricName: keda.MetricName})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.MetricValues) != 1 || resp.MetricValues[0].MetricName != keda.MetricName ||
		float64(resp.MetricValues[0].MetricValue) != resp.MetricValues[0].MetricValueFloat {
		t.Fatalf("GetMetrics %v", resp)
	}
	return resp.MetricValues[0].MetricValue
}

// TestBacklogRaisesTheCountUpToThePool has one replica of a vertex whose
// pool keeps 2 replicas of 50/s busy: as its backlog grows, GetMetrics rises
// to 2 and no further; once the pool grows to 400/s, to 8.
func TestBacklogRaisesTheCountUpToThePool(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			clk := clock.NewManual(time.Unix(1_700_000_000, 0))
			r := newReplica(t)
			srv := newServer(t, clk, keda.Vertex{Name: "in", Scale: fast(), Status: []string{r.addr()}})
			c := serve(t, srv, network)
			spec, err := c.GetMetricSpec(context.Background(), ref("in"))
			if err != nil || len(spec.MetricSpecs) != 1 || spec.MetricSpecs[0].TargetSize != 1 || spec.MetricSpecs[0].TargetSizeFloat != 1 {
				t.Fatalf("GetMetricSpec %v, %v", spec, err)
			}
			var read float64
			step := func(pool float64, pending float64, perSecond float64) int64 {
				read += perSecond
				r.set(func(s *vertex.Status) {
					s.RateLimit, s.Pool, s.Max, s.ReadTotal = true, pool, int64(pool), read
					s.Throttled, s.Reasons = true, []string{"rate_limited"}
				}, pending)
				if _, err := srv.Poll(context.Background(), "in"); err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Second)
				return metric(t, c, "in")
			}
			var counts []int64
			for i := range 6 {
				counts = append(counts, step(100, float64(1000*(i+1)), 100))
			}
			for i, n := range counts {
				if n > 2 {
					t.Fatalf("counts %v: %d at step %d, more than the 2 replicas a pool of 100/s keeps busy", counts, n, i)
				}
			}
			if counts[len(counts)-1] != 2 {
				t.Fatalf("counts %v, want 2 at the end", counts)
			}
			for range 3 {
				counts = append(counts, step(400, 10_000, 400))
			}
			if last := counts[len(counts)-1]; last != 8 {
				t.Fatalf("counts %v, want 8 once the pool is 400/s", counts)
			}
			t.Logf("counts %v", counts)
		})
	}
}

// TestIsActive is true while something is pending or processed, and
// StreamIsActive sends each change.
func TestIsActive(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	r := newReplica(t)
	srv := newServer(t, clk, keda.Vertex{Name: "in", Scale: fast(), Status: []string{r.addr()}})
	c := serve(t, srv, "tcp")
	poll := func(pending float64) {
		r.set(func(*vertex.Status) {}, pending)
		if _, err := srv.Poll(context.Background(), "in"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	poll(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := c.StreamIsActive(ctx, ref("in"))
	if err != nil {
		t.Fatal(err)
	}
	want := func(active bool) {
		t.Helper()
		got, err := c.IsActive(ctx, ref("in"))
		if err != nil || got.Result != active {
			t.Fatalf("IsActive %v, %v; want %v", got, err, active)
		}
		msg, err := stream.Recv()
		if err != nil || msg.Result != active {
			t.Fatalf("StreamIsActive sent %v, %v; want %v", msg, err, active)
		}
	}
	want(false)
	poll(30)
	want(true)
	poll(0)
	want(false)
}

// TestUnreachableHoldsTheCount: once no replica answers, IsActive reports
// it and GetMetrics holds the last count.
func TestUnreachableHoldsTheCount(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	r := newReplica(t)
	srv := newServer(t, clk, keda.Vertex{Name: "in", Scale: fast(), Status: []string{r.addr()}})
	c := serve(t, srv, "unix")
	for i := range 3 {
		r.set(func(s *vertex.Status) { s.RateLimit, s.Pool, s.Max, s.ReadTotal = true, 1000, 1000, float64(100*i) }, 5000)
		if _, err := srv.Poll(context.Background(), "in"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	before := metric(t, c, "in")
	if before < 2 {
		t.Fatalf("count %d before the replica went away; want a backlog's", before)
	}
	r.srv.Close()
	if _, err := srv.Poll(context.Background(), "in"); err == nil {
		t.Fatal("Poll of a closed replica succeeded")
	}
	_, err := c.IsActive(context.Background(), ref("in"))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), r.addr()) {
		t.Fatalf("IsActive: %v; want Unavailable naming %s", err, r.addr())
	}
	if got := metric(t, c, "in"); got != before {
		t.Fatalf("GetMetrics %d while unreachable; want the last count %d", got, before)
	}
	s, err := c.StreamIsActive(context.Background(), ref("in"))
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("StreamIsActive: %v; want Unavailable", err)
	}
}

// TestUnknownVertex: a vertex the scaler does not serve, or none where it
// serves several, is InvalidArgument naming it, from every rpc.
func TestUnknownVertex(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	r := newReplica(t)
	srv := newServer(t, clk, keda.Vertex{Name: "in", Scale: fast(), Status: []string{r.addr()}},
		keda.Vertex{Name: "out", Scale: fast(), Status: []string{r.addr()}})
	c := serve(t, srv, "unix")
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ref  *externalscaler.ScaledObjectRef
		want string
	}{
		{"unknown", ref("nope"), `scalerMetadata.vertex ("nope") is not a vertex this scaler serves (in, out)`},
		{"missing", &externalscaler.ScaledObjectRef{Name: "so"}, "scalerMetadata.vertex is missing; it names one of in, out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := map[string]error{}
			_, errs["IsActive"] = c.IsActive(ctx, tc.ref)
			_, errs["GetMetricSpec"] = c.GetMetricSpec(ctx, tc.ref)
			_, errs["GetMetrics"] = c.GetMetrics(ctx, &externalscaler.GetMetricsRequest{ScaledObjectRef: tc.ref})
			s, err := c.StreamIsActive(ctx, tc.ref)
			if err == nil {
				_, err = s.Recv()
			}
			errs["StreamIsActive"] = err
			for rpc, err := range errs {
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v; want InvalidArgument %q", rpc, err, tc.want)
				}
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	bad := fast()
	bad.TargetProcessing = 0
	for _, tc := range []struct {
		name string
		cfg  keda.Config
		want string
	}{
		{"none", keda.Config{}, "no vertex"},
		{"no address", keda.Config{Vertices: []keda.Vertex{{Name: "a", Scale: fast()}}}, `vertex "a" has no replica address`},
		{"twice", keda.Config{Vertices: []keda.Vertex{{Name: "a", Scale: fast(), Status: []string{"x:1"}}, {Name: "a", Scale: fast(), Status: []string{"x:1"}}}}, `vertex "a" given twice`},
		{"scale", keda.Config{Vertices: []keda.Vertex{{Name: "a", Scale: bad, Status: []string{"x:1"}}}}, "targetProcessingSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := keda.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want %q", err, tc.want)
			}
		})
	}
}
