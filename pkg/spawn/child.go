package spawn

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
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

// keepRunning runs c in dir, with env beside the process's, until the group
// stops, starting it again (after a growing pause) whenever it exits, once
// the files it left are removed (clearFiles).
func (g *Group) keepRunning(c container, dir string, env []string) {
	// The kernel signals a child when the thread that started it ends
	// (childProcAttr): keep this goroutine on one thread for the child's life.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	log, clk := g.d.Log, g.d.Clock
	pause := firstPause
	for g.ctx.Err() == nil {
		started := clk.Now()
		err := g.run(c, env)
		if g.ctx.Err() != nil {
			return
		}
		if clk.Now().Sub(started) > steadyRun {
			pause = firstPause
		}
		log.Warn("user-defined container exited; starting it again", zap.String("container", c.role),
			zap.Error(err), zap.Duration("in", pause))
		if err := clearFiles(dir, c, log); err != nil {
			log.Warn("the vertex may read the server-info file of the container that exited", zap.String("container", c.role), zap.Error(err))
		}
		if !clock.Sleep(g.ctx, clk, pause) {
			return
		}
		pause = min(2*pause, longestPause)
	}
}

// run runs c once; when the group stops it sends SIGTERM, and SIGKILL
// killAfter later.
func (g *Group) run(c container, env []string) error {
	cmd := exec.Command(c.spec.Command[0], append(c.spec.Command[1:], c.spec.Args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "NUMAFLOW_UD_CONTAINER_TYPE="+c.role)
	for _, e := range c.spec.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Stdout, cmd.Stderr = g.d.Stdout, g.d.Stderr
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %v: %w", cmd.Args, err)
	}
	g.d.Log.Info("started user-defined container", zap.String("container", c.role), zap.Strings("command", cmd.Args), zap.Int("pid", cmd.Process.Pid))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-g.ctx.Done():
		cmd.Process.Signal(syscall.SIGTERM)
		kill := g.d.Clock.AfterFunc(killAfter, func() { cmd.Process.Kill() })
		defer kill.Stop()
		return <-done
	}
}
