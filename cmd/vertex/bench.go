package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluiceflow/sluice/internal/bench"
	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/containers"
	"github.com/sluiceflow/sluice/internal/spawn"
)

// benchFlags are the flags of `vertex bench`.
type benchFlags struct {
	file, udsDir, isb string
	duration          time.Duration
	runs              int
	spawn             bool
	// variants are measured beside off and on (--variants).
	variants []string
}

func runBench(args []string, stdout, stderr io.Writer) error {
	fl, err := parseBenchFlags(args, stdout)
	if err != nil {
		return err
	}
	f, err := cli.LoadConfig(fl.file)
	if err != nil {
		return err
	}
	t := bench.NewTarget(f)
	t.OnJetStream = fl.isb == "jetstream"
	if !t.RateLimited() {
		fmt.Fprintf(stderr, "bench: %s has no rateLimit; off and on are the same\n", fl.file)
	}
	log, err := cli.NewLogger("warn", stderr)
	if err != nil {
		return err
	}
	plan, stop, err := containers.Start(context.Background(), t.Config(true), spawn.Choice{Dir: fl.udsDir, Commands: fl.spawn, Engine: "none", Log: log},
		spawn.Deps{Stdout: io.Discard, Stderr: stderr, Log: log})
	if err != nil {
		return err
	}
	defer stop()
	t.SocketDir = plan.Dir
	each := fl.duration / time.Duration(fl.runs)
	if len(fl.variants) > 0 {
		return benchVariants(t, fl, each, stdout, stderr)
	}
	names := [2]string{"off", "on"}
	off, on, err := t.Compare(context.Background(), fl.runs, each, func(run int, _ bool) {
		fmt.Fprintf(stderr, "\rbench: run %d of %d (%s, %v)...   ", run, 2*fl.runs, names[(run-1)%2], each)
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr)
	for i, r := range [2]bench.Runs{off, on} {
		fmt.Fprintf(stdout, "%-4s %14.0f msg/s  (median of %d runs, %.0f messages)\n", names[i]+":", r.Median(), fl.runs, r.Messages)
	}
	fmt.Fprintf(stdout, "on/off ratio: %.3f\n", on.Median()/off.Median())
	return nil
}

func parseBenchFlags(args []string, stdout io.Writer) (benchFlags, error) {
	fs := cli.NewFlagSet("bench", `usage: vertex bench -f FILE [--duration 10s]

Runs the MonoVertex in FILE with its sink replaced by blackhole, with its rate
limit removed ("off") and as configured ("on"), in alternating runs, and prints
the median messages per second of each and, last, their ratio.

With a Pipeline in FILE, every vertex runs in this process, each sink vertex
writing to blackhole, on in-memory buffers (--isb memory, the default) or on
JetStream (--isb jetstream, whose buffers are emptied before each run);
messages per second are those the sink vertices write.

flags:
`)
	var fl benchFlags
	fs.StringVar(&fl.file, "f", "", "the MonoVertex or Pipeline YAML (required)")
	fs.ConfigDurationVar(&fl.duration, "duration", 10*time.Second, "time to run each of off and on, split over the runs")
	fs.IntVar(&fl.runs, "runs", 10, "runs of each of off and on, alternating")
	fs.StringVar(&fl.udsDir, "uds-dir", "", "directory of the user-defined containers' sockets, created if missing (default /var/run/numaflow; with --spawn, /var/run/numaflow if no other sluice process uses it, else a new temporary directory)")
	fs.BoolVar(&fl.spawn, "spawn", false, "start each user-defined container's command as a child process, once for all runs")
	fs.StringVar(&fl.isb, "isb", "memory", "Pipeline only: the buffers, memory or jetstream")
	var variants string
	fs.StringVar(&variants, "variants", "", "also measure, in the same runs, the rate limit with a byte limit that never throttles (bytes) and with a cost expression that gives 1 (cost), and in a shared limit that never throttles (group), and with the status page open, /status/live served and polled once a second (live): a comma-separated list, and print each one's ratio to on")
	if err := fs.ParseArgs(args, stdout); err != nil {
		return fl, err
	}
	if variants != "" {
		fl.variants = strings.Split(variants, ",")
	}
	for _, v := range fl.variants {
		if !bench.IsNamed(v) {
			return fl, usagef("bench: --variants: %q is not a variant; want bytes, cost, group or live", v)
		}
	}
	switch {
	case fl.file == "":
		return fl, usagef("bench: -f FILE is required")
	case fl.runs < 1:
		return fl, usagef("bench: --runs (%d) must be at least 1", fl.runs)
	case fl.duration < time.Duration(fl.runs)*100*time.Millisecond:
		return fl, usagef("bench: --duration (%v) must give each run at least 100ms", fl.duration)
	case fl.isb != "memory" && fl.isb != "jetstream":
		return fl, usagef("bench: --isb %q: want memory or jetstream", fl.isb)
	}
	return fl, nil
}

// benchVariants measures off, on and fl.variants side by side and prints
// each one's rate and its ratio to on.
func benchVariants(t *bench.Target, fl benchFlags, each time.Duration, stdout, stderr io.Writer) error {
	var vs []bench.Variant
	for _, name := range fl.variants {
		v, _ := t.Named(name)
		vs = append(vs, v)
	}
	total := fl.runs * (len(vs) + 2)
	runs, err := t.CompareVariants(context.Background(), fl.runs, each, vs, func(run int, name string) {
		fmt.Fprintf(stderr, "\rbench: run %d of %d (%s, %v)...   ", run, total, name, each)
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr)
	names := append([]string{"off", "on"}, fl.variants...)
	for i, r := range runs {
		fmt.Fprintf(stdout, "%-6s %14.0f msg/s  (median of %d runs, %.0f messages)\n", names[i]+":", r.Median(), fl.runs, r.Messages)
	}
	fmt.Fprintf(stdout, "on/off ratio: %.3f\n", runs[1].Median()/runs[0].Median())
	for i, name := range fl.variants {
		fmt.Fprintf(stdout, "%s/on ratio: %.3f (run by run: %.3f)", name, runs[i+2].Median()/runs[1].Median(),
			runs[i+2].PairedRatio(runs[1]))
		if name == bench.VariantPage {
			fmt.Fprintf(stdout, ", %d answers of /status/live read", runs[i+2].Polls)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}
