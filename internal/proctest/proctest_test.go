package proctest

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFailureMessageHidesSecrets(t *testing.T) {
	q := quoteArgs([]string{"--user", "u", "--pass", "pw-secret", "--auth", "tok-secret", "a b"}, []string{"--pass", "--auth"})
	if strings.Contains(q, "secret") || !strings.Contains(q, `"a b"`) {
		t.Fatalf("quoted args: %s", q)
	}
}

// A process that exits at once fails Start with its output; one that runs
// until stopped is ready once Ready says so, and Stop ends it.
func TestStartAndStop(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(Spec{Bin: "sh", Args: []string{"-c", "echo boom: address already in use; exit 3"}, Dir: dir,
		Output: filepath.Join(dir, "out.log"), Ready: func(context.Context, int) error { return errors.New("no") },
		Timeout: 5 * time.Second, Poll: 10 * time.Millisecond, NotReady: "sh not ready"})
	if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), "process exited during startup") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Start of a failing process: %v", err)
	}
	calls := 0
	p, err := Start(Spec{Bin: "sleep", Args: []string{"60"}, Dir: dir, Output: filepath.Join(dir, "sleep.log"),
		Ready: func(_ context.Context, pid int) error {
			if calls++; calls < 3 || pid <= 0 {
				return errors.New("not yet")
			}
			return nil
		}, Timeout: 5 * time.Second, Poll: time.Millisecond})
	if err != nil || calls != 3 || p.Exited() {
		t.Fatalf("Start: %v after %d checks", err, calls)
	}
	if killed := p.Stop(syscall.SIGTERM, 5*time.Second); killed || !p.Exited() {
		t.Fatalf("Stop: killed %v, exited %v", killed, p.Exited())
	}
}
