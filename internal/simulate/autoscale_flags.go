package simulate

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// ScaleFlags maps the scale fields (their YAML names, as
// [autoscale.RangeError] reports them) to the flags of `vertex simulate
// --autoscale` that set them.
var ScaleFlags = map[string]string{
	"min": "--scale-min", "max": "--scale-max", "lookbackSeconds": "--lookback",
	"scaleUpCooldownSeconds": "--scale-up-cooldown", "scaleDownCooldownSeconds": "--scale-down-cooldown",
	"targetProcessingSeconds": "--target-processing", "replicasPerScaleUp": "--replicas-per-scale-up",
	"replicasPerScaleDown": "--replicas-per-scale-down", "replicaRate": "--rule-replica-rate",
}

// AutoscaleFlags are the flags of `vertex simulate --autoscale`, on the
// command's flag set.
type AutoscaleFlags struct {
	fs                                 *flag.FlagSet
	on                                 bool
	replicaRate                        int
	ruleRate                           float64
	min, max, perUp, perDown           int
	lookback, upCool, downCool, target int64
}

// AddAutoscaleFlags defines the flags of --autoscale on fs, with
// Numaflow's defaults of the scale fields.
func AddAutoscaleFlags(fs *flag.FlagSet) *AutoscaleFlags {
	a := &AutoscaleFlags{fs: fs}
	d := autoscale.DefaultConfig()
	fs.BoolVar(&a.on, "autoscale", false, "scale the vertex's replicas by sluice's scaling rule: per epoch pool, backlog, processed and replicas (needs --replica-rate)")
	fs.IntVar(&a.replicaRate, "replica-rate", 0, "--autoscale: messages one simulated replica processes a second")
	fs.Float64Var(&a.ruleRate, "rule-replica-rate", 0, "--autoscale: the replica rate the rule is told (0: it learns it)")
	fs.IntVar(&a.min, "scale-min", d.Min, "--autoscale: scale.min, the fewest replicas")
	fs.IntVar(&a.max, "scale-max", d.Max, "--autoscale: scale.max, the most replicas")
	fs.Int64Var(&a.lookback, "lookback", int64(d.Lookback/time.Second), "--autoscale: scale.lookbackSeconds")
	fs.Int64Var(&a.upCool, "scale-up-cooldown", int64(d.ScaleUpCooldown/time.Second), "--autoscale: scale.scaleUpCooldownSeconds")
	fs.Int64Var(&a.downCool, "scale-down-cooldown", int64(d.ScaleDownCooldown/time.Second), "--autoscale: scale.scaleDownCooldownSeconds")
	fs.Int64Var(&a.target, "target-processing", int64(d.TargetProcessing/time.Second), "--autoscale: scale.targetProcessingSeconds")
	fs.IntVar(&a.perUp, "replicas-per-scale-up", d.ReplicasPerScaleUp, "--autoscale: scale.replicasPerScaleUp")
	fs.IntVar(&a.perDown, "replicas-per-scale-down", d.ReplicasPerScaleDown, "--autoscale: scale.replicasPerScaleDown")
	return a
}

// On reports whether --autoscale was given.
func (a *AutoscaleFlags) On() bool { return a.on }

// set reports whether the flag name was given.
func (a *AutoscaleFlags) set(name string) bool {
	set := false
	a.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// Check returns a usage error for a flag of --autoscale given without it.
func (a *AutoscaleFlags) Check() error {
	if a.on {
		return nil
	}
	for _, f := range append(mapValues(ScaleFlags), "--replica-rate") {
		if a.set(f[2:]) {
			return cli.Usagef("simulate: %s is for --autoscale", f)
		}
	}
	return nil
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// Config returns base with the settings whose flags were given taken from
// them, or a usage error naming the flag out of range.
func (a *AutoscaleFlags) Config(base autoscale.Config) (autoscale.Config, error) {
	secs := func(v int64) time.Duration { return time.Duration(max(min(v, 1<<33), -(1<<33))) * time.Second }
	c := base
	for flag, set := range map[string]func(){
		"scale-min": func() { c.Min = a.min }, "scale-max": func() { c.Max = a.max },
		"lookback": func() { c.Lookback = secs(a.lookback) }, "scale-up-cooldown": func() { c.ScaleUpCooldown = secs(a.upCool) },
		"scale-down-cooldown":   func() { c.ScaleDownCooldown = secs(a.downCool) },
		"target-processing":     func() { c.TargetProcessing = secs(a.target) },
		"replicas-per-scale-up": func() { c.ReplicasPerScaleUp = a.perUp }, "replicas-per-scale-down": func() { c.ReplicasPerScaleDown = a.perDown },
		"rule-replica-rate": func() { c.ReplicaRate = a.ruleRate },
	} {
		if a.set(flag) {
			set()
		}
	}
	err := c.Validate()
	var re *autoscale.RangeError
	if errors.As(err, &re) {
		f, value := ScaleFlags[re.Field], re.Value
		if !a.set(f[2:]) {
			return c, cli.Usagef("simulate: -f: scale.%s (%s) must be %s", re.Field, value, re.Want)
		}
		for name, v := range map[string]int64{"lookbackSeconds": a.lookback, "scaleUpCooldownSeconds": a.upCool,
			"scaleDownCooldownSeconds": a.downCool, "targetProcessingSeconds": a.target} {
			if name == re.Field {
				value = formatInt(v)
			}
		}
		return c, cli.Usagef("simulate: %s (%s) must be %s", f, value, re.Want)
	}
	return c, err
}

// AutoscaleRun is what [AutoscaleFlags.Run] simulates besides the flags of
// --autoscale: the rate limit, the demand (messages arriving per epoch),
// the signals, the output, and the file (and pipeline vertex) whose scale
// block the flags override.
type AutoscaleRun struct {
	Limit        ratelimit.Config
	Demand       []int
	Signals      []time.Duration
	Format       Format
	Plot         string // a PNG chart's path; "" for none
	File, Vertex string // -f and --vertex; "" for none
}

// Run runs the simulation the flags describe when --autoscale was given,
// and writes it to w; the scale block of in.File (in.Vertex's, for a
// Pipeline; Numaflow's defaults without one) is the rule's config, with the
// flags given overriding its fields. It reports whether it ran or found a
// flag of --autoscale given without it. Flags of vertex simulate that
// --autoscale does not take (set reports which were given) and flags out
// of range are usage errors naming the flag.
func (a *AutoscaleFlags) Run(w io.Writer, in AutoscaleRun, set func(string) bool) (bool, error) {
	if !a.on {
		err := a.Check()
		return err != nil, err
	}
	return true, a.run(w, in, set)
}

func (a *AutoscaleFlags) run(w io.Writer, in AutoscaleRun, set func(string) bool) error {
	for _, f := range []string{"change", "quota", "group", "demand-of"} {
		if set(f) {
			return cli.Usagef("simulate: --%s is not for --autoscale", f)
		}
	}
	if a.replicaRate < 1 {
		return cli.Usagef("simulate: --replica-rate (%d) must be at least 1 with --autoscale", a.replicaRate)
	}
	base := autoscale.DefaultConfig()
	if in.File != "" {
		f, err := cli.LoadConfig(in.File)
		if err != nil {
			return err
		}
		switch {
		case f.MonoVertex != nil:
			base = vertexconfig.Autoscale(f.MonoVertex.Spec.Scale)
		case in.Vertex != "":
			if v := f.Pipeline.Vertex(in.Vertex); v != nil {
				base = vertexconfig.Autoscale(v.Scale)
			}
		}
	}
	scale, err := a.Config(base)
	if err != nil {
		return err
	}
	s := Scaled{Limit: in.Limit, Scale: scale, ReplicaRate: a.replicaRate, Demand: in.Demand, Signals: in.Signals}
	var chart *os.File
	if in.Plot != "" {
		if chart, err = os.Create(in.Plot); err != nil {
			return cli.Usagef("simulate: --plot (%q): %v", in.Plot, errors.Unwrap(err))
		}
		defer chart.Close()
	}
	epochs, err := SimulateScaled(s)
	if err != nil {
		return err
	}
	if in.Format == CSV {
		err = WriteScaledCSV(w, epochs)
	} else {
		err = WriteScaledTable(w, s, epochs)
	}
	if err != nil || chart == nil {
		return err
	}
	if err := WriteScaledPNG(chart, s, epochs); err != nil {
		return fmt.Errorf("simulate: --plot (%q): %w", in.Plot, err)
	}
	return chart.Close()
}

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }
