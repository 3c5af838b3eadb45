// Package serve is `vertex serve`: one process that serves Numaflow's
// user-defined protocol for one role of a vertex (its sink, its source or
// its map), configured with sluice's YAML for that part, so that a Numaflow
// Pipeline runs sluice's throttle as a user-defined container.
//
// Each role is a [Role] that a file of this package registers; Command
// parses the flags shared by every role, loads the file and runs the role
// until SIGTERM or SIGINT.
package serve

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// DefaultSocketDir is where Numaflow's runtime looks for the sockets and
// server-info files of user-defined containers.
const DefaultSocketDir = "/var/run/numaflow"

// DefaultAddr is where a role serves /metrics, /status and the live page:
// beside the numa container's 2469 and 2470 in the same pod.
const DefaultAddr = ":2471"

// Options is what Command hands a role.
type Options struct {
	// File is the loaded YAML, and Path its path.
	File *config.File
	Path string
	// Vertex names the pipeline vertex whose part is served ("" for a
	// MonoVertex).
	Vertex string
	// SocketDir holds the role's socket and server-info file.
	SocketDir string
	// Addr is the HTTP address of /metrics, /status and the live page.
	Addr string
	// Forward is the map role's second socket: the user's own map server,
	// whose results it relays ("" to pass each message on unchanged).
	Forward string
	// MapMode is the map role's map.v1 flavour (serverinfo.MapModeUnary,
	// MapModeBatch or MapModeStream): "" serves what the --forward
	// server's server-info file declares, or unary map without --forward.
	MapMode string
	Log     *zap.Logger
}

// mapModes are the values of --map-mode.
var mapModes = []string{serverinfo.MapModeUnary, serverinfo.MapModeBatch, serverinfo.MapModeStream}

// part is the vertex whose part a role serves, as the file has it: the
// MonoVertex, or the pipeline vertex Options.Vertex.
type part struct {
	// path is its path in the file, "spec" or "spec.vertices[i]", and
	// what names it in errors (MonoVertex "mv", vertex "out").
	path, what        string
	source            *config.Source
	sink              *config.Sink
	udf               *config.UDF
	monoVertex, found bool
}

// part returns the vertex o names; found is false for a pipeline vertex the
// file does not have.
func (o Options) part() part {
	if m := o.File.MonoVertex; m != nil {
		return part{path: "spec", what: fmt.Sprintf("MonoVertex %q", m.Metadata.Name), source: m.Spec.Source, sink: m.Spec.Sink,
			udf: m.Spec.UDF, monoVertex: true, found: true}
	}
	for i, v := range o.File.Pipeline.Spec.Vertices {
		if v.Name == o.Vertex {
			return part{path: fmt.Sprintf("spec.vertices[%d]", i), what: fmt.Sprintf("vertex %q", v.Name), source: v.Source, sink: v.Sink,
				udf: v.UDF, found: true}
		}
	}
	return part{what: fmt.Sprintf("vertex %q", o.Vertex)}
}

// spec returns the runtime spec of the vertex o names, as vertex run builds
// it.
func (o Options) spec() (vertex.Spec, error) {
	if m := o.File.MonoVertex; m != nil {
		return vertexconfig.FromMonoVertex(m), nil
	}
	return vertexconfig.PipelineVertex(o.File.Pipeline, o.Vertex, "")
}

// Role is one part of a vertex that vertex serve can serve.
type Role struct {
	// Name is the value of --role: sink, source or map.
	Name string
	// Help is the role's line in the command's help.
	Help string
	// Run serves the role until ctx is done, then stops gracefully: what
	// it holds in flight is finished or handed back, never lost. A bad
	// part of the file is a usage error (cli.Usagef) naming the field.
	Run func(ctx context.Context, o Options) error
}

var roles = map[string]Role{}

// register adds r to the roles Command serves; each role's file calls it
// from init.
func register(r Role) {
	if _, dup := roles[r.Name]; dup {
		panic("serve: role " + r.Name + " registered twice")
	}
	roles[r.Name] = r
}

// roleNames returns the registered roles' names, sorted.
func roleNames() []string {
	names := make([]string, 0, len(roles))
	for n := range roles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Command is `vertex serve`.
func Command(args []string, stdout, stderr io.Writer) error {
	var help strings.Builder
	for _, n := range roleNames() {
		fmt.Fprintf(&help, "  %-7s %s\n", n, roles[n].Help)
	}
	fs := cli.NewFlagSet("serve", `usage: vertex serve --role ROLE -f FILE [flags]

Serves Numaflow's user-defined protocol for one part of the vertex in FILE
(a MonoVertex, or with --vertex a pipeline vertex), under its rate limit, as
a user-defined container of a Numaflow pod: its socket and server-info file
in --uds-dir, where Numaflow's runtime looks for them. Roles:
`+help.String()+`
flags:
`)
	role := fs.String("role", "", "the part to serve: "+strings.Join(roleNames(), ", ")+" (required)")
	file := fs.String("f", "", "MonoVertex or Pipeline YAML (required)")
	vertex := fs.String("vertex", "", "with a Pipeline: the vertex whose part to serve")
	dir := fs.String("uds-dir", DefaultSocketDir, "directory of the socket and server-info file")
	addr := fs.String("addr", DefaultAddr, "HTTP address of /metrics, /status and the live page")
	forward := fs.String("forward", "", "map: the user's map server's socket, whose results to relay (empty: pass messages on unchanged)")
	mapMode := fs.String("map-mode", "", "map: the map served: "+strings.Join(mapModes, ", ")+
		" (empty: the --forward server's MAP_MODE, else "+serverinfo.MapModeUnary+")")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.ParseArgs(args, stdout); err != nil {
		return err
	}
	r, ok := roles[*role]
	switch {
	case *role == "":
		return cli.Usagef("serve: --role is required (%s)", strings.Join(roleNames(), ", "))
	case !ok:
		return cli.Usagef("serve: --role (%q) is not a role (%s)", *role, strings.Join(roleNames(), ", "))
	case *file == "":
		return cli.Usagef("serve: -f is required")
	case *forward != "" && *role != "map":
		return cli.Usagef("serve: --forward is for --role map, not %s", *role)
	case *mapMode != "" && *role != "map":
		return cli.Usagef("serve: --map-mode is for --role map, not %s", *role)
	case *mapMode != "" && !slices.Contains(mapModes, *mapMode):
		return cli.Usagef("serve: --map-mode (%q) is not a map mode (%s)", *mapMode, strings.Join(mapModes, ", "))
	}
	f, err := cli.LoadConfig(*file)
	if err != nil {
		return err
	}
	if f.MonoVertex != nil && *vertex != "" {
		return cli.Usagef("serve: --vertex is for Pipelines; %s is a MonoVertex", *file)
	}
	if f.Pipeline != nil && !slices.ContainsFunc(f.Pipeline.Spec.Vertices, func(v config.Vertex) bool { return v.Name == *vertex }) {
		return cli.Usagef("serve: --vertex (%q) is not a vertex of %s", *vertex, *file)
	}
	log, err := cli.NewLogger(*logLevel, stderr)
	if err != nil {
		return cli.Usagef("serve: --log-level: %v", err)
	}
	defer log.Sync()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return r.Run(ctx, Options{File: f, Path: *file, Vertex: *vertex, SocketDir: *dir, Addr: *addr, Forward: *forward, MapMode: *mapMode, Log: log.With(zap.String("role", r.Name))})
}
