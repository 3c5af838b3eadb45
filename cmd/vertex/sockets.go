package main

import (
	"os"
	"path/filepath"

	"go.uber.org/zap"

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
