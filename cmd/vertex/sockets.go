package main

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/serverinfo"
	"github.com/sluiceflow/sluice/pkg/spawn"
)

// socketDirHint is what to do when a server knows only /var/run/numaflow and
// the vertex waits for it elsewhere.
const socketDirHint = "run the vertex with --uds-dir " + serverinfo.DefaultDir +
	", or with --spawn and no --uds-dir while no other sluice process uses " + serverinfo.DefaultDir

// socketDir returns the directory of the user-defined containers' sockets:
// --uds-dir when given; without --spawn, fixed (/var/run/numaflow), as in a
// Numaflow pod; with --spawn, the one spawn.Dir picks. cleanup releases
// what it took.
func socketDir(flagValue string, spawned bool, fixed string, log *zap.Logger) (dir string, cleanup func(), err error) {
	switch {
	case flagValue != "":
		return flagValue, func() {}, nil
	case !spawned:
		return fixed, func() {}, nil
	}
	return spawn.Dir(fixed, "--uds-dir chooses the directory", log)
}

// spawnContainers starts the user-defined containers of f (of the vertex
// d.Only of a pipeline, or of all) in dir, for --spawn; stop stops them.
func spawnContainers(f *config.File, dir string, d spawn.Deps) (stop func(), err error) {
	g, err := spawn.Start(f, dir, d)
	var de *spawn.DirError
	switch {
	case errors.As(err, &de):
		return nil, usagef("%v; --uds-dir chooses another", err)
	case errors.Is(err, spawn.ErrNoCommand):
		return nil, usagef("--spawn: %v", err)
	case err != nil:
		return nil, fmt.Errorf("--spawn: %w", err)
	}
	return g.Stop, nil
}
