package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/simulate"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// simulateConfigFromFile returns the rate limit of a MonoVertex, or of a Pipeline
// (its own, or vertex's merged with it).
func simulateConfigFromFile(path, vertex string) (ratelimit.Config, error) {
	f, err := cli.LoadConfig(path)
	if err != nil {
		return ratelimit.Config{}, err
	}
	var rl *config.RateLimit
	switch {
	case f.MonoVertex != nil:
		if vertex != "" {
			return ratelimit.Config{}, usagef("simulate: --vertex is for Pipelines; %s is a MonoVertex", path)
		}
		rl = f.MonoVertex.Spec.Limits.GetRateLimit()
	default:
		rl, err = f.Pipeline.VertexRateLimit(vertex)
		if err != nil {
			return ratelimit.Config{}, usagef("simulate: --vertex: %v", err)
		}
	}
	if rl == nil {
		return ratelimit.Config{}, usagef("simulate: %s has no rateLimit", path)
	}
	return vertexconfig.LimiterConfig(rl), nil
}

func runSimulate(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("simulate", simulate.Usage())
	cfg := ratelimit.DefaultConfig(0)
	fs.Int64Var(&cfg.Max, "max", 0, "most tokens per second for the whole vertex (required)")
	fs.Int64Var(&cfg.Min, "min", ratelimit.DefaultMin, "tokens per second at start")
	fs.ConfigDurationVar(&cfg.RampUpDuration, "ramp-up", ratelimit.DefaultRampUpDuration, "time to ramp from min to max (0: start at max)")
	fs.TextVar(&cfg.Mode, "mode", ratelimit.Relaxed, "ramp mode: relaxed, scheduled, onlyIfUsed or goBackN")
	fs.IntVar(&cfg.ThresholdPercentage, "threshold", ratelimit.DefaultThresholdPercentage, "onlyIfUsed/goBackN: utilization percentage to ramp up")
	fs.ConfigDurationVar(&cfg.CoolDownPeriod, "cool-down", ratelimit.DefaultCoolDownPeriod, "goBackN: time without calls before ramping down")
	fs.IntVar(&cfg.RampDownPercentage, "ramp-down", ratelimit.DefaultRampDownPercentage, "goBackN: percentage of a slope to ramp down per idle epoch")
	fs.IntVar(&cfg.CutPercentage, "cut", ratelimit.DefaultCutPercentage, "adaptive: percentage of the pool a throttle signal cuts")
	fs.IntVar(&cfg.HoldBelowPercentage, "hold-below", ratelimit.DefaultHoldBelowPercentage, "adaptive: percentage below the learnt ceiling the pool holds at")
	fs.ConfigDurationVar(&cfg.ProbeAfter, "probe-after", ratelimit.DefaultProbeAfter, "adaptive: time after a cut before the pool probes above the learnt ceiling")
	fs.ConfigDurationVar(&cfg.ForgetAfter, "forget-after", ratelimit.DefaultForgetAfter, "adaptive: time after a cut when the learnt ceiling is forgotten (0: learn none)")
	quotaArg := fs.String("quota", "", "a downstream with a quota: fixed:RATE or bucket:RATE:BURST")
	var quotaChanges cli.Strings
	fs.Var(&quotaChanges, "quota-change", "K:RATE: from epoch K, the downstream's quota is RATE (repeatable, in order)")
	var retryAfter time.Duration
	fs.ConfigDurationVar(&retryAfter, "retry-after", 0, "the downstream's Retry-After when it refuses (0: none)")
	signalsArg := fs.String("signals", "", `throttle signals per epoch, after its call, comma-separated: 0 or empty none, 1 a signal, a duration a signal with that Retry-After, e.g. "0,0,1,0,2s"`)
	file := fs.String("f", "", "take the rate limit from this MonoVertex or Pipeline YAML")
	vertex := fs.String("vertex", "", "with -f and a Pipeline: the vertex whose rate limit to use")
	demandArg := fs.String("demand", "", `tokens asked per epoch, comma-separated; an empty entry is an epoch without a call, NxK N in each of K epochs (required), e.g. "10,20,,60" or "1000x60"`)
	formatArg := fs.String("format", "table", "output format: table or csv")
	plotPath := fs.String("plot", "", "also write a PNG chart of pool and granted per epoch to this file")
	var changeArgs cli.Strings
	fs.Var(&changeArgs, "change", "K:FILE: from epoch K, the rate limit of FILE (a live change; repeatable)")
	group := fs.String("group", "", "with -f PIPELINE: simulate the vertices that join this shared limit (rateLimit.groups)")
	as := simulate.AddAutoscaleFlags(fs.FlagSet)
	var demandOf cli.Strings
	fs.Var(&demandOf, "demand-of", "with --group: VERTEX=LIST, the demand of one member vertex per epoch (repeatable)")
	if err := fs.ParseArgs(args, stdout); err != nil {
		return err
	}
	if fs.IsSet("group") || len(demandOf) > 0 {
		return simulateGroup(stdout, *file, *group, demandOf)
	}
	if *file != "" {
		fileCfg, err := simulateConfigFromFile(*file, *vertex)
		if err != nil {
			return err
		}
		// Flags given beside -f override the file's fields.
		cfg = simulate.Override(fileCfg, cfg, fs.IsSet)
	} else if !fs.IsSet("max") {
		return usagef("simulate: --max (or -f FILE) is required")
	}
	if !fs.IsSet("demand") {
		return usagef("simulate: --demand is required")
	}
	var format simulate.Format
	if err := format.UnmarshalText([]byte(*formatArg)); err != nil {
		return usagef("simulate: --format (%q) must be table or csv", *formatArg)
	}
	demand, err := simulate.ParseDemand(*demandArg)
	if err != nil {
		return usagef("simulate: --demand %v", err)
	}
	var signals []time.Duration
	if fs.IsSet("signals") {
		if signals, err = simulate.ParseSignals(*signalsArg); err != nil {
			return usagef("simulate: --signals %v", err)
		}
		cfg.Adaptive = true
	}
	var down simulate.Downstream
	switch {
	case fs.IsSet("quota"):
		if down, err = simulate.ParseQuota(*quotaArg, quotaChanges, retryAfter, len(demand)); err != nil {
			return usagef("simulate: --quota %v", err)
		}
		cfg.Adaptive = true
	case len(quotaChanges) > 0 || fs.IsSet("retry-after"):
		return usagef("simulate: --quota-change and --retry-after are for --quota")
	}
	if err := cfg.Validate(); err != nil {
		return usagef("simulate: %s", simulate.RenderConfigError(err, simulate.Flags))
	}
	if ran, err := as.Run(stdout, simulate.AutoscaleRun{Limit: cfg, Demand: demand, Signals: signals, Format: format, Plot: *plotPath, File: *file, Vertex: *vertex}, fs.IsSet); ran {
		return err
	}
	// What the flags set beside -f, and --signals, hold for the changes too.
	same := func(c *ratelimit.Config) {
		if fs.IsSet("signals") || fs.IsSet("quota") {
			c.Adaptive = true
		}
		if fs.IsSet("cut") {
			c.CutPercentage = cfg.CutPercentage
		}
	}
	changes, err := loadChanges(changeArgs, cfg, *vertex, len(demand), same)
	if err != nil {
		return err
	}
	sim := simulate.Simulation{Config: cfg, Scenario: simulate.Scenario{Demand: demand, Signals: signals, Changes: changes, Downstream: down}}
	var fe *simulate.ChartFileError
	var ce *simulate.ChartError
	switch err := sim.WriteWithChart(stdout, format, *plotPath); {
	case errors.As(err, &fe):
		return usagef("simulate: --plot (%q): %v", *plotPath, fe.Err)
	case errors.As(err, &ce):
		return fmt.Errorf("simulate: --plot (%q): %w", *plotPath, ce.Err)
	default:
		return err
	}
}

// loadChanges reads the rate limit of each change's file (vertex's, for a
// Pipeline), with same applied, and checks that it can replace base live,
// in a simulation of epochs epochs.
func loadChanges(c []string, base ratelimit.Config, vertex string, epochs int, same func(*ratelimit.Config)) ([]simulate.SimChange, error) {
	var out []simulate.SimChange
	for _, arg := range c {
		n, path, err := simulate.ParseChange(arg, epochs)
		if err != nil {
			return nil, usagef("simulate: --change (%q): %v", arg, err)
		}
		cfg, err := simulateConfigFromFile(path, vertex)
		if err == nil {
			same(&cfg)
			err = simulate.CheckLive(base, cfg)
		}
		if err != nil {
			return nil, usagef("simulate: --change (%q): %v", arg, err)
		}
		out = append(out, simulate.SimChange{Epoch: n, Config: cfg})
	}
	return out, nil
}

// simulateGroup runs the vertices of the Pipeline in path that join group,
// with the demands of demandOf (VERTEX=LIST each).
func simulateGroup(stdout io.Writer, path, group string, demandOf []string) error {
	switch {
	case group == "":
		return usagef("simulate: --demand-of needs --group NAME")
	case path == "":
		return usagef("simulate: --group needs -f PIPELINE, whose vertices join the group")
	}
	f, err := cli.LoadConfig(path)
	if err != nil {
		return err
	}
	if f.Pipeline == nil {
		return usagef("simulate: --group: %s is a MonoVertex; give a Pipeline whose vertices join %s", path, group)
	}
	gcfg, members, ok := simulate.GroupOf(f.Pipeline, group)
	if !ok {
		return usagef("simulate: --group (%q): no vertex of %s joins it", group, path)
	}
	epochs, err := simulate.SetDemands(members, demandOf)
	if err != nil {
		return usagef("simulate: --demand-of %v", err)
	}
	if epochs == 0 {
		return usagef("simulate: --group needs --demand-of VERTEX=LIST for one member at least (%s)", simulate.MemberNames(members))
	}
	out, err := simulate.SimulateGroup(gcfg, members, epochs)
	if err != nil {
		return err
	}
	return simulate.WriteGroupTable(stdout, group, gcfg, members, out)
}
