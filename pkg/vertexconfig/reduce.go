package vertexconfig

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/reduce"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/accumulatorclient"
	"github.com/sluiceflow/sluice/pkg/udf/reduceclient"
	"github.com/sluiceflow/sluice/pkg/udf/sessionreduceclient"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// ErrNoStateDir is matched by the error of a reduce vertex whose storage is a
// volume (persistentVolumeClaim or emptyDir) when no state directory is given.
var ErrNoStateDir = errors.New("no state directory")

// Reduce returns the Reduce of the validated groupBy of u, the function of
// the vertex called name at path in the YAML: its window strategy, lateness
// and keying, its reducer (a built-in, or a reduce or reduce-stream server in
// the vertex's socket directory) and its state directory, [StateDir] for a
// volume storage and "" (memory alone) for no_store. The Reduce's Watermark
// is left to the caller; the remote reducer's messages carry the vertex's.
func Reduce(path string, u *config.UDF, name, stateDir string) (*vertex.Reduce, error) {
	g := u.GroupBy
	if a := g.Window.Accumulator; a != nil {
		r := &vertex.Reduce{Keyed: g.GetKeyed(), Accumulator: accumulator(a.Timeout.Duration)}
		return r, storage(r, path, g, name, stateDir)
	}
	strategy, streaming, err := strategy(&g.Window)
	if err != nil {
		return nil, &config.FieldError{Path: path + ".groupBy.window", Err: err}
	}
	r := &vertex.Reduce{Strategy: strategy, AllowedLateness: g.GetAllowedLateness(), Keyed: g.GetKeyed()}
	if err := storage(r, path, g, name, stateDir); err != nil {
		return nil, err
	}
	r.Reducer = reducerFunc(path, u, streaming, strategy.Timeout() > 0)
	return r, nil
}

// storage sets r's state directory from g's storage.
func storage(r *vertex.Reduce, path string, g *config.GroupBy, name, stateDir string) error {
	if st := g.Storage; st != nil && st.NoStore == nil {
		if stateDir == "" {
			return &config.FieldError{Path: path + ".groupBy.storage", Err: ErrNoStateDir}
		}
		r.Dir = StateDir(stateDir, name)
	}
	return nil
}

// accumulator makes the Accumulator of a validated accumulator window: a
// client of the accumulator server in the vertex's socket directory.
func accumulator(timeout time.Duration) *vertex.Accumulator {
	return &vertex.Accumulator{Timeout: timeout, Client: func(env vertex.Env) (*accumulatorclient.Client, error) {
		c := accumulatorclient.New(env.SocketDir, env.Log, udf.WithCalls(env.Calls))
		env.Remote(udf.KindAccumulator, c)
		return c, nil
	}}
}

// StateDir is the directory of the windows of the reduce vertex called
// vertex, base being the pipeline's state directory.
func StateDir(base, vertex string) string { return filepath.Join(base, vertex) }

// strategy returns the strategy of a validated window, and whether its
// function is a reduce streamer.
func strategy(w *config.Window) (window.Strategy, bool, error) {
	if f := w.Fixed; f != nil {
		s, err := window.Fixed(f.Length.Duration)
		return s, f.Streaming != nil && *f.Streaming, err
	}
	if sl := w.Sliding; sl != nil {
		s, err := window.Sliding(sl.Length.Duration, sl.Slide.Duration)
		return s, sl.Streaming != nil && *sl.Streaming, err
	}
	if se := w.Session; se != nil && se.Timeout != nil {
		s, err := window.Session(se.Timeout.Duration)
		return s, false, err
	}
	return window.Strategy{}, false, fmt.Errorf("%w: set fixed, sliding or session", window.ErrInvalid)
}

// reducerFunc makes the reducer of one reader of the reduce at path: the
// built-in u names, or a client of the reduce server (reduce-stream server
// when streaming, sent each message as it is read; session reduce server
// for session windows) in the vertex's socket directory, whose messages
// carry the vertex's watermark.
func reducerFunc(path string, u *config.UDF, streaming, session bool) vertex.ReducerFunc {
	return func(env vertex.Env) (reduce.Reducer, error) {
		if u.Container == nil {
			r, err := reduce.Builtin(u.Builtin.Name, u.Builtin.KWArgs)
			if err != nil {
				return nil, &config.FieldError{Path: path + ".builtin", Err: err}
			}
			return r, nil
		}
		if session {
			c := sessionreduceclient.New(env.SocketDir, env.Log, udf.WithCalls(env.Calls))
			env.Remote(udf.KindSessionReduce, c)
			return reduce.RemoteSession(c, env.Watermark), nil
		}
		kind := udf.KindReduce
		if streaming {
			kind = udf.KindReduceStream
		}
		c, err := reduceclient.New(env.SocketDir, kind, env.Log, udf.WithCalls(env.Calls))
		if err != nil {
			return nil, err
		}
		env.Remote(kind, c)
		if streaming {
			rs := reduce.RemoteStream(c, env.Watermark)
			env.OnClose(rs.Close)
			return rs, nil
		}
		return reduce.Remote(c, env.Watermark), nil
	}
}
