package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/sink"
)

func runBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", `usage: vertex bench -f FILE [--duration 10s]

Runs the MonoVertex in FILE with its sink replaced by blackhole, with its rate
limit removed ("off") and as configured ("on"), in alternating runs, and prints
the messages per second of each and, last, their ratio.

flags:
`)
	file := fs.String("f", "", "the MonoVertex YAML (required)")
	duration := fs.Duration("duration", 10*time.Second, "time to run each of off and on, split over the runs")
	runs := fs.Int("runs", 5, "runs of each of off and on, alternating")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	switch {
	case *file == "":
		return usagef("bench: -f FILE is required")
	case *runs < 1:
		return usagef("bench: --runs (%d) must be at least 1", *runs)
	case *duration < time.Duration(*runs)*100*time.Millisecond:
		return usagef("bench: --duration (%v) must give each run at least 100ms", *duration)
	}
	f, err := loadConfig(*file)
	if err != nil {
		return err
	}
	if f.MonoVertex == nil {
		return usagef("bench: %s is a Pipeline; bench runs a MonoVertex", *file)
	}
	if f.MonoVertex.Spec.Limits.GetRateLimit() == nil {
		fmt.Fprintf(stderr, "bench: %s has no rateLimit; off and on are the same\n", *file)
	}
	each := *duration / time.Duration(*runs)
	var total [2]struct {
		msgs    float64
		elapsed time.Duration
	}
	names := [2]string{"off", "on"}
	for i := range 2 * *runs {
		mode := i % 2
		fmt.Fprintf(stderr, "\rbench: run %d of %d (%s, %v)...   ", i+1, 2**runs, names[mode], each)
		msgs, elapsed, err := benchRun(f.MonoVertex, mode == 0, each)
		if err != nil {
			return err
		}
		total[mode].msgs += msgs
		total[mode].elapsed += elapsed
	}
	fmt.Fprintln(stderr)
	rate := func(m int) float64 { return total[m].msgs / total[m].elapsed.Seconds() }
	for m, name := range names {
		fmt.Fprintf(stdout, "%-4s %14.0f msg/s  (%d runs, %.0f messages)\n", name+":", rate(m), *runs, total[m].msgs)
	}
	fmt.Fprintf(stdout, "on/off ratio: %.3f\n", rate(1)/rate(0))
	return nil
}

// benchRun runs the MonoVertex for d with its sink a blackhole, and returns the
// messages it wrote and the time it took.
func benchRun(m *config.MonoVertex, noRateLimit bool, d time.Duration) (float64, time.Duration, error) {
	runtime.GC()
	mv, err := buildMonoVertex(m, runtimeOptions{sinkOverride: sink.Blackhole{}, noRateLimit: noRateLimit, stdout: io.Discard})
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	err = mv.run(ctx)
	return counterValue(mv.metrics.Written), time.Since(start), err
}
