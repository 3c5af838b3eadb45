package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestVersion checks that vertex version prints the stamped version alone and
// exits 0, and that an argument it does not take exits 2 naming it.
func TestVersion(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v1.2.3-4-gabcdef0-dirty"
	for _, tt := range []struct {
		name             string
		args             []string
		code             int
		stdout, inStderr string
	}{
		{"version", []string{"version"}, 0, "v1.2.3-4-gabcdef0-dirty\n", ""},
		{"help", []string{"version", "-h"}, 0, "usage: vertex version\n", ""},
		{"argument", []string{"version", "extra"}, 2, "", `vertex: version: unexpected argument "extra"`},
		{"flag", []string{"version", "--short"}, 2, "", "vertex: version: flag provided but not defined: -short"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), tt.stdout) || (tt.stdout == "" && stdout.Len() > 0) {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.stdout)
			}
			if tt.code == 0 && stderr.Len() > 0 {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.inStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.inStderr)
			}
		})
	}
}
