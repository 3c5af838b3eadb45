// Package test holds end-to-end tests: they build the vertex binary and run it as
// a user would, with real processes, ports and signals.
package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/podmantest"
)

// vertexBin is the binary under test, built once by TestMain.
var vertexBin string

// e2eParallel is how many tests of this package run at once unless
// -test.parallel says otherwise. They wait on real time and on processes of
// their own, far more than on this process's CPU; the default of
// -test.parallel, GOMAXPROCS, would run two at a time on two cores.
const e2eParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(max(e2eParallel, runtime.GOMAXPROCS(0))))
	}
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	vertexBin = filepath.Join(dir, "vertex")
	build := exec.Command("go", "build", "-o", vertexBin, "../cmd/vertex")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building vertex:", err)
		os.Exit(1)
	}
	// podmantest removes the images the tests built.
	code := podmantest.Main(m)
	writeFaultTable()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running vertex process whose stdout lines and stderr are collected.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	stderr bytes.Buffer
	notify chan struct{} // closed and replaced at each stdout line or stderr write
	done   chan struct{}
	err    error
}

// writeConfig writes yaml to a file in a temp dir and returns its path.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vertex.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// start runs the vertex binary with args; the process is killed at the end of
// the test if it is still running.
func start(t testing.TB, args ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(vertexBin, args...))
}

// startCmd starts cmd, collecting its output as start does.
func startCmd(t testing.TB, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, cmd: cmd, notify: make(chan struct{}), done: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.stderr.Write(b)
		p.wake()
		return len(b), nil
	})
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.wake()
			p.mu.Unlock()
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (p *proc) wake() {
	close(p.notify)
	p.notify = make(chan struct{})
}

// waitFor waits until cond (called with p.mu held) is true or the timeout passes.
func (p *proc) waitFor(timeout time.Duration, what string, cond func() bool) {
	p.t.Helper()
	deadline := time.After(timeout)
	for {
		p.mu.Lock()
		ok, ch := cond(), p.notify
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-p.done:
			p.mu.Lock()
			ok = cond()
			p.mu.Unlock()
			if !ok {
				p.t.Fatalf("%s exited (%v) before %s; stderr:\n%s", filepath.Base(p.cmd.Path), p.err, what, p.stderrText())
			}
			return
		case <-deadline:
			p.t.Fatalf("timed out waiting for %s; stderr:\n%s", what, p.stderrText())
		}
	}
}

func (p *proc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *proc) stdoutLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

var addrRE = regexp.MustCompile(`"msg":"serving metrics, health and status".*"addr":"([^"]+)"`)

// metricsAddr waits for the vertex to log its observability address.
func (p *proc) metricsAddr() string {
	var addr string
	p.waitFor(20*time.Second, "the metrics address in the log", func() bool {
		if m := addrRE.FindStringSubmatch(p.stderr.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

// stop sends sig and waits for the process to exit, returning its exit code and
// how long it took.
func (p *proc) stop(sig syscall.Signal, timeout time.Duration) (int, time.Duration) {
	p.t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %v of %v; stderr:\n%s", filepath.Base(p.cmd.Path), timeout, sig, p.stderrText())
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(start)
}

// createdSecond returns the second a log-sink line's generator payload was made.
func createdSecond(t *testing.T, line string) int64 {
	t.Helper()
	payload, _, ok := strings.Cut(strings.TrimPrefix(line, "Payload - "), " Keys - ")
	if !ok || !strings.HasPrefix(line, "Payload - ") {
		t.Fatalf("not a log-sink line: %q", line)
	}
	var msg struct{ Createdts int64 }
	if err := json.Unmarshal([]byte(payload), &msg); err != nil {
		t.Fatalf("payload %q: %v", payload, err)
	}
	return msg.Createdts / int64(time.Second)
}

// perSecond counts lines per second of creation, in order from the first second.
func perSecond(t *testing.T, lines []string) []int {
	t.Helper()
	counts := map[int64]int{}
	first, last := int64(1<<62), int64(0)
	for _, l := range lines {
		s := createdSecond(t, l)
		counts[s]++
		first, last = min(first, s), max(last, s)
	}
	var out []int
	for s := first; s <= last; s++ {
		out = append(out, counts[s])
	}
	return out
}

func httpGet(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// writeSecret writes a secret to a file and returns its path.
func writeSecret(t *testing.T, value string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
