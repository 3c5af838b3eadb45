// Package proctest runs the server processes of tests (redis-server,
// nats-server): it starts one with its output in a file, waits until it is
// ready, reports a start that failed with the tail of its logs, and stops
// it. The packages that start a particular server build on it.
package proctest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrAddrInUse is matched by Start's error when the server's logs say its
// port was taken: the caller may try another port.
var ErrAddrInUse = errors.New("address already in use")

// Spec is a server process to start.
type Spec struct {
	Bin  string
	Args []string
	Dir  string // working directory
	// Output is the file the process's stdout and stderr are appended to;
	// Logs are more files whose lines written during this start a failure
	// shows (the server's own log, when it keeps one apart).
	Output string
	Logs   []string
	// Secrets are flags whose value a failure message hides.
	Secrets []string
	// Ready reports whether the process with pid is serving; Start calls it
	// every Poll until it returns nil, for at most Timeout. Its ctx ends if
	// the process exits.
	Ready   func(ctx context.Context, pid int) error
	Timeout time.Duration
	Poll    time.Duration
	// NotReady describes the wait in the error of a start that timed out,
	// e.g. "no PONG from 127.0.0.1:6390".
	NotReady string
}

// Process is a started server process.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait has returned
	err  error         // Wait's result, valid after done is closed
}

// Start starts the process and waits until it is ready. On failure the
// process is gone, and the error has the command line and the logs' tail.
func Start(s Spec) (*Process, error) {
	files := append([]string{s.Output}, s.Logs...)
	offsets := make([]int64, len(files))
	for i, f := range files {
		offsets[i] = fileSize(f)
	}
	out, err := os.OpenFile(s.Output, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.Bin, s.Args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	out.Close() // the child has its own copy
	if err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	fail := func(reason error) error {
		_ = cmd.Process.Kill()
		<-p.done
		var tail strings.Builder
		for i := len(files) - 1; i >= 0; i-- {
			tail.WriteString(LogTail(files[i], offsets[i]))
		}
		if strings.Contains(strings.ToLower(tail.String()), "address already in use") {
			reason = fmt.Errorf("%w: %v", ErrAddrInUse, reason)
		}
		return fmt.Errorf("%w\ncommand: %s %s\n%s", reason, s.Bin, quoteArgs(s.Args, s.Secrets), tail.String())
	}

	// A probe that hangs (e.g. on a foreign listener) ends with the process.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	deadline := time.Now().Add(s.Timeout)
	for {
		if p.Exited() {
			return nil, fail(fmt.Errorf("process exited during startup (%v)", p.err))
		}
		lastErr := s.Ready(ctx, cmd.Process.Pid)
		if lastErr == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			return nil, fail(fmt.Errorf("%s within %v (last error: %v)", s.NotReady, s.Timeout, lastErr))
		}
		time.Sleep(s.Poll)
	}
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends sig and waits for the process to exit; when it has not after
// grace, it is killed, and Stop reports it. Stopping an exited process does
// nothing.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) (killed bool) {
	if p.Exited() {
		return false
	}
	_ = p.cmd.Process.Signal(sig)
	if sig != syscall.SIGKILL {
		select {
		case <-p.done:
			return false
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			killed = true
		}
	}
	<-p.done
	return killed
}

// Slot holds a server's current process, if any, for the Server types of the
// packages that build on this one. It is safe for concurrent use.
type Slot struct {
	mu   sync.Mutex
	proc *Process
}

// Set makes p the current process.
func (s *Slot) Set(p *Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc = p
}

// Stop stops the current process as [Process.Stop] does and empties the
// slot; it reports whether the process had to be killed. An empty slot does
// nothing.
func (s *Slot) Stop(sig syscall.Signal, grace time.Duration) (killed bool) {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	return p != nil && p.Stop(sig, grace)
}

// Running reports whether the current process is running.
func (s *Slot) Running() bool { return s.Pid() != 0 }

// Pid returns the id of the running process, or 0.
func (s *Slot) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.Exited() {
		return 0
	}
	return s.proc.Pid()
}

// FreePort returns a port that was free on 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogTail returns the last 20 lines written to path after offset, headed by
// the file's name, or "" when there are none.
func LogTail(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) <= offset {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data[offset:]), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return fmt.Sprintf("--- %s (tail) ---\n%s\n", path, strings.Join(lines, "\n"))
}

// quoteArgs quotes args for a failure message, hiding the values of secret
// flags.
func quoteArgs(args, secrets []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		for _, flag := range secrets {
			if i > 0 && args[i-1] == flag {
				a = "***"
			}
		}
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
