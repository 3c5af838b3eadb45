package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

func runValidate(args []string, stdout, _ io.Writer) error {
	fs := newFlagSet("validate", `usage: vertex validate -f FILE [--live-from RUNNING]

Checks a MonoVertex or Pipeline YAML: prints a one-line summary and exits 0, or
prints every problem with its path and line and exits 2. With --live-from, it
also checks that replicas running RUNNING would take FILE on without a restart
(vertex run applies such a change of its file live): only the max, min,
rampUpDuration, modes and shadow of rate limits differ. Otherwise it names the
first field that differs and exits 2.

flags:
`)
	file := fs.String("f", "", "the YAML to check (required)")
	from := fs.String("live-from", "", "the YAML the replicas run now, to check FILE against as a live change")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	if *file == "" {
		return usagef("validate: -f FILE is required")
	}
	f, err := loadConfig(*file)
	if err != nil {
		return err
	}
	if *from != "" {
		running, err := loadConfig(*from)
		if err != nil {
			return usagef("validate: --live-from (%q): %v", *from, err)
		}
		if err := running.LiveChange(f); err != nil {
			return usagef("validate: %s is not a live change from %s: %v", *file, *from, err)
		}
		fmt.Fprintf(stdout, "%s: %s %q is valid, a live change from %s%s\n", *file, f.Kind, f.Name(), *from, summary(f))
		return nil
	}
	fmt.Fprintf(stdout, "%s: %s %q is valid%s\n", *file, f.Kind, f.Name(), summary(f))
	return nil
}

// summary describes a valid config in a few words: for a MonoVertex, its
// source, transformer, UDF and sink in order, each user-defined container named
// by its image (or its command when it has no image), and its rate limit; for a
// Pipeline, the same for each vertex.
//
//	(udsource my/source:v1 → transformer my/tr:v1 → udf my/map:v1 → udsink my/sink:v1, fallback log; rate limit 20/s from 5 over 5s, relaxed)
//	(generator → udf my/map:v1 → blackhole; streaming, 500 in flight)
//	(generator → blackhole; rate limit 1000/s from 1000 over 0s, relaxed, per key 50/s)
//	(3 vertices, 2 edges; in: generator; cat: udf my/map:v1; out: log)
func summary(f *config.File) string {
	s := ""
	if m := f.MonoVertex; m != nil {
		spec := &m.Spec
		s = " (" + flow(spec.Source, spec.UDF, spec.Sink)
		if rl := spec.Limits.GetRateLimit(); rl != nil {
			c := rl.LimiterConfig()
			s += fmt.Sprintf("; rate limit %d/s from %d over %v, %s", c.Max, c.Min, c.RampUpDuration, c.Mode)
			if rl.IsShadow() {
				s += ", shadow"
			}
			s += perKeySummary(rl)
		}
		if spec.Streaming != nil && *spec.Streaming {
			s += fmt.Sprintf("; streaming, %d in flight", spec.Limits.GetConcurrency())
		}
		s += ")"
	} else {
		spec := &f.Pipeline.Spec
		s = fmt.Sprintf(" (%d vertices, %d edges", len(spec.Vertices), len(spec.Edges))
		for _, v := range spec.Vertices {
			s += "; " + v.Name + ": " + flow(v.Source, v.UDF, v.Sink)
		}
		s += ")"
	}
	if n := len(f.Ignored); n > 0 {
		s += fmt.Sprintf("; %d Kubernetes-only field(s) ignored", n)
	}
	return s
}

// flow describes what a vertex runs, in order; any of its parts may be nil.
func flow(src *config.Source, udf *config.UDF, sink *config.Sink) string {
	var steps []string
	if src != nil {
		steps = append(steps, sourceKind(src))
		if tr := src.Transformer; tr != nil {
			steps = append(steps, function("transformer", tr.Container, tr.Builtin))
		}
	}
	if udf != nil {
		steps = append(steps, function("udf", udf.Container, udf.Builtin))
	}
	if sink != nil {
		s := sinkKind(&sink.AbstractSink)
		if sink.Fallback != nil {
			s += ", fallback " + sinkKind(sink.Fallback)
		}
		steps = append(steps, s)
	}
	return strings.Join(steps, " → ")
}

func sourceKind(s *config.Source) string {
	switch {
	case s.Generator != nil:
		return "generator"
	case s.HTTP != nil:
		return "http"
	case s.Kafka != nil:
		return "kafka " + s.Kafka.Topic
	case s.Nats != nil:
		return "nats " + s.Nats.Subject
	case s.JetStream != nil:
		return "jetstream " + s.JetStream.Stream
	default:
		return userDefined("udsource", s.UDSource)
	}
}

func sinkKind(s *config.AbstractSink) string {
	switch {
	case s.Log != nil:
		return "log"
	case s.Blackhole != nil:
		return "blackhole"
	case s.Kafka != nil:
		return "kafka " + s.Kafka.Topic
	case s.HTTP != nil:
		return "http " + s.HTTP.URL
	default:
		return userDefined("udsink", s.UDSink)
	}
}

// function names a built-in by its name, and a container as what it is.
func function(what string, c *config.Container, b *config.Builtin) string {
	if b != nil {
		return b.Name
	}
	return describeContainer(what, c)
}

func userDefined(what string, u *config.UDContainer) string {
	if u == nil {
		return what
	}
	return describeContainer(what, u.Container)
}

// describeContainer is what followed by the container's image, or by its command line
// when it has no image (quoted when it has spaces).
func describeContainer(what string, c *config.Container) string {
	if c == nil {
		return what
	}
	if c.Image != "" {
		return what + " " + c.Image
	}
	cmd := strings.Join(append(slices.Clip(c.Command), c.Args...), " ")
	if strings.ContainsAny(cmd, " \t") {
		cmd = strconv.Quote(cmd)
	}
	return what + " " + cmd
}

// perKeySummary describes a rate limit's per-key limit, if any: ", per key
// 50/s", and "of all keys" when the whole key list counts.
func perKeySummary(rl *config.RateLimit) string {
	if rl.PerKey == nil {
		return ""
	}
	s := fmt.Sprintf(", per key %d/s", rl.KeyConfig().Max)
	if rl.PerKey.GetKeys() == ratelimit.AllKeys {
		s += " of all keys"
	}
	return s
}
