package spawn

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/sideinput"
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
	// It (or sideinput.DefaultDir) is created before the containers of a
	// vertex that names side inputs start, since a UDF may watch it from its
	// start (numaflow-go's examples do).
	SideInputsDir string
}

// Group is the user-defined containers that [Start] started, each kept
// running until [Group.Stop]. Its methods are safe for concurrent use.
type Group struct {
	d        Deps
	cancel   context.CancelFunc
	ctx      context.Context
	wg       sync.WaitGroup
	stopOnce sync.Once
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
	g := &Group{d: d}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	var err error
	if m := f.MonoVertex; m != nil {
		err = g.start(m.Metadata.Name, dir, containersOf(m.Spec.Source, m.Spec.UDF, m.Spec.Sink))
	}
	if p := f.Pipeline; p != nil {
		dirs := pipeline.SocketDirs(p, dir, d.Only)
		for _, v := range p.Spec.Vertices {
			vdir, ok := dirs[v.Name]
			if err != nil || !ok || d.SideInputsManager {
				continue
			}
			if len(v.SideInputs) > 0 {
				err = makeSideInputsDir(d.SideInputsDir)
			}
			if err == nil {
				err = g.start(v.Name, vdir, containersOf(v.Source, v.UDF, v.Sink))
			}
		}
		sdirs := pipeline.SideInputSocketDirs(p, dir)
		for _, si := range p.Spec.SideInputs {
			if err != nil || d.Only != "" {
				continue
			}
			err = g.start(si.Name, sdirs[si.Name], []container{sideInputContainer(si)})
		}
	}
	if err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

// start starts every container of cs, a vertex's, in dir, once it has
// removed the server-info files and stale sockets of their servers
// (clearFiles).
func (g *Group) start(vertex, dir string, cs []container) error {
	if len(cs) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &DirError{Dir: dir, Err: err}
	}
	for _, c := range cs {
		if len(c.spec.Command) == 0 {
			return fmt.Errorf("the %s container has %w (image %q)", c.role, ErrNoCommand, c.spec.Image)
		}
	}
	for _, c := range cs {
		if err := clearFiles(dir, c, g.d.Log); err != nil {
			return fmt.Errorf("the %s container: %w", c.role, err)
		}
	}
	env := []string{EnvUDSDir + "=" + dir, "NUMAFLOW_REPLICA=" + strconv.Itoa(g.d.Replica), "NUMAFLOW_MONO_VERTEX_NAME=" + vertex}
	if g.d.SideInputsDir != "" {
		env = append(env, sideinput.EnvDir+"="+g.d.SideInputsDir)
	}
	for _, c := range cs {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.keepRunning(c, dir, env)
		}()
	}
	return nil
}

// Stop stops every container, SIGTERM first and SIGKILL 5s later, and waits
// for them to exit. It is safe to call more than once.
func (g *Group) Stop() {
	g.stopOnce.Do(func() {
		g.cancel()
		g.wg.Wait()
	})
}

// makeSideInputsDir creates dir, or sideinput.DefaultDir when dir is "".
func makeSideInputsDir(dir string) error {
	if dir == "" {
		dir = sideinput.DefaultDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s, the side inputs' directory: %w", dir, err)
	}
	return nil
}
