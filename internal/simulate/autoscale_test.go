package simulate

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
)

// rampScaled is the ramp of docs/autoscaling.md: a limit ramping from 10
// to 1,000/s over 60 s, replicas of 200/s, demand above the limit.
func rampScaled() Scaled {
	lim := ratelimit.DefaultConfig(1000)
	lim.Min, lim.RampUpDuration = 10, 60*time.Second
	sc := autoscale.DefaultConfig()
	sc.Min, sc.Lookback, sc.ScaleUpCooldown, sc.ScaleDownCooldown = 1, time.Second, 0, 0
	return Scaled{Limit: lim, Scale: sc, ReplicaRate: 200, Demand: repeat(1500, 90)}
}

func repeat(n, k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = n
	}
	return out
}

func TestSimulateScaledFollowsTheRamp(t *testing.T) {
	epochs, err := SimulateScaled(rampScaled())
	if err != nil {
		t.Fatal(err)
	}
	learnt := false
	for _, e := range epochs {
		ramping := e.PoolMilli < 1000_000
		switch {
		case e.Replicas > e.Fits+1:
			t.Fatalf("epoch %d: %d replicas, more than the %d the pool of %s keeps busy plus one", e.Epoch, e.Replicas, e.Fits, formatMilli(e.PoolMilli))
		case !ramping && e.Epoch > 61 && e.Replicas != e.Fits:
			t.Fatalf("epoch %d, at max: %d replicas, want %d", e.Epoch, e.Replicas, e.Fits)
		case learnt && ramping && e.Replicas < e.Fits:
			// Decided on the pool of the epoch before, a slope lower.
			t.Fatalf("epoch %d, ramping: %d replicas, fewer than the %d the pool keeps busy", e.Epoch, e.Replicas, e.Fits)
		case !learnt && e.Replicas != 1:
			t.Fatalf("epoch %d: %d replicas before the replica rate is known, want 1", e.Epoch, e.Replicas)
		}
		learnt = learnt || e.Decision.ReplicaRate == 200
	}
	if !learnt {
		t.Fatal("the rule never learnt the replica rate")
	}
	if s := Summarize(epochs); s != (ScaledSummary{Backlogged: 90, AtFits: 44, OneOver: 45, Under: 1}) {
		t.Fatalf("summary %+v, want 90 epochs with a backlog: 44 at fits, 45 at fits+1, none over, one under (the epoch that learns)", s)
	}
}

func TestSimulateScaledScalesDown(t *testing.T) {
	s := rampScaled()
	s.Limit.RampUpDuration = 0
	s.Scale.ReplicaRate = 200
	s.Demand = append(repeat(700, 10), repeat(150, 10)...)
	epochs, err := SimulateScaled(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := epochs[9].Replicas; got != 4 {
		t.Fatalf("epoch 10, demand 700/s: %d replicas, want 4", got)
	}
	if got := epochs[19].Replicas; got != 1 {
		t.Fatalf("epoch 20, demand 150/s: %d replicas, want 1", got)
	}
}

func TestSimulateScaledCutHolds(t *testing.T) {
	s := rampScaled()
	s.Limit.Adaptive, s.Limit.RampUpDuration = true, 0
	s.Scale.Lookback = 5 * time.Second
	s.Demand = repeat(1500, 20)
	s.Signals = make([]time.Duration, 20)
	for i := range s.Signals {
		s.Signals[i] = NoSignal
	}
	s.Signals[9] = 0 // a signal after epoch 10: epoch 11's pool is cut
	epochs, err := SimulateScaled(s)
	if err != nil {
		t.Fatal(err)
	}
	before := epochs[9].Replicas
	if !epochs[10].Cut || epochs[10].Decision.Reason != autoscale.Cut {
		t.Fatalf("epoch 11: %+v, want the cut seen and the count held", epochs[10])
	}
	for _, e := range epochs[10:15] {
		if e.Replicas != before || e.Decision.Replicas != before {
			t.Fatalf("epoch %d, within a lookback of the cut: %d replicas, next %d, want %d held", e.Epoch, e.Replicas, e.Decision.Replicas, before)
		}
	}
}

func TestScaledOutputs(t *testing.T) {
	s := rampScaled()
	s.Demand = repeat(1500, 3)
	epochs, err := SimulateScaled(s)
	if err != nil {
		t.Fatal(err)
	}
	var csv bytes.Buffer
	if err := WriteScaledCSV(&csv, epochs); err != nil {
		t.Fatal(err)
	}
	want := "epoch,demand,pool,processed,backlog,replicas,fits,next,reason,throttled,cut,paused\n" +
		"1,1500,10,10,1490,1,1,1,atLimit,1,0,0\n2,1500,26.5,26,2964,1,1,1,atLimit,1,0,0\n3,1500,43,43,4421,1,1,1,atLimit,1,0,0\n"
	if csv.String() != want {
		t.Fatalf("csv:\n%s\nwant:\n%s", csv.String(), want)
	}
	var table, png bytes.Buffer
	if err := WriteScaledTable(&table, s, epochs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "epochs with a backlog: 3; replicas = fits in 3, fits+1 in 0") {
		t.Fatalf("table:\n%s", table.String())
	}
	if err := WriteScaledPNG(&png, s, epochs); err != nil || !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG")) {
		t.Fatalf("png: %v, %d bytes", err, png.Len())
	}
}

func TestAutoscaleFlagErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no replica rate", []string{"--autoscale"}, "--replica-rate (0) must be at least 1"},
		{"negative scale-min", []string{"--autoscale", "--replica-rate", "5", "--scale-min", "-1"}, "--scale-min (-1) must be from 0"},
		{"min above max", []string{"--autoscale", "--replica-rate", "5", "--scale-min", "5", "--scale-max", "2"}, "--scale-min (5) must be at most max (2)"},
		{"lookback 0", []string{"--autoscale", "--replica-rate", "5", "--lookback", "0"}, "--lookback (0) must be whole seconds from 1 to 600"},
		{"huge cool-down", []string{"--autoscale", "--replica-rate", "5", "--scale-up-cooldown", "99999999999999"}, "--scale-up-cooldown (99999999999999) must be"},
		{"target 0", []string{"--autoscale", "--replica-rate", "5", "--target-processing", "0"}, "--target-processing (0)"},
		{"per scale-down 0", []string{"--autoscale", "--replica-rate", "5", "--replicas-per-scale-down", "0"}, "--replicas-per-scale-down (0)"},
		{"negative rule rate", []string{"--autoscale", "--replica-rate", "5", "--rule-replica-rate", "-1"}, "--rule-replica-rate (-1)"},
		{"without --autoscale", []string{"--replica-rate", "5"}, "--replica-rate is for --autoscale"},
		{"a scale flag without --autoscale", []string{"--lookback", "5"}, "--lookback is for --autoscale"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
			a := AddAutoscaleFlags(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			ran, err := a.Run(io.Discard, AutoscaleRun{Limit: ratelimit.DefaultConfig(10), Demand: []int{1}}, func(string) bool { return false })
			if !ran || err == nil || !cli.IsUsage(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ran %v, error %v, want a usage error with %q", ran, err, c.want)
			}
		})
	}
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	a := AddAutoscaleFlags(fs)
	_ = fs.Parse([]string{"--autoscale", "--replica-rate", "5"})
	ran, err := a.Run(io.Discard, AutoscaleRun{Limit: ratelimit.DefaultConfig(10), Demand: []int{1}}, func(f string) bool { return f == "quota" })
	if !ran || !cli.IsUsage(err) || !strings.Contains(err.Error(), "--quota is not for --autoscale") {
		t.Fatalf("with --quota: %v, %v", ran, err)
	}
	fs = flag.NewFlagSet("simulate", flag.ContinueOnError)
	if ran, err := AddAutoscaleFlags(fs).Run(io.Discard, AutoscaleRun{Limit: ratelimit.DefaultConfig(10), Demand: []int{1}}, func(string) bool { return false }); ran || err != nil {
		t.Fatalf("without --autoscale: ran %v, %v; want not run", ran, err)
	}
}

func TestAutoscaleFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mv.yaml")
	yaml := `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: orders
spec:
  limits:
    rateLimit:
      max: 1000
  scale:
    min: 2
    max: 9
    lookbackSeconds: 1
    scaleUpCooldownSeconds: 0
    replicasPerScaleUp: 1
  source:
    generator: {}
  sink:
    log: {}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	a := AddAutoscaleFlags(fs)
	if err := fs.Parse([]string{"--autoscale", "--replica-rate", "100", "--scale-max", "4"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	lim := ratelimit.DefaultConfig(1000)
	lim.RampUpDuration = 0
	in := AutoscaleRun{Limit: lim, Demand: repeat(1000, 4), Format: CSV, File: path}
	if ran, err := a.Run(&out, in, func(string) bool { return false }); !ran || err != nil {
		t.Fatalf("ran %v, %v", ran, err)
	}
	// From the file's min of 2, one replica at a time, to the flag's max of 4.
	var replicas []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		replicas = append(replicas, strings.Split(line, ",")[5])
	}
	if got := strings.Join(replicas, " "); got != "2 3 4 4" {
		t.Fatalf("replicas per epoch %q, want 2 3 4 4:\n%s", got, out.String())
	}
}
