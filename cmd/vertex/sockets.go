package main

import (
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/serverinfo"
)

// lockFile is the file in the fixed socket directory on which a sluice
// process whose spawned containers use that directory holds an flock, for
// its life.
const lockFile = ".sluice.lock"

// socketDirHint is what to do when a server knows only /var/run/numaflow and
// the vertex waits for it elsewhere.
const socketDirHint = "run the vertex with --uds-dir " + serverinfo.DefaultDir +
	", or with --spawn and no --uds-dir while no other sluice process uses " + serverinfo.DefaultDir

// socketDir returns the directory of the user-defined containers' sockets:
// --uds-dir when given; without --spawn, fixed (/var/run/numaflow), as in a
// Numaflow pod; with --spawn, fixed too when this process can create it and
// lock it (no other sluice process has), so that servers that know only that
// directory (numaflow-go's) work, and otherwise a new temporary directory,
// with a warning saying why. cleanup releases the lock or removes the
// temporary directory.
func socketDir(flagValue string, spawn bool, fixed string, log *zap.Logger) (dir string, cleanup func(), err error) {
	switch {
	case flagValue != "":
		return flagValue, func() {}, nil
	case !spawn:
		return fixed, func() {}, nil
	}
	unlock, lerr := lockDir(fixed)
	if lerr == nil {
		log.Info("the spawned containers' socket directory", zap.String("dir", fixed), zap.String("lock", filepath.Join(fixed, lockFile)))
		return fixed, unlock, nil
	}
	if dir, err = os.MkdirTemp("", "sluice-uds-"); err != nil {
		return "", nil, err
	}
	log.Warn("not using "+fixed+" for the spawned containers' sockets ("+lerr.Error()+"): using a temporary directory, "+
		"which sluice's SDK servers find through SLUICE_UDS_DIR but servers that know only "+fixed+
		" (numaflow-go's) do not; --uds-dir chooses the directory", zap.String("dir", dir))
	return dir, func() { os.RemoveAll(dir) }, nil
}

// makeSocketDir creates dir (0755) when the vertices of f have user-defined
// containers, before they are spawned or waited for.
func makeSocketDir(dir string, f *config.File) error {
	if !hasContainers(f) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return usagef("cannot create %s, the user-defined containers' socket directory (%v); --uds-dir chooses another", dir, err)
	}
	return nil
}

// hasContainers reports whether a vertex of f has a user-defined container.
func hasContainers(f *config.File) bool {
	if m := f.MonoVertex; m != nil {
		return len(containersOf(m.Spec.Source, m.Spec.UDF, m.Spec.Sink)) > 0
	}
	for _, v := range pipelineVertices(f) {
		if len(containersOf(v.Source, v.UDF, v.Sink)) > 0 {
			return true
		}
	}
	return false
}
