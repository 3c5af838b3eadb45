package simulate

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		text string
		want Format
	}{{"table", Table}, {"csv", CSV}} {
		t.Run(tt.text, func(t *testing.T) {
			var f Format
			if err := f.UnmarshalText([]byte(tt.text)); err != nil || f != tt.want {
				t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", tt.text, f, err, tt.want)
			}
			if f.String() != tt.text {
				t.Fatalf("String() = %q; want %q", f.String(), tt.text)
			}
		})
	}
	var f Format
	for _, bad := range []string{"", "CSV", "xml"} {
		if err := f.UnmarshalText([]byte(bad)); err == nil || !strings.Contains(err.Error(), "table or csv") {
			t.Errorf("UnmarshalText(%q): %v; want an error listing table and csv", bad, err)
		}
	}
}

// failing fails every write.
type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestSimulationWrite(t *testing.T) {
	cfg := ratelimit.DefaultConfig(20)
	cfg.Min, cfg.RampUpDuration = 10, 2*time.Second
	next := cfg
	next.Max = 40
	sim := Simulation{Config: cfg, Scenario: Scenario{Demand: []int{100, NoCall, 100, 100},
		Changes: []SimChange{{Epoch: 4, Config: next}}}}
	tests := []struct {
		name   string
		format Format
		want   string
	}{
		{"csv", CSV, "epoch,pool,granted,max,switched\n1,10,10,20,0\n2,,,20,0\n3,15,15,20,0\n4,20,20,40,1\n"},
		{"table", Table, "mode relaxed, min 10, max 20, ramp-up 2s\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, chart bytes.Buffer
			if err := sim.Write(&out, tt.format, &chart); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.String(), tt.want) {
				t.Errorf("wrote:\n%s\nwant it to start with:\n%s", out.String(), tt.want)
			}
			if !bytes.HasPrefix(chart.Bytes(), []byte("\x89PNG")) {
				t.Errorf("the chart is not a PNG: % x", chart.Bytes()[:min(chart.Len(), 8)])
			}
		})
	}
	t.Run("chart error", func(t *testing.T) {
		var out bytes.Buffer
		err := sim.Write(&out, CSV, failing{})
		var ce *ChartError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "disk full") || out.Len() == 0 {
			t.Fatalf("Write to a failing chart: %v (wrote %d bytes); want a *ChartError after the CSV", err, out.Len())
		}
	})
	t.Run("bad change", func(t *testing.T) {
		var out bytes.Buffer
		bad := sim
		bad.Changes = []SimChange{{Epoch: 1, Config: next}}
		if err := bad.Write(&out, CSV, nil); err == nil || out.Len() != 0 {
			t.Fatalf("a change at epoch 1: %v, wrote %q; want an error and nothing written", err, out.String())
		}
	})
}

func TestCheckLive(t *testing.T) {
	base := ratelimit.DefaultConfig(100)
	tests := []struct {
		name   string
		change func(*ratelimit.Config)
		want   string // in the error; "" for none
	}{
		{"max", func(c *ratelimit.Config) { c.Max = 200 }, ""},
		{"mode", func(c *ratelimit.Config) { c.Mode = ratelimit.GoBackN }, ""},
		{"cut", func(c *ratelimit.Config) { c.CutPercentage = 20 }, "adaptive.cutPercentage (20, was 50) cannot change while a replica runs"},
		{"adaptive", func(c *ratelimit.Config) { c.Adaptive = true }, "adaptive (true, was false) cannot change while a replica runs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := base
			tt.change(&next)
			err := CheckLive(base, next)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || err.Error() != tt.want) {
				t.Fatalf("CheckLive: %v; want %q", err, tt.want)
			}
		})
	}
	if got, want := LiveSettings(), "max, min, rampUpDuration, modes and shadow"; got != want {
		t.Errorf("LiveSettings() = %q; want %q", got, want)
	}
}

func TestRenderConfigError(t *testing.T) {
	cfg := ratelimit.DefaultConfig(0)
	cfg.Min = -1
	got := RenderConfigError(cfg.Validate(), map[string]string{"Max": "--max"})
	if !strings.Contains(got, "--max (0)") || !strings.Contains(got, "Min (-1)") || !strings.Contains(got, "; ") {
		t.Fatalf("RenderConfigError = %q; want --max and Min named, on one line", got)
	}
}

func TestParseChange(t *testing.T) {
	for _, tt := range []struct {
		arg, path, err string
		epoch          int
	}{
		{arg: "2:b.yaml", epoch: 2, path: "b.yaml"},
		{arg: "5:c:d.yaml", epoch: 5, path: "c:d.yaml"},
		{arg: "b.yaml", err: "want K:FILE, K the epoch from which FILE's rate limit applies"},
		{arg: "2:", err: "want K:FILE, K the epoch from which FILE's rate limit applies"},
		{arg: "1:b.yaml", err: "epoch 1 is not from 2 to 5, the epochs of --demand"},
		{arg: "6:b.yaml", err: "epoch 6 is not from 2 to 5, the epochs of --demand"},
	} {
		n, path, err := ParseChange(tt.arg, 5)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if n != tt.epoch || path != tt.path || got != tt.err {
			t.Errorf("%q: %d, %q, %q; want %d, %q, %q", tt.arg, n, path, got, tt.epoch, tt.path, tt.err)
		}
	}
}

// WriteWithChart writes the chart to a file, and a file it cannot create is
// a *ChartFileError before anything is written.
func TestWriteWithChart(t *testing.T) {
	sim := Simulation{Config: ratelimit.DefaultConfig(20), Scenario: Scenario{Demand: []int{10, 10}}}
	path := filepath.Join(t.TempDir(), "chart.png")
	var out bytes.Buffer
	if err := sim.WriteWithChart(&out, CSV, path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) || out.Len() == 0 {
		t.Fatalf("chart %v, %d bytes of CSV; want a PNG and the CSV", err, out.Len())
	}
	out.Reset()
	err := sim.WriteWithChart(&out, CSV, filepath.Join(path, "no-dir", "chart.png"))
	var fe *ChartFileError
	if !errors.As(err, &fe) || err.Error() != "not a directory" || out.Len() != 0 {
		t.Fatalf("%v, wrote %q; want a *ChartFileError, not a directory, and nothing written", err, out.String())
	}
}
