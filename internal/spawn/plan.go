package spawn

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/serverinfo"
)

// Choice is what a process asks of its user-defined containers: the flags of
// vertex run that concern them.
type Choice struct {
	// Only, for a Pipeline, is the vertex that runs alone ("": every one).
	Only string
	// SideInputsManager: the process runs a pipeline's side inputs alone.
	SideInputsManager bool
	// Dir is the socket directory the user gave ("": none).
	Dir string
	// Commands starts the containers that have a command (--spawn).
	Commands bool
	// Engine is podman, docker, none, or "" for the first that can run
	// containers here, or none when Dir is given (the servers run on their
	// own there); it runs the containers with an image and no command.
	Engine string
	// SideInputsDir is the side inputs' directory the user gave ("": none).
	SideInputsDir string
	Log           *zap.Logger
}

// Plan is how a process runs the user-defined containers of its vertices.
type Plan struct {
	// Dir is the socket directory of the process's vertices: Choice.Dir when
	// given; a new private directory when the process starts containers in
	// namespaces or with an engine; /var/run/numaflow otherwise.
	Dir string
	// SideInputsDir is where the vertices read side inputs: Choice's, else,
	// when the containers have directories of their own, a private one.
	SideInputsDir string
	// Deps say what Start starts; Start is false when it starts nothing.
	Deps  Deps
	Start bool
	// How says, for a log line, how the containers run.
	How string
	// Release removes the private directories, or unlocks
	// /var/run/numaflow.
	Release func()
}

// SharedDirError is the error of [Choose] for vertices whose containers
// would share /var/run/numaflow: they cannot have mount namespaces of their
// own here.
type SharedDirError struct {
	Vertices []string
	// Why says why there are no namespaces, or who holds the directory.
	Why error
}

func (e *SharedDirError) Error() string {
	return fmt.Sprintf("the containers of %s would share %s, which their servers may be the only directory they know: "+
		"they cannot have mount namespaces of their own here (%v); run as root (or where the kernel allows unprivileged user namespaces), "+
		"give the containers images for --containers podman or docker, run each vertex as a process of its own (--vertex NAME), "+
		"or, for servers that find their directory in $%s (sluice's SDK), give --uds-dir DIR",
		strings.Join(e.Vertices, ", "), serverinfo.DefaultDir, e.Why, EnvUDSDir)
}

func (e *SharedDirError) Unwrap() error { return e.Why }

// Choose decides, for the containers of f that c's process runs, where their
// sockets go and how they start: the containers with a command (c.Commands)
// as child processes, each in a mount namespace of its own where [Isolation]
// allows; those with an image alone with the engine. Without namespaces, the
// containers of one vertex with a command get /var/run/numaflow, locked for
// the process's life, and more than one such vertex, or a directory another
// sluice process holds, is a [*SharedDirError]. An engine named that cannot
// run here is an error too; the default finds none quietly.
func Choose(ctx context.Context, f *config.File, c Choice) (Plan, error) {
	return choose(ctx, f, c, Isolation, serverinfo.DefaultDir)
}

// choose is Choose with isolation telling whether namespaces can be had and
// fixed the directory servers know.
func choose(ctx context.Context, f *config.File, c Choice, isolation func() error, fixed string) (Plan, error) {
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	p := Plan{Dir: c.Dir, SideInputsDir: c.SideInputsDir, Release: func() {}}
	commands, images := vertices(f, c.Only, c.SideInputsManager)
	if c.Engine == "" && c.Dir != "" {
		c.Engine = "none"
	}
	if !c.Commands {
		commands = nil
	}
	if len(images) > 0 && c.Engine != "none" {
		e, err := FindEngine(ctx, c.Engine)
		switch {
		case err != nil && c.Engine != "":
			return p, err
		case err != nil:
			c.Log.Warn("the containers with an image alone are left to run on their own: "+err.Error(), zap.Strings("vertices", images))
		}
		p.Deps.Engine = e
	}
	p.Deps.Commands = c.Commands
	p.Start = len(commands) > 0 || (p.Deps.Engine != nil && len(images) > 0) || (c.Commands && len(images) > 0)
	if !p.Start {
		if p.Dir == "" {
			p.Dir = fixed
		}
		return p, nil
	}
	var hows []string
	if len(commands) > 0 {
		isoErr := isolation()
		p.Deps.Isolate = isoErr == nil
		switch {
		case p.Deps.Isolate:
			hows = append(hows, "commands in mount namespaces of their own")
		case p.Dir != "":
			hows = append(hows, "commands in "+p.Dir)
		case len(commands) > 1:
			return p, &SharedDirError{Vertices: commands, Why: isoErr}
		default:
			unlock, err := lockDir(fixed)
			if err != nil {
				return p, &SharedDirError{Vertices: commands, Why: fmt.Errorf("%v; and %w", isoErr, err)}
			}
			p.Dir, p.Release = fixed, unlock
			hows = append(hows, "commands in "+fixed)
		}
	}
	if p.Deps.Engine != nil && len(images) > 0 {
		hows = append(hows, "images with "+p.Deps.Engine.Name)
	}
	p.How = strings.Join(hows, ", ")
	if p.Dir != "" {
		return p, nil
	}
	dir, err := os.MkdirTemp("", "sluice-uds-")
	if err != nil {
		return p, err
	}
	p.Dir = dir
	p.Release = func() { os.RemoveAll(dir) }
	if p.SideInputsDir == "" && hasSideInputs(f, c.Only) {
		sdir, err := os.MkdirTemp("", "sluice-side-inputs-")
		if err != nil {
			p.Release()
			return p, err
		}
		p.SideInputsDir = sdir
		p.Release = func() { os.RemoveAll(dir); os.RemoveAll(sdir) }
	}
	return p, nil
}

// vertices lists the vertices of f whose containers c's process runs that
// have a container with a command, and those that have one with an image
// alone.
func vertices(f *config.File, only string, sideInputsManager bool) (commands, images []string) {
	add := func(name string, cs []container) {
		var cmd, img bool
		for _, c := range cs {
			cmd, img = cmd || !c.image(), img || c.image()
		}
		if cmd {
			commands = append(commands, name)
		}
		if img {
			images = append(images, name)
		}
	}
	if m := f.MonoVertex; m != nil {
		add(m.Metadata.Name, containersOf(m.Spec.Source, m.Spec.UDF, m.Spec.Sink))
	}
	if p := f.Pipeline; p != nil {
		for _, v := range p.Spec.Vertices {
			if !sideInputsManager && (only == "" || only == v.Name) {
				add(v.Name, containersOf(v.Source, v.UDF, v.Sink))
			}
		}
		for _, si := range p.Spec.SideInputs {
			if only == "" {
				add(si.Name, []container{sideInputContainer(si)})
			}
		}
	}
	return commands, images
}

// hasSideInputs reports whether a vertex of f that runs in the process
// names side inputs.
func hasSideInputs(f *config.File, only string) bool {
	if f.Pipeline == nil {
		return false
	}
	for _, v := range f.Pipeline.Spec.Vertices {
		if (only == "" || only == v.Name) && len(v.SideInputs) > 0 {
			return true
		}
	}
	return false
}

// Describe says, for vertex validate, how vertex run runs the containers of
// the vertices of f that would share a socket directory on one machine: in
// mount namespaces, with an engine, or refused, and why.
func Describe(ctx context.Context, f *config.File) string {
	commands, images := vertices(f, "", false)
	if f.Pipeline != nil {
		commands = pipelineOnly(f.Pipeline, commands)
	}
	var parts []string
	if len(commands) > 1 {
		if err := Isolation(); err != nil {
			parts = append(parts, fmt.Sprintf("with --spawn, the commands of %s would share %s and are refused here (%v)", strings.Join(commands, ", "), serverinfo.DefaultDir, err))
		} else {
			parts = append(parts, fmt.Sprintf("with --spawn, the commands of %s run in mount namespaces of their own", strings.Join(commands, ", ")))
		}
	}
	if len(images) > 0 {
		if e, err := FindEngine(ctx, ""); err == nil {
			parts = append(parts, fmt.Sprintf("the images of %s run with %s", strings.Join(images, ", "), e.Name))
		} else {
			parts = append(parts, fmt.Sprintf("the images of %s are left to run on their own (%v)", strings.Join(images, ", "), err))
		}
	}
	return strings.Join(parts, "; ")
}

// pipelineOnly keeps the names of names that are vertices of p.
func pipelineOnly(p *config.Pipeline, names []string) []string {
	var out []string
	for _, n := range names {
		if p.Vertex(n) != nil {
			out = append(out, n)
		}
	}
	return out
}
