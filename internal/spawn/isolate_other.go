//go:build !linux

package spawn

import (
	"errors"
	"os/exec"
)

// Isolated returns at once: mount namespaces are Linux's.
func Isolated() {}

// Isolation reports that containers cannot have mount namespaces of their
// own but on Linux.
func Isolation() error { return errors.New("mount namespaces are Linux's") }

type mount struct{ Source, Target string }

func isolatedCommand(cmd *exec.Cmd, mounts []mount) (*exec.Cmd, error) { return nil, Isolation() }
