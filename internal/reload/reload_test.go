package reload

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

const reloadYAML = `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: mv
spec:
  limits:
    rateLimit:
      max: MAX
  source:
    generator:
      rpu: RPU
  sink:
    log: {}
`

// configFile writes reloadYAML with max 100 and rpu 10 to a file and loads
// it; write writes it again with other values.
func configFile(t *testing.T) (path string, write func(max, rpu string), f *config.File) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "mv.yaml")
	write = func(max, rpu string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(strings.NewReplacer("MAX", max, "RPU", rpu).Replace(reloadYAML)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("100", "10")
	f, err := vertexconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, write, f
}

// TestWatcherAppliesLiveChangesOnly applies a change of max, refuses a
// change of the source and a config that is not valid with one log line
// each, keeping the running config, and looks at an unchanged file again
// only when forced, as on SIGHUP.
func TestWatcherAppliesLiveChangesOnly(t *testing.T) {
	path, write, f := configFile(t)
	core, logs := observer.New(zap.InfoLevel)
	r := New(path, f, Deps{Log: zap.New(core)})
	var applied []uint64
	r.apply = func(f *config.File) error {
		applied = append(applied, *f.MonoVertex.Spec.Limits.RateLimit.Max)
		return nil
	}
	refusals := func() []string {
		var out []string
		for _, e := range logs.FilterMessage("config reload refused; the running config stays").All() {
			out = append(out, e.ContextMap()["error"].(string))
		}
		return out
	}

	r.check(false) // unchanged
	write("200", "10")
	r.check(false)
	r.check(false) // seen
	write("300", "20")
	r.check(false)
	write("0", "10")
	r.check(false)
	write("200", "10")
	r.check(true) // forced: the running config again
	if want := []uint64{200, 200}; len(applied) != 2 || applied[0] != 200 || applied[1] != 200 {
		t.Errorf("applied max %v; want %v", applied, want)
	}
	got := refusals()
	if len(got) != 2 || !strings.Contains(got[0], "spec.source.generator.rpu changed: needs a restart") ||
		!strings.Contains(got[1], "spec.limits.rateLimit.max") || strings.Contains(got[1], "\n") {
		t.Errorf("refusals %q; want one line for the source, one for max 0", got)
	}
	if m := *r.running.MonoVertex.Spec.Limits.RateLimit.Max; m != 200 {
		t.Errorf("running max %d; want 200", m)
	}
}

// Run looks at the file at each interval of its clock and whenever force
// receives: a change of max is applied at the next interval, an unchanged
// file again only when forced, a change of the source is refused; each is
// counted by result. The clock is manual and nothing sleeps.
func TestRunOnClockAndForce(t *testing.T) {
	path, write, f := configFile(t)
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	core, logs := observer.New(zap.InfoLevel)
	reg := prometheus.NewRegistry()
	w := New(path, f, Deps{Interval: time.Second, Clock: clk, Log: zap.New(core), Registerer: reg, Vertex: "mv", Replica: 1})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	force := make(chan os.Signal, 1)
	applied := make(chan uint64, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- w.Run(ctx, force, func(f *config.File) error {
			applied <- *f.MonoVertex.Spec.Limits.RateLimit.Max
			return nil
		})
	}()
	// tick moves the clock one interval once Run waits on it, and waits
	// until Run has looked at the file and waits again.
	tick := func() {
		t.Helper()
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(want uint64) {
		t.Helper()
		select {
		case got := <-applied:
			if got != want {
				t.Fatalf("applied max %d; want %d", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("no change applied; want max %d", want)
		}
	}

	tick() // unchanged: nothing applied
	write("200", "10")
	tick()
	receive(200)
	tick() // seen
	force <- syscall.SIGHUP
	receive(200)
	write("300", "20")
	tick()
	select {
	case m := <-applied:
		t.Fatalf("applied max %d; want the change of the source refused", m)
	default:
	}
	refused := logs.FilterMessage("config reload refused; the running config stays").All()
	if len(refused) != 1 || !strings.Contains(refused[0].ContextMap()["error"].(string), "spec.source.generator.rpu changed") {
		t.Errorf("refusals %v; want one, for the source", refused)
	}
	if got, want := testutil.ToFloat64(w.reloads.WithLabelValues("applied")), 2.0; got != want {
		t.Errorf("applied %v; want %v", got, want)
	}
	if got, want := testutil.ToFloat64(w.reloads.WithLabelValues("refused")), 1.0; got != want {
		t.Errorf("refused %v; want %v", got, want)
	}
	if n, err := testutil.GatherAndCount(reg, "sluice_config_reloads_total"); err != nil || n != 2 {
		t.Errorf("sluice_config_reloads_total: %d series, %v; want 2", n, err)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run: %v; want nil", err)
	}
	if n := clk.Pending(); n != 0 {
		t.Errorf("%d timers left; want none", n)
	}
}
