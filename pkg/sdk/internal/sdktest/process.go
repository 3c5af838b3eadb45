package sdktest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
)

// Build builds the main package in the test's working directory (the
// package under test) and returns the path of the binary. It skips the test
// when no go command is available.
func Build(t testing.TB) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the example with")
	}
	bin := filepath.Join(t.TempDir(), "example")
	cmd := exec.Command(goCmd, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Process is a server binary running as a child process.
type Process struct {
	Dir  string
	Kind serverinfo.Kind
	Info serverinfo.ServerInfo
	Conn *grpc.ClientConn

	cmd    *exec.Cmd
	stdout runtest.Buffer
	stderr runtest.Buffer
	exited chan struct{}
	err    error
}

// StartProcess starts bin with SLUICE_UDS_DIR set to a new socket directory
// and env added to its environment, waits until its server-info file for
// kind appears, and dials its socket. The process is killed, if still
// running, when the test ends.
func StartProcess(t testing.TB, bin string, kind serverinfo.Kind, env ...string) *Process {
	t.Helper()
	p := &Process{Dir: Dir(t), Kind: kind, exited: make(chan struct{})}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(append(os.Environ(), "SLUICE_UDS_DIR="+p.Dir), env...)
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	info, err := WaitForFile(filepath.Join(p.Dir, kind.InfoFile()), func() (error, bool) {
		select {
		case <-p.exited:
			return p.err, true
		default:
			return nil, false
		}
	})
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, p.stderr.String())
	}
	p.Info = info
	p.Conn = Dial(t, filepath.Join(p.Dir, kind.Socket()))
	return p
}

// Terminate sends SIGTERM and waits, at most Timeout, for the process to
// exit; it returns the process's exit error (nil for exit status 0).
func (p *Process) Terminate(t testing.TB) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		return p.err
	case <-time.After(Timeout):
		t.Fatalf("process did not exit within %v of SIGTERM\nstderr:\n%s", Timeout, p.stderr.String())
		return nil
	}
}

// Stdout is what the process has written to its standard output so far;
// complete once it has exited.
func (p *Process) Stdout() string { return p.stdout.String() }

// Stderr is what the process has written to its standard error so far.
func (p *Process) Stderr() string { return p.stderr.String() }
