package spawn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/pipeline/sideinputs"
)

// The pauses before a container that exited starts again, and the grace a
// stopped container has between SIGTERM and SIGKILL.
const (
	// firstPause is the pause after the first exit, and after an exit of a
	// container that ran longer than steadyRun.
	firstPause = 100 * time.Millisecond
	// longestPause bounds the pause, which doubles at each quick exit.
	longestPause = 5 * time.Second
	// steadyRun is how long a container runs for its next exit to be a first.
	steadyRun = 10 * time.Second
	// killAfter is the grace between SIGTERM and SIGKILL.
	killAfter = 5 * time.Second
)

// run is a container of a vertex and where it runs: the vertex's socket
// directory, the side inputs' directory ("" for none) and the environment it
// gets beside its own.
type run struct {
	c         container
	vertex    string
	dir, sdir string
	env       []string
}

// keepRunning runs r until the group stops, starting it again (after a
// growing pause) whenever it exits, once the files it left are removed
// (clearFiles).
func (g *Group) keepRunning(r run) {
	// The kernel signals a child when the thread that started it ends
	// (childProcAttr): keep this goroutine on one thread for the child's life.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	log, clk := g.d.Log, g.d.Clock
	pause := firstPause
	for g.ctx.Err() == nil {
		started := clk.Now()
		err := g.run(r)
		if g.ctx.Err() != nil {
			return
		}
		if clk.Now().Sub(started) > steadyRun {
			pause = firstPause
		}
		log.Warn("user-defined container exited; starting it again", zap.String("vertex", r.vertex), zap.String("container", r.c.role),
			zap.Error(err), zap.Duration("in", pause))
		if err := clearFiles(r.dir, r.c, log); err != nil {
			log.Warn("the vertex may read the server-info file of the container that exited", zap.String("container", r.c.role), zap.Error(err))
		}
		if !clock.Sleep(g.ctx, clk, pause) {
			return
		}
		pause = min(2*pause, longestPause)
	}
}

// run runs r once; when the group stops it sends SIGTERM, and SIGKILL
// killAfter later (for an engine's container, it removes the container).
func (g *Group) run(r run) error {
	cmd, name, err := g.command(r)
	if err != nil {
		return err
	}
	if name != "" {
		g.d.Engine.remove(context.WithoutCancel(g.ctx), name) // one a killed vertex left
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %v: %w", cmd.Args, err)
	}
	g.d.Log.Info("started user-defined container", zap.String("vertex", r.vertex), zap.String("container", r.c.role),
		zap.Strings("command", cmd.Args), zap.Int("pid", cmd.Process.Pid))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-g.ctx.Done():
		cmd.Process.Signal(syscall.SIGTERM)
		kill := g.d.Clock.AfterFunc(killAfter, func() {
			if name != "" {
				g.d.Engine.remove(context.Background(), name)
			}
			cmd.Process.Kill()
		})
		defer kill.Stop()
		return <-done
	}
}

// command is the command that runs r: its own command, in a mount namespace
// of its own when the group isolates, or the engine's run of its image,
// called name.
func (g *Group) command(r run) (cmd *exec.Cmd, name string, err error) {
	c := r.c
	env := append(slices.Clip(r.env), "NUMAFLOW_UD_CONTAINER_TYPE="+c.role)
	if c.image() {
		name = containerName(g.name, r.vertex, g.d.Replica, c.role)
		env = append(env, EnvUDSDir+"="+serverinfo.DefaultDir)
		if r.sdir != "" {
			env = append(env, sideinputs.EnvDir+"="+sideinputs.DefaultDir)
		}
		cmd = exec.Command(g.d.Engine.Path, g.d.Engine.runArgs(name, c, namespaceMounts(r.dir, r.sdir), env)...)
	} else {
		cmd = exec.Command(c.spec.Command[0], append(c.spec.Command[1:], c.spec.Args...)...)
		cmd.Env = append(append(os.Environ(), env...), EnvUDSDir+"="+r.dir)
		if g.d.SideInputsDir != "" {
			cmd.Env = append(cmd.Env, sideinputs.EnvDir+"="+g.d.SideInputsDir)
		}
		for _, e := range c.spec.Env {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
	}
	cmd.Stdout, cmd.Stderr = g.d.Stdout, g.d.Stderr
	cmd.SysProcAttr = childProcAttr()
	if g.d.Isolate && !c.image() {
		cmd, err = isolatedCommand(cmd, namespaceMounts(r.dir, r.sdir))
	}
	return cmd, name, err
}

// containerName is the engine's name of the container of role of replica of
// vertex of the pipeline or MonoVertex called pipeline, run by this process:
// the same for each of its runs, so that a run removes what the last left.
func containerName(pipeline, vertex string, replica int, role string) string {
	n := fmt.Sprintf("sluice-%s-%s-%d-%s-%d", pipeline, vertex, replica, role, os.Getpid())
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, n)
}
