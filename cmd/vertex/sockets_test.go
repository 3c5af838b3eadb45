package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// With --spawn and no --uds-dir, the containers get the fixed directory while
// this process holds its lock; a second process (here, a second lock) falls
// back to a temporary directory and says why; so does one that cannot create
// the fixed directory.
func TestSocketDir(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	fixed := filepath.Join(t.TempDir(), "numaflow")
	lastWarning := func() string {
		w := logs.FilterLevelExact(zapcore.WarnLevel).All()
		if len(w) == 0 {
			return ""
		}
		return w[len(w)-1].Message
	}

	if dir, _, err := socketDir("/given", true, fixed, log); err != nil || dir != "/given" {
		t.Fatalf("--uds-dir: %q, %v", dir, err)
	}
	if dir, _, err := socketDir("", false, fixed, log); err != nil || dir != fixed {
		t.Fatalf("no --spawn: %q, %v; want %s", dir, err, fixed)
	}
	dir, release, err := socketDir("", true, fixed, log)
	if err != nil || dir != fixed {
		t.Fatalf("--spawn: %q, %v; want %s", dir, err, fixed)
	}
	if fi, err := os.Stat(fixed); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the fixed directory: %v, %v; want it created, 0755", fi, err)
	}
	other, cleanup, err := socketDir("", true, fixed, log)
	if err != nil || other == fixed {
		t.Fatalf("--spawn while another holds the lock: %q, %v; want a temporary directory", other, err)
	}
	if w := lastWarning(); !strings.Contains(w, "another sluice process uses it") || !strings.Contains(w, "numaflow-go") {
		t.Fatalf("warning %q; want why, and what it means for numaflow-go servers", w)
	}
	cleanup()
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("the temporary directory is still there: %v", err)
	}
	release()
	again, release, err := socketDir("", true, fixed, log)
	if err != nil || again != fixed {
		t.Fatalf("--spawn once the lock is released: %q, %v; want %s", again, err, fixed)
	}
	release()

	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir, cleanup, err = socketDir("", true, filepath.Join(blocked, "numaflow"), log)
	if err != nil || strings.HasPrefix(dir, blocked) {
		t.Fatalf("--spawn with a fixed directory that cannot be made: %q, %v", dir, err)
	}
	defer cleanup()
	if w := lastWarning(); !strings.Contains(w, "not a directory") {
		t.Fatalf("warning %q; want the reason", w)
	}
}
