package spawn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The containers get the fixed directory while this process holds its lock; a
// second process (here, a second lock) falls back to a temporary directory and
// says why; so does one that cannot create the fixed directory.
func TestDir(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	fixed := filepath.Join(t.TempDir(), "numaflow")
	const hint = "--uds-dir chooses the directory"
	lastWarning := func() string {
		w := logs.FilterLevelExact(zapcore.WarnLevel).All()
		if len(w) == 0 {
			return ""
		}
		return w[len(w)-1].Message
	}

	dir, release, err := Dir(fixed, hint, log)
	if err != nil || dir != fixed {
		t.Fatalf("Dir: %q, %v; want %s", dir, err, fixed)
	}
	if fi, err := os.Stat(fixed); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the fixed directory: %v, %v; want it created, 0755", fi, err)
	}
	other, cleanup, err := Dir(fixed, hint, log)
	if err != nil || other == fixed {
		t.Fatalf("Dir while another holds the lock: %q, %v; want a temporary directory", other, err)
	}
	if w := lastWarning(); !strings.Contains(w, "another sluice process uses it") || !strings.Contains(w, "numaflow-go") ||
		!strings.HasSuffix(w, "; "+hint) {
		t.Fatalf("warning %q; want why, what it means for numaflow-go servers, and the hint", w)
	}
	cleanup()
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("the temporary directory is still there: %v", err)
	}
	release()
	again, release, err := Dir(fixed, hint, log)
	if err != nil || again != fixed {
		t.Fatalf("Dir once the lock is released: %q, %v; want %s", again, err, fixed)
	}
	release()

	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir, cleanup, err = Dir(filepath.Join(blocked, "numaflow"), hint, log)
	if err != nil || strings.HasPrefix(dir, blocked) {
		t.Fatalf("Dir with a fixed directory that cannot be made: %q, %v", dir, err)
	}
	defer cleanup()
	if w := lastWarning(); !strings.Contains(w, "not a directory") {
		t.Fatalf("warning %q; want the reason", w)
	}
}
