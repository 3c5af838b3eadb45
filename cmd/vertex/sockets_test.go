package main

import (
	"path/filepath"
	"testing"

	"go.uber.org/zap"
)

// --uds-dir is the directory when given; without --spawn the fixed one is,
// and with --spawn, the fixed one while no other process holds its lock.
func TestSocketDir(t *testing.T) {
	fixed := filepath.Join(t.TempDir(), "numaflow")
	if dir, _, err := socketDir("/given", true, fixed, zap.NewNop()); err != nil || dir != "/given" {
		t.Fatalf("--uds-dir: %q, %v", dir, err)
	}
	if dir, _, err := socketDir("", false, fixed, zap.NewNop()); err != nil || dir != fixed {
		t.Fatalf("no --spawn: %q, %v; want %s", dir, err, fixed)
	}
	dir, release, err := socketDir("", true, fixed, zap.NewNop())
	if err != nil || dir != fixed {
		t.Fatalf("--spawn: %q, %v; want %s", dir, err, fixed)
	}
	release()
}
