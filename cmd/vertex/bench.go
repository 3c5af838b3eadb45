package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/sink"
)

func runBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", `usage: vertex bench -f FILE [--duration 10s]

Runs the MonoVertex in FILE with its sink replaced by blackhole, with its rate
limit removed ("off") and as configured ("on"), in alternating runs, and prints
the median messages per second of each and, last, their ratio.

With a Pipeline in FILE, every vertex runs in this process, each sink vertex
writing to blackhole, on in-memory buffers (--isb memory, the default) or on
JetStream (--isb jetstream, whose buffers are emptied before each run);
messages per second are those the sink vertices write.

flags:
`)
	file := fs.String("f", "", "the MonoVertex or Pipeline YAML (required)")
	duration := fs.Duration("duration", 10*time.Second, "time to run each of off and on, split over the runs")
	runs := fs.Int("runs", 10, "runs of each of off and on, alternating")
	udsDir := fs.String("uds-dir", "", "directory of the user-defined containers' sockets (default /var/run/numaflow; with --spawn, a new temporary directory)")
	spawn := fs.Bool("spawn", false, "start each user-defined container's command as a child process, once for all runs")
	isbKind := fs.String("isb", "memory", "Pipeline only: the buffers, memory or jetstream")
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
	case *isbKind != "memory" && *isbKind != "jetstream":
		return usagef("bench: --isb %q: want memory or jetstream", *isbKind)
	}
	f, err := loadConfig(*file)
	if err != nil {
		return err
	}
	target := benchTargetOf(f, *isbKind == "jetstream")
	if !target.rateLimited {
		fmt.Fprintf(stderr, "bench: %s has no rateLimit; off and on are the same\n", *file)
	}
	base := runtimeOptions{udsDir: *udsDir}
	if len(target.containers) > 0 && *spawn {
		if base.udsDir == "" {
			if base.udsDir, err = os.MkdirTemp("", "sluice-uds-"); err != nil {
				return err
			}
			defer os.RemoveAll(base.udsDir)
		}
		log, err := newLogger("warn", stderr)
		if err != nil {
			return err
		}
		for _, vc := range target.containers {
			dir := base.udsDir
			if f.Pipeline != nil {
				dir = filepath.Join(dir, vc.vertex)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
			}
			sp, err := startContainers(vc.containers, dir, vc.vertex, 0, io.Discard, stderr, log)
			if err != nil {
				return err
			}
			defer sp.stop()
		}
	}
	each := *duration / time.Duration(*runs)
	var rates [2][]float64
	var msgs [2]float64
	names := [2]string{"off", "on"}
	for i := range 2 * *runs {
		mode := i % 2
		fmt.Fprintf(stderr, "\rbench: run %d of %d (%s, %v)...   ", i+1, 2**runs, names[mode], each)
		o := base
		o.noRateLimit = mode == 0
		n, elapsed, err := benchRun(target.build, o, each)
		if err != nil {
			return err
		}
		rates[mode] = append(rates[mode], n/elapsed.Seconds())
		msgs[mode] += n
	}
	fmt.Fprintln(stderr)
	// Medians: on a shared machine one disturbed run should not decide.
	var med [2]float64
	for m, name := range names {
		med[m] = median(rates[m])
		fmt.Fprintf(stdout, "%-4s %14.0f msg/s  (median of %d runs, %.0f messages)\n", name+":", med[m], *runs, msgs[m])
	}
	fmt.Fprintf(stdout, "on/off ratio: %.3f\n", med[1]/med[0])
	return nil
}

// benched is what vertex bench runs: a MonoVertex or a whole pipeline.
type benched interface {
	run(ctx context.Context) error
	written() float64
}

// benchTarget is how to build what FILE describes, for each run.
type benchTarget struct {
	build       func(o runtimeOptions) (benched, error)
	rateLimited bool
	containers  []vertexContainers
}

// vertexContainers are a vertex's user-defined containers.
type vertexContainers struct {
	vertex     string
	containers []container
}

func benchTargetOf(f *config.File, onJetStream bool) benchTarget {
	if m := f.MonoVertex; m != nil {
		t := benchTarget{rateLimited: m.Spec.Limits.GetRateLimit() != nil,
			build: func(o runtimeOptions) (benched, error) { return buildMonoVertex(m, o) }}
		if cs := containersOf(m.Spec.Source, m.Spec.UDF, m.Spec.Sink); len(cs) > 0 {
			t.containers = []vertexContainers{{m.Metadata.Name, cs}}
		}
		return t
	}
	p := f.Pipeline
	t := benchTarget{build: func(o runtimeOptions) (benched, error) {
		ctx := context.Background()
		if onJetStream {
			if err := resetJetStreamBuffers(ctx, p, o.log); err != nil {
				return nil, err
			}
		}
		pr, err := buildPipeline(ctx, p, onJetStream, o)
		if err != nil {
			return nil, err
		}
		return closingRun{pr}, nil
	}}
	for _, v := range p.Spec.Vertices {
		if rl, _ := p.VertexRateLimit(v.Name); rl != nil {
			t.rateLimited = true
		}
		if cs := containersOf(v.Source, v.UDF, v.Sink); len(cs) > 0 {
			t.containers = append(t.containers, vertexContainers{v.Name, cs})
		}
	}
	return t
}

// closingRun closes a pipeline once it has run.
type closingRun struct{ *pipelineRun }

func (c closingRun) run(ctx context.Context) error {
	defer c.close()
	return c.pipelineRun.run(ctx, context.Background())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// benchWarmUp is how long a run goes on after its first write before it is
// measured, so that both modes are measured warm.
const benchWarmUp = 500 * time.Millisecond

// benchRun builds what is benched with o, its sinks blackholes, runs it and
// returns the messages it wrote in d, counted from benchWarmUp after its first
// write, and the time that took. Start-up is left out: a replica joining its
// pool takes no tokens before the next second, and while it waits the runtime
// hands memory back to the system, which the first moments of the run then
// take again.
func benchRun(build func(runtimeOptions) (benched, error), o runtimeOptions, d time.Duration) (float64, time.Duration, error) {
	runtime.GC()
	o.sinkOverride, o.stdout = sink.Blackhole{}, io.Discard
	if o.log == nil {
		o.log = zap.NewNop()
	}
	b, err := build(o)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.run(ctx) }()

	var from float64
	var start time.Time
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for waited := 0; from == 0; waited++ {
		select {
		case err := <-done:
			return 0, 0, fmt.Errorf("stopped before writing: %v", err)
		case <-tick.C:
		}
		if b.written() > 0 {
			time.Sleep(benchWarmUp)
			from, start = b.written(), time.Now()
		} else if waited > 10_000 {
			cancel()
			<-done
			return 0, 0, errors.New("nothing written in 10s")
		}
	}
	time.Sleep(d)
	msgs, elapsed := b.written()-from, time.Since(start)
	cancel()
	return msgs, elapsed, <-done
}
