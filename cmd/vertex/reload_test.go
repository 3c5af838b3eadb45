package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/config"
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

// TestReloaderAppliesLiveChangesOnly applies a change of max, refuses a
// change of the source and a config that is not valid with one log line
// each, keeping the running config, and looks at an unchanged file again
// only when forced, as on SIGHUP.
func TestReloaderAppliesLiveChangesOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mv.yaml")
	write := func(max, rpu string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(strings.NewReplacer("MAX", max, "RPU", rpu).Replace(reloadYAML)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("100", "10")
	f, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	r := newReloader(path, f, 0, zap.New(core))
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
