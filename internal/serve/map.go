package serve

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/mapclient"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

func init() {
	register(Role{Name: "map", Help: "a map (udf) server that throttles each message under the limit, then passes it on or forwards it to --forward", Run: runMap})
}

// startupTimeout is how long the map role waits for the user's map server
// on --forward to be ready (a variable for the tests).
var startupTimeout = vertex.DefaultStartupTimeout

// runMap serves the map role: a vertex whose source is the requests of
// map.v1.Map streams, whose function is cat or the user's map server on
// o.Forward, and whose sink answers each request with what its message
// became. The map server starts once the vertex is ready; on ctx's end it
// stops first, answering what is in flight, then the vertex stops.
func runMap(ctx context.Context, o Options) error {
	spec, err := mapSpec(o)
	if err != nil {
		return err
	}
	q := newMapQueue(spec.Limits.ReadTimeout)
	defer q.close()
	spec.Source = func(vertex.Env) (isb.Reader, error) { return q, nil }
	spec.Sink = func(vertex.Env) (isb.Writer, error) { return q, nil }
	spec.Fallback, spec.OnSuccess, spec.Bypass, spec.Watermark = nil, nil, nil, nil
	vopts := []vertex.Option{vertex.WithLogger(o.Log), vertex.WithStartupTimeout(startupTimeout)}
	spec.Map = func(vertex.Env) (udf.Mapper, error) { return udf.Cat{}, nil }
	if o.Forward != "" {
		dir := filepath.Dir(o.Forward)
		switch {
		case !slices.Contains(mapSockets, filepath.Base(o.Forward)):
			return cli.Usagef("serve: --forward (%q) is not a map server's socket: its name is one of %s, beside its %s", o.Forward,
				strings.Join(mapSockets, ", "), serverinfo.KindMap.InfoFile())
		case filepath.Clean(dir) == filepath.Clean(o.SocketDir):
			return cli.Usagef("serve: --forward (%q) is in --uds-dir (%q), where the served map's own socket goes", o.Forward, o.SocketDir)
		}
		vopts = append(vopts, vertex.WithSocketDir(dir))
		spec.Map = func(env vertex.Env) (udf.Mapper, error) {
			c := mapclient.New(env.SocketDir, env.Log, udf.WithCalls(env.Calls))
			env.Remote(udf.KindMap, c)
			return c, nil
		}
	}
	reg := observe.NewRegistry()
	vopts = append(vopts, vertex.WithRegisterer(reg))
	v, err := vertex.New(spec, vopts...)
	if err != nil {
		return err
	}
	ready := &readiness{v: v, log: o.Log}
	if o.Forward != "" {
		probe := newForwardProbe(filepath.Dir(o.Forward), clock.Real())
		defer probe.Close()
		ready.extra = probe.Ready
	}
	web, err := observe.Listen(o.Addr, observe.Handlers{Gatherer: reg, Ready: func() error {
		if err := servable(v); err != nil || ready.extra == nil {
			return err
		}
		return ready.extra()
	},
		Status: func() any { return v.Status() }, PageData: func(since int64) any { return v.PageView(since) }}, o.Log)
	if err != nil {
		v.Close()
		return cli.Usagef("serve: --addr (%q): %v", o.Addr, err)
	}
	o.Log.Info("serving metrics, health and status", zap.String("addr", web.Addr().String()))
	defer web.Start()()
	vctx, stopVertex := context.WithCancel(context.WithoutCancel(ctx))
	defer stopVertex()
	ran := make(chan error, 1)
	go func() { ran <- v.Run(vctx) }()
	if err := awaitReady(ctx, v, ran, o.Log); err != nil {
		stopVertex()
		<-ran
		if se := (*vertex.StartupError)(nil); errors.As(err, &se) {
			return cli.Usagef("serve: --forward (%q) never answered: %v", o.Forward, err)
		}
		return fmt.Errorf("serve: map: %w", err)
	}
	if ctx.Err() != nil {
		stopVertex()
		return <-ran
	}
	mode, err := mapMode(o)
	if err != nil {
		stopVertex()
		return errors.Join(err, <-ran)
	}
	o.Log.Info("serving map", zap.String("mode", mode.MapMode()), zap.String("socket", filepath.Join(o.SocketDir, mode.Socket())),
		zap.String("forward", o.Forward))
	var served error
	rq := readyMapQueue{q, ready}
	switch mode {
	case serverinfo.KindBatchMap:
		served = batchmapper.NewServer(rq, batchmapper.WithSocketDir(o.SocketDir)).Start(ctx)
	case serverinfo.KindMapStream:
		served = mapstreamer.NewServer(rq, mapstreamer.WithSocketDir(o.SocketDir)).Start(ctx)
	default:
		served = mapper.NewServer(rq, mapper.WithSocketDir(o.SocketDir)).Start(ctx)
	}
	stopVertex()
	return errors.Join(served, <-ran)
}

// mapSockets are the names a --forward socket may have: the sockets of the
// three map modes, of which the server-info file beside it names one.
var mapSockets = []string{serverinfo.KindMap.Socket(), serverinfo.KindBatchMap.Socket(), serverinfo.KindMapStream.Socket()}

// mapMode returns the kind of map the role serves: --map-mode; without
// it, the mode the --forward server's server-info file declares (read once
// the vertex is ready, that is once the server has answered), or unary map
// without --forward.
func mapMode(o Options) (serverinfo.Kind, error) {
	switch {
	case o.MapMode != "":
		return serverinfo.ServerInfo{Metadata: map[string]string{serverinfo.MapModeKey: o.MapMode}}.MapKind(), nil
	case o.Forward == "":
		return serverinfo.KindMap, nil
	}
	info, err := serverinfo.Read(filepath.Join(filepath.Dir(o.Forward), serverinfo.KindMap.InfoFile()))
	if err != nil {
		return "", fmt.Errorf("serve: map: the --forward server's mode (%s): %w", serverinfo.MapModeKey, err)
	}
	return info.MapKind(), nil
}

// mapSpec returns the spec of the vertex whose map is served: the file's
// MonoVertex, or its pipeline vertex o.Vertex, which must be a map vertex
// with a rate limit.
func mapSpec(o Options) (vertex.Spec, error) {
	pt := o.part()
	if pt.monoVertex {
		m := o.File.MonoVertex
		if m.Spec.UDF == nil {
			return vertex.Spec{}, cli.Usagef("serve: map: spec.udf is not set in %s: the map role serves the vertex's udf", o.Path)
		}
		if m.Spec.Limits.GetRateLimit() == nil {
			return vertex.Spec{}, cli.Usagef("serve: map: spec.limits.rateLimit is not set in %s: the map role throttles under it", o.Path)
		}
		return o.spec()
	}
	switch {
	case !pt.found:
		return vertex.Spec{}, cli.Usagef("serve: map: --vertex is required with the Pipeline %s", o.Path)
	case pt.source != nil:
		return vertex.Spec{}, cli.Usagef("serve: map: %s.source is set (%s): the map role serves a map vertex, not a source", pt.path, pt.what)
	case pt.sink != nil:
		return vertex.Spec{}, cli.Usagef("serve: map: %s.sink is set (%s): the map role serves a map vertex, not a sink", pt.path, pt.what)
	case pt.udf == nil:
		return vertex.Spec{}, cli.Usagef("serve: map: %s.udf is not set (%s): the map role serves a map vertex", pt.path, pt.what)
	case pt.udf.GroupBy != nil:
		return vertex.Spec{}, cli.Usagef("serve: map: %s.udf.groupBy is set (%s): the map role serves a map, not a reduce", pt.path, pt.what)
	}
	l, err := o.File.Pipeline.VertexLimits(o.Vertex)
	if err != nil {
		return vertex.Spec{}, err
	}
	if l.Limits.GetRateLimit() == nil {
		return vertex.Spec{}, cli.Usagef("serve: map: %s.limits.rateLimit is not set (nor spec.limits.rateLimit) in %s: the map role throttles under it", pt.path, o.Path)
	}
	return o.spec()
}
