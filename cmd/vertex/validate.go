package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/spawn"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

func runValidate(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("validate", `usage: vertex validate -f FILE [--live-from RUNNING]

Checks a MonoVertex or Pipeline YAML: prints a one-line summary and exits 0, or
prints every problem with its path and line and exits 2. What the file allows
but is likely a mistake (vertices no source reaches) is a warning on stderr
beside the summary. With --live-from, it
also checks that replicas running RUNNING would take FILE on without a restart
(vertex run applies such a change of its file live): only the max, min,
rampUpDuration, modes and shadow of rate limits differ. Otherwise it names the
first field that differs and exits 2.

flags:
`)
	file := fs.String("f", "", "the YAML to check (required)")
	from := fs.String("live-from", "", "the YAML the replicas run now, to check FILE against as a live change")
	if err := fs.ParseArgs(args, stdout); err != nil {
		return err
	}
	if *file == "" {
		return usagef("validate: -f FILE is required")
	}
	f, err := cli.LoadConfig(*file)
	if err != nil {
		return err
	}
	for _, w := range f.Warnings {
		fmt.Fprintf(stderr, "vertex: warning: %s: %s\n", *file, w)
	}
	if *from != "" {
		running, err := cli.LoadConfig(*from)
		if err != nil {
			return usagef("validate: --live-from (%q): %v", *from, err)
		}
		if err := vertexconfig.LiveChange(running, f); err != nil {
			return usagef("validate: %s is not a live change from %s: %v", *file, *from, err)
		}
		fmt.Fprintf(stdout, "%s: %s %q is valid, a live change from %s%s\n", *file, f.Kind, f.Name(), *from, summary(f))
		return nil
	}
	fmt.Fprintf(stdout, "%s: %s %q is valid%s\n", *file, f.Kind, f.Name(), summary(f))
	if how := spawn.Describe(context.Background(), f); how != "" {
		fmt.Fprintf(stdout, "%s: vertex run: %s\n", *file, how)
	}
	return nil
}

// summary is what vertex validate says of a valid config after its name: its
// [vertexconfig.Summary] in parentheses, and how many Kubernetes-only fields it
// ignores.
//
//	(generator → blackhole; rate limit 1000/s from 1000 over 0s, relaxed); 2 Kubernetes-only field(s) ignored
func summary(f *config.File) string {
	s := " (" + vertexconfig.Summary(f) + ")"
	if n := len(f.Ignored); n > 0 {
		s += fmt.Sprintf("; %d Kubernetes-only field(s) ignored", n)
	}
	return s
}
