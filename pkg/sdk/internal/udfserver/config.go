package udfserver

import (
	"os"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
)

// EnvSocketDir names the environment variable that sets the directory of a
// server's socket and server-info file when no option does. `vertex run
// --spawn` sets it for the UDF processes it starts, so that they listen
// where it looks for them.
const EnvSocketDir = "SLUICE_UDS_DIR"

// DefaultShutdownTimeout bounds a graceful stop: in-flight streams get that
// long to finish before the server closes them.
const DefaultShutdownTimeout = 10 * time.Second

// Config is what the options of the public packages set.
type Config struct {
	// SocketDir is the directory of the socket and the server-info file.
	// Empty means the value of EnvSocketDir, or serverinfo.DefaultDir when
	// that is empty too.
	SocketDir string
	// ShutdownTimeout bounds the graceful stop; zero or less means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

// Dir resolves the socket directory: the option, then the environment,
// then serverinfo.DefaultDir.
func (c Config) Dir() string {
	if c.SocketDir != "" {
		return c.SocketDir
	}
	if dir := os.Getenv(EnvSocketDir); dir != "" {
		return dir
	}
	return serverinfo.DefaultDir
}

func (c Config) shutdownTimeout() time.Duration {
	if c.ShutdownTimeout <= 0 {
		return DefaultShutdownTimeout
	}
	return c.ShutdownTimeout
}
