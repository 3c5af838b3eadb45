package spawn

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
)

// liveSocketProbe bounds the dial that tells the socket of a running server
// from one left behind by a server that is gone (which refuses at once).
const liveSocketProbe = time.Second

// clearFiles removes from dir what servers of c's kinds (roleKinds) left
// there, so that c starts in a directory where the vertex can only read the
// server-info file c writes: the server-info files, always, and the sockets
// no server listens on. A socket a server still listens on is left in place,
// with a warning, since some server this process did not start is serving
// there; so is a file in a socket's place that is not a socket. The error
// names a file that could not be removed.
func clearFiles(dir string, c container, log *zap.Logger) error {
	for _, k := range roleKinds[c.role] {
		info := filepath.Join(dir, k.InfoFile())
		switch err := os.Remove(info); {
		case err == nil:
			log.Info("removed a server-info file an earlier server left, before starting the container",
				zap.String("container", c.role), zap.String("file", info))
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("removing the server-info file an earlier server left: %w", err)
		}
		if err := clearSocket(filepath.Join(dir, k.Socket()), c.role, log); err != nil {
			return err
		}
	}
	return nil
}

// clearSocket removes the socket at path when no server listens on it.
func clearSocket(path, role string, log *zap.Logger) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("checking for a socket an earlier server left: %w", err)
	case fi.Mode()&fs.ModeSocket == 0:
		log.Warn("a file that is not a socket is where the container's server listens; leaving it",
			zap.String("container", role), zap.String("file", path), zap.Stringer("mode", fi.Mode()))
		return nil
	}
	if conn, err := net.DialTimeout("unix", path, liveSocketProbe); err == nil {
		conn.Close()
		log.Warn("a server this process did not start listens on the container's socket; leaving it",
			zap.String("container", role), zap.String("socket", path))
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the socket an earlier server left: %w", err)
	}
	log.Info("removed a socket an earlier server left, before starting the container",
		zap.String("container", role), zap.String("socket", path))
	return nil
}
