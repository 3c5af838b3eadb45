package udfserver

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"time"
)

// maxSocketPath is the longest unix socket path Linux accepts (the size of
// sockaddr_un.sun_path minus the terminating NUL).
const maxSocketPath = 107

// staleDialTimeout bounds the probe that tells a stale socket file from a
// live server's.
const staleDialTimeout = time.Second

// listen listens on the unix socket at path, first removing a socket file
// left behind by a server that is gone. It refuses to remove anything that
// is not a socket, or the socket of a server that still accepts connections.
func listen(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("sdk: socket path %s is %d bytes long, more than the %d a unix socket allows", path, len(path), maxSocketPath)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("sdk: listening on %s: %w", path, err)
	}
	return lis, nil
}

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sdk: checking for a stale socket: %w", err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("sdk: %s exists and is not a socket (mode %v); not removing it", path, fi.Mode())
	}
	if conn, err := net.DialTimeout("unix", path, staleDialTimeout); err == nil {
		_ = conn.Close()
		return fmt.Errorf("%w: %s", ErrSocketInUse, path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sdk: removing stale socket: %w", err)
	}
	return nil
}

// removeIfExists removes path; a file that is already gone is no error.
func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sdk: removing %s: %w", path, err)
	}
	return nil
}
