package spawn

import (
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// lockFile is the file in the fixed socket directory on which a sluice
// process whose spawned containers use that directory holds an flock, for
// its life.
const lockFile = ".sluice.lock"

// Dir returns the directory for the sockets of the containers this process
// spawns: fixed (/var/run/numaflow) when this process can create it and lock
// it (no other sluice process has), so that servers that know only that
// directory (numaflow-go's) work, and otherwise a new temporary directory,
// with a warning saying why, which ends with hint, how to choose another.
// release releases the lock or removes the temporary directory.
func Dir(fixed, hint string, log *zap.Logger) (dir string, release func(), err error) {
	if log == nil {
		log = zap.NewNop()
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
		"which sluice's SDK servers find through "+EnvUDSDir+" but servers that know only "+fixed+
		" (numaflow-go's) do not; "+hint, zap.String("dir", dir))
	return dir, func() { os.RemoveAll(dir) }, nil
}
