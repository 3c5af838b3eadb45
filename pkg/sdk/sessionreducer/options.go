package sessionreducer

import (
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
)

// Option configures a Server.
type Option func(*udfserver.Config)

// WithSocketDir sets the directory of the socket and server-info file. Without
// it, the directory is the value of the environment variable SLUICE_UDS_DIR
// (which `vertex run --spawn` sets for the UDF processes it starts), or
// /var/run/numaflow when that is unset.
func WithSocketDir(dir string) Option {
	return func(c *udfserver.Config) { c.SocketDir = dir }
}

// WithShutdownTimeout bounds a graceful stop (10s by default): streams still
// open after that long are closed.
func WithShutdownTimeout(d time.Duration) Option {
	return func(c *udfserver.Config) { c.ShutdownTimeout = d }
}
