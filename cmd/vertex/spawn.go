package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/serverinfo"
)

// EnvUDSDir tells sluice's SDK servers where to put their sockets; `vertex run
// --spawn` sets it for the containers it starts.
const EnvUDSDir = "SLUICE_UDS_DIR"

// container is a user-defined container of a vertex and the role it plays.
type container struct {
	role string // NUMAFLOW_UD_CONTAINER_TYPE: udsource, transformer, udf, udsink, fb-udsink
	spec *config.Container
}

// roleKinds are the kinds of server a container of each role may run: their
// server-info files and sockets in the socket directory are the container's.
var roleKinds = map[string][]serverinfo.Kind{
	"udsource":    {serverinfo.KindSource},
	"transformer": {serverinfo.KindSourceTransformer},
	"udf":         {serverinfo.KindMap, serverinfo.KindBatchMap, serverinfo.KindMapStream},
	"udsink":      {serverinfo.KindSink},
	"fb-udsink":   {serverinfo.KindFallbackSink},
}

// containersOf lists the user-defined containers of a vertex with source, udf
// and sink (each may be nil).
func containersOf(src *config.Source, u *config.UDF, snk *config.Sink) []container {
	var out []container
	if src != nil && src.UDSource != nil {
		out = append(out, container{"udsource", src.UDSource.Container})
	}
	if src != nil && src.Transformer != nil && src.Transformer.Container != nil {
		out = append(out, container{"transformer", src.Transformer.Container})
	}
	if u != nil && u.Container != nil {
		out = append(out, container{"udf", u.Container})
	}
	if snk != nil && snk.UDSink != nil {
		out = append(out, container{"udsink", snk.UDSink.Container})
	}
	if snk != nil && snk.Fallback != nil && snk.Fallback.UDSink != nil {
		out = append(out, container{"fb-udsink", snk.Fallback.UDSink.Container})
	}
	return out
}

// spawnFile starts the user-defined containers of the vertices of f that run
// in this process: the MonoVertex's, or those of the pipeline vertex only, in
// dir; or, without only, those of every pipeline vertex, in the directories
// pipeline.SocketDirs gives (dir itself when one vertex has containers, else a
// directory of its own in dir for each), created if missing. stop stops them
// all.
func spawnFile(f *config.File, only, dir string, replica int, stdout, stderr io.Writer, log *zap.Logger) (stop func(), err error) {
	var sps []*spawner
	stop = func() {
		for _, sp := range sps {
			sp.stop()
		}
	}
	start := func(vertex, dir string, cs []container) error {
		if len(cs) == 0 {
			return nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return usagef("cannot create %s, the user-defined containers' socket directory (%v); --uds-dir chooses another", dir, err)
		}
		sp, err := startContainers(cs, dir, vertex, replica, stdout, stderr, log)
		if err == nil {
			sps = append(sps, sp)
		}
		return err
	}
	if m := f.MonoVertex; m != nil {
		err = start(m.Metadata.Name, dir, containersOf(m.Spec.Source, m.Spec.UDF, m.Spec.Sink))
	}
	if p := f.Pipeline; p != nil {
		dirs := pipeline.SocketDirs(p, dir, only)
		for _, v := range p.Spec.Vertices {
			vdir, ok := dirs[v.Name]
			if err != nil || !ok {
				continue
			}
			err = start(v.Name, vdir, containersOf(v.Source, v.UDF, v.Sink))
		}
	}
	if err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

func pipelineVertices(f *config.File) []config.Vertex {
	if f.Pipeline == nil {
		return nil
	}
	return f.Pipeline.Spec.Vertices
}

// spawner runs a vertex's user-defined containers as child processes, for local
// development, restarting one that exits as Kubernetes would, until stopped.
type spawner struct {
	log    *zap.Logger
	stdout io.Writer
	stderr io.Writer
	dir    string   // the socket directory
	env    []string // added to every child's environment
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startContainers starts every container of cs in dir, once it has removed
// the server-info files and stale sockets of their servers (clearFiles). A
// container needs a command.
func startContainers(cs []container, dir, vertex string, replica int, stdout, stderr io.Writer, log *zap.Logger) (*spawner, error) {
	for _, c := range cs {
		if len(c.spec.Command) == 0 {
			return nil, usagef("--spawn: the %s container has no command to run (image %q)", c.role, c.spec.Image)
		}
	}
	for _, c := range cs {
		if err := clearFiles(dir, c, log); err != nil {
			return nil, fmt.Errorf("--spawn: the %s container: %w", c.role, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &spawner{log: log, stdout: stdout, stderr: stderr, cancel: cancel, dir: dir,
		env: []string{EnvUDSDir + "=" + dir, "NUMAFLOW_REPLICA=" + strconv.Itoa(replica), "NUMAFLOW_MONO_VERTEX_NAME=" + vertex}}
	for _, c := range cs {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.keepRunning(ctx, c)
		}()
	}
	return s, nil
}

// keepRunning runs c until ctx ends, starting it again (after a growing pause)
// whenever it exits, once the files it left are removed (clearFiles).
func (s *spawner) keepRunning(ctx context.Context, c container) {
	// The kernel signals a child when the thread that started it ends
	// (childProcAttr): keep this goroutine on one thread for the child's life.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		err := s.run(ctx, c)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 10*time.Second {
			pause = 100 * time.Millisecond
		}
		s.log.Warn("user-defined container exited; starting it again", zap.String("container", c.role),
			zap.Error(err), zap.Duration("in", pause))
		if err := clearFiles(s.dir, c, s.log); err != nil {
			s.log.Warn("the vertex may read the server-info file of the container that exited", zap.String("container", c.role), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// run runs c once; when ctx ends it sends SIGTERM, and SIGKILL 5s later.
func (s *spawner) run(ctx context.Context, c container) error {
	cmd := exec.Command(c.spec.Command[0], append(c.spec.Command[1:], c.spec.Args...)...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Env = append(cmd.Env, "NUMAFLOW_UD_CONTAINER_TYPE="+c.role)
	for _, e := range c.spec.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %v: %w", cmd.Args, err)
	}
	s.log.Info("started user-defined container", zap.String("container", c.role), zap.Strings("command", cmd.Args), zap.Int("pid", cmd.Process.Pid))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			return <-done
		}
	}
}

// stop stops every container and waits for them.
func (s *spawner) stop() error {
	s.cancel()
	s.wg.Wait()
	return nil
}
