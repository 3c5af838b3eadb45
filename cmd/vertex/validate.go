package main

import (
	"fmt"
	"io"

	"github.com/sluiceflow/sluice/config"
)

func runValidate(args []string, stdout, _ io.Writer) error {
	fs := newFlagSet("validate", `usage: vertex validate -f FILE

Checks a MonoVertex or Pipeline YAML: prints a one-line summary and exits 0, or
prints every problem with its path and line and exits 2.

flags:
`)
	file := fs.String("f", "", "the YAML to check (required)")
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
	fmt.Fprintf(stdout, "%s: %s %q is valid%s\n", *file, f.Kind, f.Name(), summary(f))
	return nil
}

// summary describes a valid config in a few words.
func summary(f *config.File) string {
	s := ""
	if m := f.MonoVertex; m != nil {
		spec := &m.Spec
		s = fmt.Sprintf(" (%s", sourceKind(spec.Source))
		if spec.UDF != nil && spec.UDF.Builtin != nil {
			s += " → " + spec.UDF.Builtin.Name
		}
		s += " → " + sinkKind(&spec.Sink.AbstractSink)
		if rl := spec.Limits.GetRateLimit(); rl != nil {
			c := rl.LimiterConfig()
			s += fmt.Sprintf("; rate limit %d/s from %d over %v, %s", c.Max, c.Min, c.RampUpDuration, c.Mode)
		}
		s += ")"
	} else {
		s = fmt.Sprintf(" (%d vertices, %d edges)", len(f.Pipeline.Spec.Vertices), len(f.Pipeline.Spec.Edges))
	}
	if n := len(f.Ignored); n > 0 {
		s += fmt.Sprintf("; %d Kubernetes-only field(s) ignored", n)
	}
	return s
}

func sourceKind(s *config.Source) string {
	switch {
	case s.Generator != nil:
		return "generator"
	case s.HTTP != nil:
		return "http"
	default:
		return "udsource"
	}
}

func sinkKind(s *config.AbstractSink) string {
	switch {
	case s.Log != nil:
		return "log"
	case s.Blackhole != nil:
		return "blackhole"
	default:
		return "udsink"
	}
}
