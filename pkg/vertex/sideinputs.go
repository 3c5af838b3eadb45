package vertex

import "context"

// SideInputs is what a vertex that names side inputs waits for before it
// reads: a value of each (sideinput.Gate).
type SideInputs interface {
	// Wait blocks until every side input has a value, or ctx ends, when it
	// returns ctx's error.
	Wait(ctx context.Context) error
	// Ready returns nil once every side input has a value, and otherwise an
	// error that names those without.
	Ready() error
}

// WithSideInputs makes the vertex wait, once its user-defined servers are
// ready and before it reads, until s says every side input it names has a
// value; meanwhile Ready (and /readyz, /status's notReady) says which it
// waits for.
func WithSideInputs(s SideInputs) Option { return func(o *options) { o.sideInputs = s } }
