package vertex_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// scrape reads reg's text exposition with Prometheus's text parser, as
// Numaflow's MonoVertex daemon reads a pod's /metrics.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// numaflowValue returns the one sample of the family name, read the way
// Numaflow's daemon reads it: an untyped value for a counter, a gauge's value
// for monovtx_pending_raw. It checks the sample's labels.
func numaflowValue(t *testing.T, mfs map[string]*dto.MetricFamily, name, mvtx, replica string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok || len(mf.GetMetric()) != 1 {
		t.Fatalf("%s: %v; want one sample", name, mf)
	}
	m := mf.GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if len(labels) != 2 || labels["mvtx_name"] != mvtx || labels["mvtx_replica"] != replica {
		t.Fatalf("%s labels %v; want only mvtx_name=%q and mvtx_replica=%q", name, labels, mvtx, replica)
	}
	if name == "monovtx_pending_raw" {
		if mf.GetType() != dto.MetricType_GAUGE {
			t.Fatalf("%s is %v; want a gauge", name, mf.GetType())
		}
		return m.GetGauge().GetValue()
	}
	if mf.GetType() != dto.MetricType_UNTYPED {
		t.Fatalf("%s is %v; want untyped, as the daemon reads it", name, mf.GetType())
	}
	return m.GetUntyped().GetValue()
}

// sluiceValue returns the value of sluice's own counter name.
func sluiceValue(t *testing.T, mfs map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("no %s", name)
	}
	return mf.GetMetric()[0].GetCounter().GetValue()
}

// TestNumaflowMetrics runs a throttled generator → cat → log MonoVertex with
// WithNumaflowMetrics on a manual clock: Numaflow's names carry the same
// numbers as sluice's own, with Numaflow's labels, and the pending count of a
// source that cannot tell is -1.
func TestNumaflowMetrics(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	out, sinkOpt := logSink()
	reg := prometheus.NewRegistry()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "numa", generatorToLog)),
		vertex.WithClock(clk), vertex.WithRegisterer(reg), vertex.WithReplica(2), vertex.WithNumaflowMetrics(), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	for epoch := 1; epoch <= 2; epoch++ {
		runtest.WaitFor(t, "a full epoch", func() bool { return len(out.Lines()) >= 10*epoch && v.Status().Throttled })
		runtest.WaitFor(t, "the epoch's messages acked", func() bool {
			mfs := scrape(t, reg)
			return numaflowValue(t, mfs, "monovtx_ack_total", "numa", "2") == float64(10*epoch)
		})
		mfs := scrape(t, reg)
		for name, sluice := range map[string]string{
			"monovtx_read_total":       "sluice_forward_read_total",
			"monovtx_sink_write_total": "sluice_forward_write_total",
			"monovtx_ack_total":        "sluice_forward_ack_total",
		} {
			got, want := numaflowValue(t, mfs, name, "numa", "2"), sluiceValue(t, mfs, sluice)
			if got != want || got != float64(10*epoch) {
				t.Errorf("epoch %d: %s = %v, %s = %v; want both %d", epoch, name, got, sluice, want, 10*epoch)
			}
		}
		for _, name := range []string{"monovtx_dropped_total", "monovtx_nack_total", "monovtx_sink_write_errors_total",
			"monovtx_fallback_sink_write_total", "monovtx_udf_error_total"} {
			if got := numaflowValue(t, mfs, name, "numa", "2"); got != 0 {
				t.Errorf("%s = %v; want 0", name, got)
			}
		}
		if got := numaflowValue(t, mfs, "monovtx_pending_raw", "numa", "2"); got != -1 {
			t.Errorf("monovtx_pending_raw = %v for a generator; want -1", got)
		}
		if n := numaflowNackTime(t, mfs, "numa", "2").GetSampleCount(); n != 0 {
			t.Errorf("monovtx_nack_time has %d samples; want none", n)
		}
		clk.Advance(time.Second)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// numaflowNackTime returns the one sample of monovtx_nack_time, a histogram
// with Numaflow's labels and its buckets: in microseconds, 10 from 100 to
// 900,000,000 (15 minutes), exponentially spaced.
func numaflowNackTime(t *testing.T, mfs map[string]*dto.MetricFamily, mvtx, replica string) *dto.Histogram {
	t.Helper()
	mf, ok := mfs["monovtx_nack_time"]
	if !ok || len(mf.GetMetric()) != 1 || mf.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("monovtx_nack_time: %v; want one histogram", mf)
	}
	m := mf.GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if len(labels) != 2 || labels["mvtx_name"] != mvtx || labels["mvtx_replica"] != replica {
		t.Fatalf("monovtx_nack_time labels %v; want only mvtx_name=%q and mvtx_replica=%q", labels, mvtx, replica)
	}
	var bounds []float64
	for _, b := range m.GetHistogram().GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			bounds = append(bounds, b.GetUpperBound())
		}
	}
	if len(bounds) != 10 || bounds[0] != 100 || math.Abs(bounds[9]-900e6) > 1 || math.Abs(bounds[1]-100*math.Pow(9e6, 1.0/9)) > 1e-6 {
		t.Fatalf("monovtx_nack_time buckets %v; want Numaflow's, 10 from 100µs to 900s", bounds)
	}
	return m.GetHistogram()
}

// TestNumaflowPending exports a user-defined source's pending count as
// monovtx_pending_raw.
func TestNumaflowPending(t *testing.T) {
	dir := tempDir(t)
	src := &withPending{counting: &counting{count: 50, acked: map[int]bool{}}}
	src.pending.Store(42)
	serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
	reg := prometheus.NewRegistry()
	_, sinkOpt := logSink()
	v, err := vertex.New(udSourceSpec(t, "pending"), vertex.WithSocketDir(dir), vertex.WithRegisterer(reg),
		vertex.WithNumaflowMetrics(), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	if got := numaflowValue(t, scrape(t, reg), "monovtx_pending_raw", "pending", "0"); got != -1 {
		t.Fatalf("monovtx_pending_raw before the first answer = %v; want -1", got)
	}
	r := runtest.Start(t, v)
	runtest.WaitFor(t, "the pending count", func() bool {
		return numaflowValue(t, scrape(t, reg), "monovtx_pending_raw", "pending", "0") == 42
	})
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// Without the option there is no metric of Numaflow's.
func TestNoNumaflowMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "plain", generatorToLog)), vertex.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for name := range scrape(t, reg) {
		if len(name) > 8 && name[:8] == "monovtx_" {
			t.Errorf("%s without WithNumaflowMetrics", name)
		}
	}
}
