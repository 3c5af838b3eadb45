package vertex_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udstest"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// get fetches url and returns its status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// oldestSeconds is the value of sluice_udf_call_oldest_seconds{function}
// in reg, and whether it has the series.
func oldestSeconds(t *testing.T, reg *prometheus.Registry, function string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_udf_call_oldest_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "function" && l.GetValue() == function {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// A MonoVertex whose map server takes batches and never answers, with a
// udfTimeout of 600ms (real time, bounded): the stuck call is warned about
// at 300ms, shows on /status and in sluice_udf_call_oldest_seconds, and is
// abandoned at its deadline; the forwarder retries the batch, /readyz says
// not ready, naming the map and that it is stuck, until the server answers
// again. Then every message reaches the sink once and is acked only after
// that: none is lost, none written twice.
func TestStuckMapIsBoundedAndVisible(t *testing.T) {
	dir := udstest.SocketDir(t, "ud")
	const count = 30
	src := &counting{count: count, acked: map[int]bool{}}
	dst := &collector{}
	h := udstest.NewHang()
	serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
	serve(t, sinker.NewServer(dst, sinker.WithSocketDir(dir)).Start)
	serve(t, mapper.NewServer(mapper.MapperFunc(func(ctx context.Context, _ []string, d mapper.Datum) mapper.Messages {
		h.Wait(ctx)
		return mapper.Messages{mapper.NewMessage(d.Value())}
	}), mapper.WithSocketDir(dir)).Start)
	t.Cleanup(h.Release)

	logger, logs := udstest.ObservedLogger()
	reg := prometheus.NewRegistry()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "stuck", `  limits:
    readBatchSize: 10
    readTimeout: 100ms
    udfTimeout: 600ms
  source:
    udsource:
      container: {image: source}
  udf:
    container: {image: map}
  sink:
    udsink:
      container: {image: sink}
`)), vertex.WithSocketDir(dir), vertex.WithLogger(logger), vertex.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := observe.Listen("127.0.0.1:0", observe.Handlers{Gatherer: reg, Ready: v.Ready, Status: func() any { return v.Status() }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopServing := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	t.Cleanup(func() { stopServing(); <-served })
	base := "http://" + srv.Addr().String()

	started := time.Now()
	r := runtest.Start(t, v)
	runtest.WaitFor(t, "the first warning", func() bool {
		return logs.FilterMessage(udstest.OutstandingWarning).FilterField(zap.String("function", "map")).Len() > 0
	})
	firstWarn := time.Since(started)
	w := logs.FilterMessage(udstest.OutstandingWarning).All()[0].ContextMap()
	if w["call"] != "MapFn" || w["messages"] != int64(10) || w["deadline"] != 600*time.Millisecond {
		t.Errorf("the warning says %v; want MapFn, 10 messages, deadline 600ms", w)
	}
	// While the call is outstanding, it is on /status and in the metric.
	var st vertex.Status
	runtest.WaitFor(t, "/status to show the map's call", func() bool {
		_, body := get(t, base+"/status")
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		return len(st.UDFCalls) > 0 && st.UDFCalls[0].Function == "map"
	})
	if c := st.UDFCalls[0]; c.Call != "MapFn" || c.Messages != 10 || c.AgeSeconds <= 0 || c.AgeSeconds > c.DeadlineSeconds+0.1 || c.DeadlineSeconds != 0.6 {
		t.Errorf("/status udfCalls = %+v", st.UDFCalls)
	}
	runtest.WaitFor(t, "the metric to show the map's call", func() bool {
		age, ok := oldestSeconds(t, reg, "map")
		return ok && age > 0 && age <= 0.6
	})

	runtest.WaitFor(t, "the call abandoned", func() bool {
		return logs.FilterMessage("a call to the UDF server got no answer within its deadline: abandoned, to be retried").Len() > 0
	})
	abandonedAt := time.Since(started)
	var body string
	runtest.WaitFor(t, "/readyz to say the map is stuck", func() bool {
		var code int
		code, body = get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable
	})
	if !strings.Contains(body, serverinfo.MapInfoFile) || !strings.Contains(body, "stuck") ||
		!strings.Contains(body, "map call MapFn of 10 messages: no answer within the deadline of 600ms (limits.udfTimeout)") {
		t.Errorf("/readyz says %q; want it to name the map's info file, the call and the deadline", body)
	}
	if _, body := get(t, base+"/status"); !strings.Contains(body, `"notReady"`) || !strings.Contains(body, "stuck") {
		t.Errorf("/status says %s; want notReady to say the map is stuck", body)
	}
	runtest.WaitFor(t, "the forwarder to retry the batch", func() bool {
		return logs.FilterMessage("function failed; retrying").Len() > 0
	})
	if n := src.ackedCount(); n != 0 || len(dst.values()) != 0 {
		t.Fatalf("%d acked and %d at the sink while the map never answered", n, len(dst.values()))
	}

	h.Answer() // the server answers the batch retried
	runtest.WaitFor(t, "every message acked", func() bool { return src.ackedCount() == count })
	runtest.WaitFor(t, "/readyz to be ready", func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK })
	if age, ok := oldestSeconds(t, reg, "map"); !ok || age != 0 {
		t.Errorf("sluice_udf_call_oldest_seconds{function=map} = %v (present %v); want 0 once answered", age, ok)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	got := dst.values()
	slices.SortFunc(got, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	want := make([]string, count)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the sink got %v; want each of the %d messages once", got, count)
	}
	t.Logf("first warning after %v, call abandoned after %v (udfTimeout 600ms)", firstWarn.Round(time.Millisecond), abandonedAt.Round(time.Millisecond))
}
