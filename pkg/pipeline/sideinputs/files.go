package sideinputs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
)

// DefaultDir is where the vertices' user-defined containers read side-input
// values, one file per side input, as in Numaflow (numaflow-go's
// sideinput.DirPath).
const DefaultDir = "/var/numaflow/side-inputs"

// EnvDir tells sluice's SDK servers where the side-input files are when they
// are not in DefaultDir; the runtime sets it for the containers it spawns.
const EnvDir = "SLUICE_SIDE_INPUTS_DIR"

// Files writes the values of a [Store]'s side inputs as files in a directory
// and tells who waits which have arrived. Create one with [NewFiles] and run
// it with [Files.Run]; its other methods are safe for concurrent use.
type Files struct {
	dir   string
	store Store
	names []string
	log   *zap.Logger

	mu      sync.Mutex
	written map[string]bool
	arrived chan struct{} // closed and replaced at every file written
}

// NewFiles returns a Files that writes the side inputs called names, from
// store, in dir.
func NewFiles(dir string, store Store, names []string, log *zap.Logger) *Files {
	if log == nil {
		log = zap.NewNop()
	}
	return &Files{dir: dir, store: store, names: slices.Clone(names), log: log,
		written: map[string]bool{}, arrived: make(chan struct{})}
}

// Dir is the directory the files are written in.
func (f *Files) Dir() string { return f.dir }

// Run creates the directory (a UDF watching it must find it at start) and
// writes each value the store has and gets, until ctx ends or the store
// fails. A file that cannot be written is logged and written at the next
// value.
func (f *Files) Run(ctx context.Context) error {
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("side inputs: %w", err)
	}
	return f.store.Watch(ctx, f.names, func(name string, value []byte) {
		if err := WriteFile(f.dir, name, value); err != nil {
			f.log.Error("writing a side input's value", zap.String("sideInput", name), zap.Error(err))
			return
		}
		f.log.Info("side input updated", zap.String("sideInput", name), zap.Int("bytes", len(value)))
		f.mu.Lock()
		f.written[name] = true
		close(f.arrived)
		f.arrived = make(chan struct{})
		f.mu.Unlock()
	})
}

// WriteFile writes value as dir/name by writing a temporary file in dir and
// renaming it over dir/name, so that a reader sees the whole old value or
// the whole new one.
func WriteFile(dir, name string, value []byte) error {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails once renamed
	if _, err := tmp.Write(value); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// missing lists those of names without a file written yet, and a channel
// closed at the next file written.
func (f *Files) missing(names []string) ([]string, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, n := range names {
		if !f.written[n] {
			out = append(out, n)
		}
	}
	return out, f.arrived
}

// Gate returns what a vertex that names the side inputs names waits for.
func (f *Files) Gate(names []string) *Gate { return &Gate{f: f, names: slices.Clone(names)} }

// ErrNoValue is matched by the error of a [Gate] whose side inputs do not
// all have a value yet.
var ErrNoValue = errors.New("waiting for side inputs")

// Gate is a vertex's side inputs: [Gate.Wait] blocks until each has a value
// on disk, and [Gate.Ready] says which have none. It is safe for concurrent
// use.
type Gate struct {
	f     *Files
	names []string
}

// Wait blocks until every side input of the gate has its file, or ctx ends
// (ctx's error).
func (g *Gate) Wait(ctx context.Context) error {
	for {
		missing, arrived := g.f.missing(g.names)
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-arrived:
		}
	}
}

// Ready returns nil once every side input of the gate has its file, and
// otherwise an error matching [ErrNoValue] that names those without.
func (g *Gate) Ready() error {
	missing, _ := g.f.missing(g.names)
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (no value in %s yet)", ErrNoValue, strings.Join(missing, ", "), g.f.dir)
}
