package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/simulate"
)

var errHelp = flag.ErrHelp

// simulateConfigFromFile returns the rate limit of a MonoVertex, or of a Pipeline
// (its own, or vertex's merged with it).
func simulateConfigFromFile(path, vertex string) (ratelimit.Config, error) {
	f, err := loadConfig(path)
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
	return rl.LimiterConfig(), nil
}

// overrideConfig returns base with the fields whose flags were set taken from
// flags.
func overrideConfig(base, flags ratelimit.Config, mode ratelimit.Mode, set func(string) bool) ratelimit.Config {
	if set("max") {
		base.Max = flags.Max
	}
	if set("min") {
		base.Min = flags.Min
	}
	if set("ramp-up") {
		base.RampUpDuration = flags.RampUpDuration
	}
	if set("mode") {
		base.Mode = mode
	}
	if set("threshold") {
		base.ThresholdPercentage = flags.ThresholdPercentage
	}
	if set("cool-down") {
		base.CoolDownPeriod = flags.CoolDownPeriod
	}
	if set("ramp-down") {
		base.RampDownPercentage = flags.RampDownPercentage
	}
	if set("cut") {
		base.CutPercentage = flags.CutPercentage
	}
	return base
}

// simFlags maps the limiter's config fields to the flags that set them, so that
// config errors name the flag the user typed.
var simFlags = map[string]string{
	"Max":                 "--max",
	"Min":                 "--min",
	"RampUpDuration":      "--ramp-up",
	"Mode":                "--mode",
	"ThresholdPercentage": "--threshold",
	"CoolDownPeriod":      "--cool-down",
	"RampDownPercentage":  "--ramp-down",
	"CutPercentage":       "--cut",
}

func runSimulate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("simulate", `usage: vertex simulate (--max N | -f FILE) --demand LIST [flags]

Runs the real rate limiter on a simulated clock, one epoch (second) per entry of
--demand, and prints per epoch the pool and the tokens granted. -f takes the rate
limit from a MonoVertex or Pipeline YAML (the pipeline's, or --vertex's); flags
given with it override its fields. --signals adds throttle signals, as a
downstream answering 429 would send them, and turns adaptive throttling on.
--change K:FILE replays a live change of the config to FILE's rate limit
(its `+liveSettings()+`), as vertex run applies it:
epoch K is the first under it; give it once per change.

flags:
`)
	cfg := ratelimit.DefaultConfig(0)
	var mode ratelimit.Mode
	fs.Int64Var(&cfg.Max, "max", 0, "most tokens per second for the whole vertex (required)")
	fs.Int64Var(&cfg.Min, "min", ratelimit.DefaultMin, "tokens per second at start")
	fs.DurationVar(&cfg.RampUpDuration, "ramp-up", ratelimit.DefaultRampUpDuration, "time to ramp from min to max (0: start at max)")
	fs.TextVar(&mode, "mode", ratelimit.Relaxed, "ramp mode: relaxed, scheduled, onlyIfUsed or goBackN")
	fs.IntVar(&cfg.ThresholdPercentage, "threshold", ratelimit.DefaultThresholdPercentage, "onlyIfUsed/goBackN: utilization percentage to ramp up")
	fs.DurationVar(&cfg.CoolDownPeriod, "cool-down", ratelimit.DefaultCoolDownPeriod, "goBackN: time without calls before ramping down")
	fs.IntVar(&cfg.RampDownPercentage, "ramp-down", ratelimit.DefaultRampDownPercentage, "goBackN: percentage of a slope to ramp down per idle epoch")
	fs.IntVar(&cfg.CutPercentage, "cut", ratelimit.DefaultCutPercentage, "adaptive: percentage of the pool a throttle signal cuts")
	signalsArg := fs.String("signals", "", `throttle signals per epoch, after its call, comma-separated: 0 or empty none, 1 a signal, a duration a signal with that Retry-After, e.g. "0,0,1,0,2s"`)
	file := fs.String("f", "", "take the rate limit from this MonoVertex or Pipeline YAML")
	vertex := fs.String("vertex", "", "with -f and a Pipeline: the vertex whose rate limit to use")
	demandArg := fs.String("demand", "", `tokens asked per epoch, comma-separated; an empty entry is an epoch without a call (required), e.g. "10,20,,60"`)
	format := fs.String("format", "table", "output format: table or csv")
	plotPath := fs.String("plot", "", "also write a PNG chart of pool and granted per epoch to this file")
	var changeArgs changeFlags
	fs.Var(&changeArgs, "change", "K:FILE: from epoch K, the rate limit of FILE (a live change; repeatable)")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	if *file != "" {
		fileCfg, err := simulateConfigFromFile(*file, *vertex)
		if err != nil {
			return err
		}
		// Flags given beside -f override the file's fields.
		cfg = overrideConfig(fileCfg, cfg, mode, fs.isSet)
	} else {
		cfg.Mode = mode
		if !fs.isSet("max") {
			return usagef("simulate: --max (or -f FILE) is required")
		}
	}
	if !fs.isSet("demand") {
		return usagef("simulate: --demand is required")
	}
	if *format != "table" && *format != "csv" {
		return usagef("simulate: --format (%q) must be table or csv", *format)
	}
	demand, err := simulate.ParseDemand(*demandArg)
	if err != nil {
		return usagef("simulate: --demand %v", err)
	}
	var signals []time.Duration
	if fs.isSet("signals") {
		if signals, err = simulate.ParseSignals(*signalsArg); err != nil {
			return usagef("simulate: --signals %v", err)
		}
		cfg.Adaptive = true
	}
	if err := cfg.Validate(); err != nil {
		return &usageError{msg: "simulate: " + renderConfigError(err, simFlags)}
	}
	// What the flags set beside -f, and --signals, hold for the changes too.
	same := func(c *ratelimit.Config) {
		if fs.isSet("signals") {
			c.Adaptive = true
		}
		if fs.isSet("cut") {
			c.CutPercentage = cfg.CutPercentage
		}
	}
	changes, err := changeArgs.load(cfg, *vertex, len(demand), same)
	if err != nil {
		return err
	}
	return writeSimulation(stdout, cfg, demand, signals, changes, *format, *plotPath)
}

// changeFlags are the --change K:FILE flags of simulate.
type changeFlags []string

func (c *changeFlags) String() string { return strings.Join(*c, " ") }

func (c *changeFlags) Set(v string) error {
	*c = append(*c, v)
	return nil
}

// load reads the rate limit of each change's file (vertex's, for a
// Pipeline), with same applied, and checks that it can replace base live,
// in a simulation of epochs epochs.
func (c changeFlags) load(base ratelimit.Config, vertex string, epochs int, same func(*ratelimit.Config)) ([]ratelimit.SimChange, error) {
	var out []ratelimit.SimChange
	for _, arg := range c {
		k, path, ok := strings.Cut(arg, ":")
		n, err := strconv.Atoi(k)
		if !ok || err != nil || path == "" {
			return nil, usagef("simulate: --change (%q): want K:FILE, K the epoch from which FILE's rate limit applies", arg)
		}
		if n < 2 || n > epochs {
			return nil, usagef("simulate: --change (%q): epoch %d is not from 2 to %d, the epochs of --demand", arg, n, epochs)
		}
		cfg, err := simulateConfigFromFile(path, vertex)
		if err != nil {
			return nil, usagef("simulate: --change (%q): %v", arg, err)
		}
		same(&cfg)
		if err := notLive(base, cfg); err != nil {
			return nil, usagef("simulate: --change (%q): %v", arg, err)
		}
		out = append(out, ratelimit.SimChange{Epoch: n, Config: cfg})
	}
	return out, nil
}

// notLive returns an error naming the first setting of next that differs
// from base and cannot change live, by its YAML name, or nil.
func notLive(base, next ratelimit.Config) error {
	l, err := ratelimit.New(base)
	if err != nil {
		return err
	}
	defer l.Close(context.Background())
	err = l.Update(next)
	var nl *ratelimit.NotLiveError
	if errors.As(err, &nl) {
		f, _ := ratelimit.FieldOf(nl.Field)
		return fmt.Errorf("%s (%v, was %v) cannot change while a replica runs", f.YAML, nl.New, nl.Old)
	}
	return err
}

// liveSettings lists the settings of a rate limit that can change live, by
// their YAML names: "max, min, ... and shadow".
func liveSettings() string {
	names := ratelimit.LiveYAML()
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// writeSimulation simulates cfg under demand and signals and writes the epochs in format
// (table or csv), and as a PNG chart to plotPath when it is set.
func writeSimulation(stdout io.Writer, cfg ratelimit.Config, demand []int, signals []time.Duration, changes []ratelimit.SimChange, format, plotPath string) error {
	var plotFile *os.File
	if plotPath != "" {
		// Open the chart's file first, so that a bad path fails before any output.
		var err error
		if plotFile, err = os.Create(plotPath); err != nil {
			return usagef("simulate: --plot (%q): %v", plotPath, errors.Unwrap(err))
		}
		defer plotFile.Close()
	}
	epochs, err := ratelimit.SimulateChanges(cfg, demand, signals, changes)
	if err != nil {
		return err
	}
	if format == "csv" {
		err = simulate.WriteCSV(stdout, cfg.Mode, epochs)
	} else {
		err = simulate.WriteTable(stdout, cfg, epochs)
	}
	if err != nil {
		return err
	}
	if plotFile != nil {
		if err := simulate.WritePNG(plotFile, cfg, epochs); err != nil {
			return fmt.Errorf("simulate: --plot (%q): %w", plotPath, err)
		}
		return plotFile.Close()
	}
	return nil
}

// renderConfigError lists every field error of a config with the caller's names.
func renderConfigError(err error, names map[string]string) string {
	name := func(f string) string {
		if n, ok := names[f]; ok {
			return n
		}
		return f
	}
	var msgs []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *ratelimit.FieldError
		if errors.As(err, &fe) {
			msgs = append(msgs, fe.Render(name))
			return
		}
		msgs = append(msgs, err.Error())
	}
	walk(err)
	return strings.Join(msgs, "; ")
}
