//go:build linux

package spawn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// isolatedArg0 is the first argument of a re-exec of the binary that makes
// the mounts of a container's namespace and then runs its command
// ([Isolated]); envMounts carries the mounts.
const (
	isolatedArg0 = "sluice-isolated"
	envMounts    = "SLUICE_ISOLATED_MOUNTS"
	// probeCommand, as the command of a re-exec, makes the mounts and exits 0.
	probeCommand = "-probe"
)

// Isolated runs, in a process that is the re-exec [Start] makes of the
// binary for a container in a mount namespace of its own, what that process
// is for: it makes the namespace's mounts (its vertex's directories over
// /var/run/numaflow and /var/numaflow/side-inputs) and replaces itself with
// the container's command. It returns at once in any other process. A program
// that starts containers with [Start] calls it first thing in main, before
// flags are parsed (cmd/vertex does); where it does not, containers run
// without namespaces of their own ([Isolation] says so).
func Isolated() {
	if len(os.Args) < 2 || os.Args[0] != isolatedArg0 {
		return
	}
	if err := isolated(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "sluice: starting the container in a mount namespace of its own: %v\n", err)
		os.Exit(127)
	}
	os.Exit(0) // the probe
}

// isolated makes the mounts envMounts lists, private to this process's mount
// namespace, and runs path with argv (argv[0] its name), or returns for the
// probe.
func isolated(path string, argv []string) error {
	var mounts []mount
	if err := json.Unmarshal([]byte(os.Getenv(envMounts)), &mounts); err != nil {
		return fmt.Errorf("%s: %w", envMounts, err)
	}
	os.Unsetenv(envMounts)
	// Nothing mounted here is seen outside, nor the other way from now on.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			return fmt.Errorf("creating %s to mount %s over it: %w", m.Target, m.Source, err)
		}
		if err := syscall.Mount(m.Source, m.Target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("mounting %s over %s: %w", m.Source, m.Target, err)
		}
	}
	if path == probeCommand {
		return nil
	}
	return syscall.Exec(path, argv, os.Environ())
}

// mount is a directory of the host mounted over another in a container's
// namespace.
type mount struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// isolatedCommand returns cmd to run in a mount namespace of its own with
// mounts: a re-exec of this binary (Isolated) that makes them and then runs
// cmd's program, with cmd's arguments, environment (which must be set) and
// output.
func isolatedCommand(cmd *exec.Cmd, mounts []mount) (*exec.Cmd, error) {
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	path, err := filepath.Abs(cmd.Path)
	if err != nil {
		return nil, err
	}
	return reexec(append([]string{path}, cmd.Args...), cmd.Env, mounts, cmd)
}

// reexec is this binary run as isolatedArg0 with args, in a mount namespace
// of its own, with env and the mounts, its output that of out.
func reexec(args, env []string, mounts []mount, out *exec.Cmd) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(mounts)
	if err != nil {
		return nil, err
	}
	c := exec.Command(self)
	c.Args = append([]string{isolatedArg0}, args...)
	c.Env = append(slices.Clip(env), envMounts+"="+string(b))
	c.Dir, c.Stdout, c.Stderr = out.Dir, out.Stdout, out.Stderr
	c.SysProcAttr = namespaceProcAttr()
	return c, nil
}

// namespaceProcAttr is childProcAttr in a new mount namespace; a process not
// run by root gets a user namespace too, in which it is root with its own
// user and group mapped to themselves.
func namespaceProcAttr() *syscall.SysProcAttr {
	a := childProcAttr()
	a.Cloneflags = syscall.CLONE_NEWNS
	if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	return a
}

var (
	isolationOnce sync.Once
	isolationErr  error
)

// Isolation reports, once per process, whether the containers [Start] runs
// with a command can have mount namespaces of their own here: nil when a
// probe (a re-exec that mounts a directory over /var/run/numaflow and over
// /var/numaflow/side-inputs in a namespace of its own) succeeds, else why
// not. It needs root, or a kernel that lets this user make a user namespace,
// and a program that calls [Isolated] first.
func Isolation() error {
	isolationOnce.Do(func() { isolationErr = probeIsolation() })
	return isolationErr
}

func probeIsolation() error {
	dir, err := os.MkdirTemp("", "sluice-isolation-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var out bytes.Buffer
	probe, err := reexec([]string{probeCommand}, os.Environ(), namespaceMounts(dir, dir), &exec.Cmd{Stdout: &out, Stderr: &out})
	if err != nil {
		return err
	}
	if err := probe.Run(); err != nil {
		if out.Len() > 0 {
			return errors.New(firstLineOf(out.Bytes()))
		}
		if errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("this user may not make a mount namespace (run as root, or where the kernel allows unprivileged user namespaces): %w", err)
		}
		return err
	}
	return nil
}
