package vertex

// WithFixedDir sets the directory servers that know only one look in, instead
// of /var/run/numaflow.
func WithFixedDir(dir string) Option { return func(o *options) { o.fixedDir = dir } }

// PendingPoll is how often the vertex asks its source for the pending count.
const PendingPoll = pendingPoll
