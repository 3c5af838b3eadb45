package serve

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/serverinfo"
)

const mapMonoVertex = `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: mv
spec:
  source:
    generator: {}
  udf:
    builtin:
      name: cat
  sink:
    log: {}
  limits:
    rateLimit:
      max: 10
`

const mapPipeline = `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
  vertices:
    - name: in
      source:
        generator: {}
    - name: cat
      udf:
        builtin:
          name: cat
      limits:
        rateLimit:
          max: 10
    - name: count
      udf:
        builtin:
          name: cat
    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: cat
    - from: cat
      to: count
    - from: count
      to: out
`

// shortDir returns a directory short enough for a unix socket path.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "smap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// muteMapServer returns a directory with a map server's server-info file
// and a socket that takes connections and never answers on them.
func muteMapServer(t *testing.T) string {
	t.Helper()
	dir := shortDir(t)
	muteMapServerIn(t, dir)
	return dir
}

// muteMapServerIn writes a unary map server's server-info file in dir and
// listens on its socket, taking connections and never answering on them,
// until the returned stop or the test's end.
func muteMapServerIn(t *testing.T, dir string) (stop func()) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(dir, "map.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	info := serverinfo.ServerInfo{Protocol: serverinfo.ProtocolUDS, Language: serverinfo.LanguageGo,
		Metadata: map[string]string{serverinfo.MapModeKey: serverinfo.MapModeUnary}}
	if err := serverinfo.Write(filepath.Join(dir, "mapper-server-info"), info); err != nil {
		t.Fatal(err)
	}
	return func() { ln.Close() }
}

// TestMapErrors: a file without the map part or its rate limit, a --forward
// that is not a map server's socket or that never answers: each is one
// usage error naming the field or flag, and the served map never listens.
func TestMapErrors(t *testing.T) {
	old := startupTimeout
	startupTimeout = 300 * time.Millisecond
	t.Cleanup(func() { startupTimeout = old })
	silent := shortDir(t)
	mute := muteMapServer(t)
	for _, tt := range []struct {
		name, yaml string
		args       []string
		want       string
	}{
		{"a MonoVertex without udf", strings.Replace(mapMonoVertex, "  udf:\n    builtin:\n      name: cat\n", "", 1), nil,
			"serve: map: spec.udf is not set"},
		{"a MonoVertex without rate limit", strings.Replace(mapMonoVertex, "  limits:\n    rateLimit:\n      max: 10\n", "", 1), nil,
			"serve: map: spec.limits.rateLimit is not set"},
		{"a pipeline's source vertex", mapPipeline, []string{"--vertex", "in"}, `serve: map: spec.vertices[0].source is set (vertex "in")`},
		{"a pipeline's sink vertex", mapPipeline, []string{"--vertex", "out"}, `serve: map: spec.vertices[3].sink is set (vertex "out")`},
		{"a pipeline vertex without rate limit", mapPipeline, []string{"--vertex", "count"}, "serve: map: spec.vertices[2].limits.rateLimit is not set"},
		{"a pipeline without --vertex", mapPipeline, nil, "serve: --vertex"},
		{"a forward that is not map.sock", mapMonoVertex, []string{"--forward", filepath.Join(silent, "sink.sock")},
			`serve: --forward ("` + filepath.Join(silent, "sink.sock") + `") is not a map server's socket`},
		{"a forward that never answers", mapMonoVertex, []string{"--forward", filepath.Join(silent, "map.sock")},
			`serve: --forward ("` + filepath.Join(silent, "map.sock") + `") never answered`},
		{"a forward that listens and never answers", mapMonoVertex, []string{"--forward", filepath.Join(mute, "map.sock")},
			`serve: --forward ("` + filepath.Join(mute, "map.sock") + `") never answered`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := shortDir(t)
			path := filepath.Join(dir, "v.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			args := append([]string{"--role", "map", "-f", path, "--uds-dir", dir, "--addr", "127.0.0.1:0"}, tt.args...)
			err := Command(args, &out, &errOut)
			if err == nil || !cli.IsUsage(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v; want a usage error containing %q\n%s", err, tt.want, errOut.String())
			}
			t.Log(err)
			if _, err := os.Stat(filepath.Join(dir, "map.sock")); err == nil {
				t.Fatal("the map server listened despite the bad input")
			}
		})
	}
}

// TestMapMode: --map-mode decides; without it the --forward server's
// MAP_MODE, or unary map without --forward; a --forward server without its
// server-info file is an error naming it.
func TestMapMode(t *testing.T) {
	stream := shortDir(t)
	info := serverinfo.ServerInfo{Protocol: serverinfo.ProtocolUDS, Language: serverinfo.LanguageGo,
		Metadata: map[string]string{serverinfo.MapModeKey: serverinfo.MapModeStream}}
	if err := serverinfo.Write(filepath.Join(stream, serverinfo.KindMap.InfoFile()), info); err != nil {
		t.Fatal(err)
	}
	gone := shortDir(t)
	for _, tt := range []struct {
		name string
		o    Options
		want serverinfo.Kind
		err  string
	}{
		{"no flag, no forward", Options{}, serverinfo.KindMap, ""},
		{"the flag", Options{MapMode: serverinfo.MapModeBatch}, serverinfo.KindBatchMap, ""},
		{"the flag over the forward's", Options{MapMode: serverinfo.MapModeUnary, Forward: filepath.Join(stream, "mapstream.sock")}, serverinfo.KindMap, ""},
		{"the forward's", Options{Forward: filepath.Join(stream, "mapstream.sock")}, serverinfo.KindMapStream, ""},
		{"a forward without its info", Options{Forward: filepath.Join(gone, "map.sock")}, "", "the --forward server's mode (MAP_MODE)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mapMode(tt.o)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("mapMode = %v, %v; want an error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("mapMode = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
