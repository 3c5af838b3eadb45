package spawn

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/pipeline/sideinputs"
)

// EnvUDSDir tells sluice's SDK servers where to put their sockets; [Start]
// sets it for the containers it starts.
const EnvUDSDir = "SLUICE_UDS_DIR"

// Deps are what [Start] needs besides the config and the directory: which
// vertex and replica the containers serve, where their output and the logs go,
// and the clock of the pauses between restarts.
type Deps struct {
	// Only, for a Pipeline, starts the containers of this vertex alone, in the
	// directory given to Start; "" starts those of every vertex.
	Only string
	// Replica is the replica's index, $NUMAFLOW_REPLICA of the containers.
	Replica int
	// Stdout and Stderr receive the containers' output; nil discards it.
	Stdout, Stderr io.Writer
	// Log receives a line for each start, exit and file removed; nil: none.
	Log *zap.Logger
	// Clock times the pauses between restarts and the grace before SIGKILL;
	// nil is the wall clock.
	Clock clock.Clock
	// SideInputsManager, for a Pipeline, starts the containers of its side
	// inputs alone (vertex run --side-inputs-manager); without it, they start
	// with every vertex's (no Only).
	SideInputsManager bool
	// SideInputsDir, when set, is given to every container as
	// $SLUICE_SIDE_INPUTS_DIR: where sluice's SDK reads side-input files.
	// It (or sideinputs.DefaultDir) is created before the containers of a
	// vertex that names side inputs start, since a UDF may watch it from its
	// start (numaflow-go's examples do).
	SideInputsDir string
	// Commands starts the containers that have a command, each as a child
	// process (vertex run --spawn); without it they are left to the user.
	Commands bool
	// Isolate runs each container with a command in a mount namespace of its
	// own, its vertex's socket directory mounted over /var/run/numaflow and
	// the side inputs' over /var/numaflow/side-inputs ([Isolation] says
	// whether it can).
	Isolate bool
	// Engine, when set, runs the containers that have an image and no
	// command (vertex run --containers); without it they are left to the
	// user, unless Commands is set, which makes them an error
	// ([ErrNoCommand]).
	Engine *Engine
}

// Group is the user-defined containers that [Start] started, each kept
// running until [Group.Stop]. Its methods are safe for concurrent use.
type Group struct {
	d        Deps
	name     string // the pipeline's or MonoVertex's, in its engine containers' names
	cancel   context.CancelFunc
	ctx      context.Context
	wg       sync.WaitGroup
	stopOnce sync.Once
	orphans  sync.Once
}

// Start starts the user-defined containers of the vertices of f that run in
// this process: the MonoVertex's, or those of the pipeline vertex d.Only, in
// dir; or, without d.Only, those of every pipeline vertex, in the directories
// [pipeline.SocketDirs] gives (dir itself when one vertex has containers,
// else a directory of its own in dir for each), and those of the side inputs,
// in the directories [pipeline.SideInputSocketDirs] gives. Each directory is
// created when it is missing (a [*DirError] when it cannot be), and cleared
// of the files that servers of the containers' roles left there. Every container
// needs a command ([ErrNoCommand]). On an error, the containers already
// started are stopped.
func Start(f *config.File, dir string, d Deps) (*Group, error) {
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Clock == nil {
		d.Clock = clock.Real()
	}
	g := &Group{d: d, name: f.Name()}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	var err error
	if m := f.MonoVertex; m != nil {
		err = g.start(m.Metadata.Name, dir, "", containersOf(m.Spec.Source, m.Spec.UDF, m.Spec.Sink))
	}
	if p := f.Pipeline; p != nil {
		dirs := pipeline.SocketDirs(p, dir, d.Only)
		for _, v := range p.Spec.Vertices {
			vdir, ok := dirs[v.Name]
			if err != nil || !ok || d.SideInputsManager {
				continue
			}
			sdir := ""
			if len(v.SideInputs) > 0 {
				sdir, err = makeSideInputsDir(d.SideInputsDir)
			}
			if err == nil {
				err = g.start(v.Name, vdir, sdir, containersOf(v.Source, v.UDF, v.Sink))
			}
		}
		sdirs := pipeline.SideInputSocketDirs(p, dir)
		for _, si := range p.Spec.SideInputs {
			if err != nil || d.Only != "" {
				continue
			}
			err = g.start(si.Name, sdirs[si.Name], "", []container{sideInputContainer(si)})
		}
	}
	if err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

// start starts the containers of cs, a vertex's, that this group runs
// (runs), in dir, once it has removed the server-info files and stale sockets
// of their servers (clearFiles); sdir, when set, is the side inputs'
// directory the vertex's containers read.
func (g *Group) start(vertex, dir, sdir string, cs []container) error {
	cs = slices.DeleteFunc(cs, func(c container) bool { return !g.runs(c) })
	if len(cs) == 0 {
		return nil
	}
	for _, c := range cs {
		if len(c.spec.Command) == 0 && g.d.Engine == nil {
			return fmt.Errorf("vertex %s: the %s container has %w (image %q), and no container engine runs its image", vertex, c.role, ErrNoCommand, c.spec.Image)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &DirError{Dir: dir, Err: err}
	}
	if g.d.Engine != nil {
		// An image's server may run as any user.
		if err := os.Chmod(dir, 0o777); err != nil {
			return &DirError{Dir: dir, Err: err}
		}
	}
	if g.d.Engine != nil {
		g.orphans.Do(func() { g.d.Engine.removeOrphans(g.ctx) })
	}
	for _, c := range cs {
		if err := clearFiles(dir, c, g.d.Log); err != nil {
			return fmt.Errorf("vertex %s: the %s container: %w", vertex, c.role, err)
		}
		if c.image() {
			warn := func(err error) {
				g.d.Log.Warn("using the image present", zap.String("vertex", vertex), zap.String("container", c.role), zap.Error(err))
			}
			if err := g.d.Engine.ensure(g.ctx, c.spec.Image, c.spec.ImagePullPolicy, warn); err != nil {
				return fmt.Errorf("vertex %s: the %s container: %w", vertex, c.role, err)
			}
		}
	}
	env := []string{"NUMAFLOW_REPLICA=" + strconv.Itoa(g.d.Replica), "NUMAFLOW_MONO_VERTEX_NAME=" + vertex}
	for _, c := range cs {
		r := run{c: c, vertex: vertex, dir: dir, sdir: sdir, env: env}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.keepRunning(r)
		}()
	}
	return nil
}

// runs reports whether the group runs c: one with a command when it runs
// commands, one with an image alone when it has an engine, or when it runs
// commands (start then refuses it).
func (g *Group) runs(c container) bool {
	if c.image() {
		return g.d.Engine != nil || g.d.Commands
	}
	return g.d.Commands
}

// Stop stops every container, SIGTERM first and SIGKILL 5s later, and waits
// for them to exit. It is safe to call more than once.
func (g *Group) Stop() {
	g.stopOnce.Do(func() {
		g.cancel()
		g.wg.Wait()
	})
}

// makeSideInputsDir creates dir, or sideinputs.DefaultDir when dir is "",
// and returns it.
func makeSideInputsDir(dir string) (string, error) {
	if dir == "" {
		dir = sideinputs.DefaultDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cannot create %s, the side inputs' directory: %w", dir, err)
	}
	return dir, nil
}
