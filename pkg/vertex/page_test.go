package vertex_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// TestPageView runs generator → cat → log at 10 a second on a manual clock for
// two epochs: PageView lists both, each with its pool, grants, messages
// read and written and its second throttled, and the rate limit's config
// and shares; since keeps the later one.
func TestPageView(t *testing.T) {
	v, r := runTwoEpochs(t, "page", generatorToLog)
	lv := v.PageView(0)
	if len(lv.Vertices) != 1 || lv.Pipeline != "" {
		t.Fatalf("PageView: %d vertices, pipeline %q; want one, none", len(lv.Vertices), lv.Pipeline)
	}
	l := lv.Vertices[0]
	if l.Vertex != "page" || l.Column != 0 || l.Limit == nil {
		t.Fatalf("vertex %q, column %d, limit %v; want page, 0 and a limit", l.Vertex, l.Column, l.Limit)
	}
	if c := l.Limit.Config; c.Max != 10 || c.Min != 10 || c.Mode != "relaxed" || l.Limit.Store != "none" ||
		len(l.Limit.Shares) != 1 || l.Limit.Shares[0] != 10 || !l.Limit.StoreUp || l.Limit.LastChange != nil {
		t.Errorf("limit %+v; want max and min 10, relaxed, no store, one share of 10, no change", *l.Limit)
	}
	if len(l.Epochs) != 2 {
		t.Fatalf("%d epochs, want 2: %+v", len(l.Epochs), l.Epochs)
	}
	// What was read and written is counted when the epoch ends, and the
	// forwarder may already have read the next epoch's share by then: the
	// two epochs hold the 20 messages of their own and at most the next
	// epoch's 10.
	if read, written := l.Epochs[0].Read+l.Epochs[1].Read, l.Epochs[0].Written+l.Epochs[1].Written; read < 20 || read > 30 || written < 20 || written > 30 {
		t.Errorf("read %v and written %v in the two epochs; want 20 to 30 each", read, written)
	}
	for i, e := range l.Epochs {
		if e.Epoch != 1_700_000_000+int64(i) || e.Pool != 10 || e.Granted != 10 {
			t.Errorf("epoch %d: %+v; want pool and grants 10", i, e)
		}
		// The share is gone at once on the manual clock: the rest of the
		// epoch, all of it, waits.
		if got := e.Throttled.RateLimited; got != 1 {
			t.Errorf("epoch %d: %vs rate limited, want 1", i, got)
		}
	}
	if later := v.PageView(1_700_000_000).Vertices[0].Epochs; len(later) != 1 || later[0].Epoch != 1_700_000_001 {
		t.Errorf("since the first epoch: %+v; want the second alone", later)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestPageViewBesideLimits: /status/live has the epochs of the byte limit and
// of each shared limit a vertex joined, beside its message limit's.
func TestPageViewBesideLimits(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		spec := strings.Replace(generatorToLog, "      rampUpDuration: 0s\n", "      rampUpDuration: 0s\n      bytes: {max: 100000, min: 100000}\n", 1)
		v, r := runTwoEpochs(t, "bytes", spec)
		runtest.WaitFor(t, "two epochs of the byte limit", func() bool { return len(v.PageView(0).Vertices[0].Limit.BytesEpochs) >= 2 })
		l := v.PageView(0).Vertices[0].Limit
		if l.GroupEpochs != nil {
			t.Errorf("group epochs %+v without a group", l.GroupEpochs)
		}
		for i, e := range l.BytesEpochs[:2] {
			if e.Epoch != 1_700_000_000+int64(i) || e.Pool != 100000 || e.Share != 100000 || e.Max != 100000 || e.Granted <= 0 {
				t.Errorf("bytes epoch %d: %+v; want a pool of 100000 and bytes granted", i, e)
			}
		}
		if later := v.PageView(1_700_000_000).Vertices[0].Limit.BytesEpochs; len(later) != 1 || later[0].Epoch != 1_700_000_001 {
			t.Errorf("since the first epoch: %+v; want the second alone", later)
		}
		if err := r.Stop(t); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("group", func(t *testing.T) {
		clk := clock.NewManual(time.Unix(1_700_000_000, 0))
		_, sinkOpt := logSink()
		spec := strings.Replace(generatorToLog, "      rampUpDuration: 0s\n", `      rampUpDuration: 0s
      groups:
        - {name: page-beside, max: 5, min: 5, rampUpDuration: 0s}
`, 1)
		v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "group", spec)), vertex.WithClock(clk), sinkOpt)
		if err != nil {
			t.Fatal(err)
		}
		r := runtest.Start(t, v)
		for range 40 { // the group's replicas agree at its syncs
			clk.Advance(100 * time.Millisecond)
		}
		runtest.WaitFor(t, "three epochs of the group", func() bool {
			return len(v.PageView(0).Vertices[0].Limit.GroupEpochs["page-beside"]) >= 3
		})
		l := v.PageView(0).Vertices[0].Limit
		if l.BytesEpochs != nil {
			t.Errorf("byte epochs %+v without a byte limit", l.BytesEpochs)
		}
		es := l.GroupEpochs["page-beside"]
		if e := es[len(es)-1]; e.Pool != 5 || e.Share != 5 || e.Max != 5 || e.Replicas != 1 {
			t.Errorf("the group's last epoch %+v; want its pool, share and max of 5, one replica", e)
		}
		if err := r.Stop(t); err != nil {
			t.Fatal(err)
		}
	})
}

// runTwoEpochs runs the MonoVertex of spec, 10 messages a second, on a
// manual clock for two full epochs.
func runTwoEpochs(t *testing.T, name, spec string) (*vertex.Vertex, *runtest.Run) {
	t.Helper()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	out, sinkOpt := logSink()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, name, spec)), vertex.WithClock(clk), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	r := runtest.Start(t, v)
	for epoch := 1; epoch <= 2; epoch++ {
		runtest.WaitFor(t, "a full epoch", func() bool { return len(out.Lines()) >= 10*epoch && v.Status().Throttled })
		clk.Advance(time.Second)
	}
	return v, r
}
