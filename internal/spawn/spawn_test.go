package spawn

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/pipeline/sideinputs"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/udf/mapclient"
)

// helperEnv makes TestHelperMapServer, in a test binary started as a
// container, run a unary map server.
const helperEnv = "SLUICE_TEST_HELPER"

// spawnWait bounds every wait of the spawn tests.
const spawnWait = 15 * time.Second

// TestHelperMapServer is not a test: started as a container with helperEnv
// set, it is a unary map server in $SLUICE_UDS_DIR that passes every
// message on. It exits 3 at once when it finds a map
// server's info file or socket in the directory at its start: Start
// removes those before it starts a container, so that the vertex only
// ever reads a file this server wrote.
func TestHelperMapServer(t *testing.T) {
	if os.Getenv(helperEnv) != "map" {
		t.Skip("runs only as a spawned container")
	}
	dir := os.Getenv(EnvUDSDir)
	for _, name := range []string{serverinfo.MapInfoFile, serverinfo.MapSocket, serverinfo.MapStreamSocket} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			fmt.Fprintf(os.Stderr, "helper: %s was there when the container started\n", name)
			os.Exit(3)
		}
	}
	cat := func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
		return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys)}
	}
	if err := mapper.NewServer(mapper.MapperFunc(cat)).Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// lockedBuffer is a bytes.Buffer that the group's goroutines may write to
// while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// shortDir returns a new temporary directory whose path is short enough for
// unix sockets in it.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// staleSocket leaves a socket file at path that no server listens on, as a
// server killed with SIGKILL does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
}

// A map-stream server that was killed leaves its server-info file and its
// socket behind. A unary map spawned next in the same directory must be
// connected to on map.sock: Start removes the leftovers before the
// container starts, so the vertex never reads the old file and never waits on
// mapstream.sock.
func TestSpawnRemovesStaleServerInfo(t *testing.T) {
	dir := shortDir(t)
	if err := serverinfo.Write(filepath.Join(dir, serverinfo.MapInfoFile), serverinfo.Default(serverinfo.KindMapStream, "stale")); err != nil {
		t.Fatal(err)
	}
	staleSocket(t, filepath.Join(dir, serverinfo.MapStreamSocket))

	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	var stderr lockedBuffer
	spec := &config.Container{Image: "helper", Command: []string{os.Args[0]}, Args: []string{"-test.run=^TestHelperMapServer$"},
		Env: []config.EnvVar{{Name: helperEnv, Value: "map"}}}
	f := &config.File{MonoVertex: &config.MonoVertex{Metadata: config.Metadata{Name: "stale"},
		Spec: config.MonoVertexSpec{UDF: &config.UDF{Container: spec}}}}
	g, err := Start(f, dir, Deps{Commands: true, Stdout: &stderr, Stderr: &stderr, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()

	m := mapclient.New(dir, log)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), spawnWait)
	defer cancel()
	if err := m.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v\nReady: %v\nthe container wrote:\n%s", err, m.Ready(), stderr.String())
	}
	mapOne(ctx, t, m, &stderr)
	if got := connectedTo(logs); got != filepath.Join(dir, serverinfo.MapSocket) {
		t.Fatalf("connected to %q; want %s", got, filepath.Join(dir, serverinfo.MapSocket))
	}
	for _, what := range []string{"removed a server-info file an earlier server left, before starting the container",
		"removed a socket an earlier server left, before starting the container"} {
		if n := logs.FilterMessage(what).Len(); n != 1 {
			t.Errorf("%d log lines %q; want 1", n, what)
		}
	}

	// Killed, the server leaves its files again; they are removed before the
	// container starts again, and the vertex carries on with the new server.
	started := logs.FilterMessage("started user-defined container").All()
	pid, _ := started[len(started)-1].ContextMap()["pid"].(int64)
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	mapOne(ctx, t, m, &stderr)
	if n := logs.FilterMessage("started user-defined container").Len(); n != 2 {
		t.Errorf("the container started %d times; want twice", n)
	}
	if n := logs.FilterMessage("connected to UDF server").Len(); n != 2 {
		t.Errorf("connected %d times; want twice", n)
	}
}

// mapOne maps one message through m, retrying (as the forwarder does) while
// the server is away, until ctx ends.
func mapOne(ctx context.Context, t *testing.T, m *mapclient.Client, stderr *lockedBuffer) {
	t.Helper()
	in := []isb.Message{{ID: "a", Value: []byte("hello"), Keys: []string{"k"}, EventTime: time.UnixMilli(1_700_000_000_000)}}
	for {
		out, _, err := m.Map(ctx, in, nil)
		if err == nil {
			if len(out) != 1 || string(out[0].Value) != "hello" {
				t.Fatalf("Map = %v; want the message back", out)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("Map: %v\nReady: %v\nthe container wrote:\n%s", err, m.Ready(), stderr.String())
		}
	}
}

// connectedTo is the socket of the last connection logged.
func connectedTo(logs *observer.ObservedLogs) string {
	var sock string
	for _, e := range logs.FilterMessage("connected to UDF server").All() {
		sock, _ = e.ContextMap()["socket"].(string)
	}
	return sock
}

// clearFiles removes the server-info files of the container's kinds and their
// sockets no server listens on; it leaves a socket a server listens on, a
// file in a socket's place that is not a socket, and the files of other
// containers, saying why for the first two.
func TestClearFiles(t *testing.T) {
	dir := shortDir(t)
	path := func(name string) string { return filepath.Join(dir, name) }
	for _, name := range []string{serverinfo.MapInfoFile, serverinfo.ReduceInfoFile, serverinfo.SinkInfoFile} {
		if err := serverinfo.Write(path(name), serverinfo.Default(serverinfo.KindSink, "old")); err != nil {
			t.Fatal(err)
		}
	}
	staleSocket(t, path(serverinfo.MapStreamSocket))
	staleSocket(t, path(serverinfo.ReduceStreamSocket))
	staleSocket(t, path(serverinfo.SinkSocket))
	live, err := net.Listen("unix", path(serverinfo.MapSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := os.WriteFile(path(serverinfo.BatchMapSocket), []byte("not a socket"), 0o644); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zapcore.InfoLevel)
	if err := clearFiles(dir, container{role: "udf"}, zap.New(core)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		kept bool
	}{
		{serverinfo.MapInfoFile, false},
		{serverinfo.MapStreamSocket, false},
		{serverinfo.ReduceInfoFile, false},
		{serverinfo.ReduceStreamSocket, false},
		{serverinfo.MapSocket, true},
		{serverinfo.BatchMapSocket, true},
		{serverinfo.SinkInfoFile, true},
		{serverinfo.SinkSocket, true},
	}
	for _, c := range cases {
		_, err := os.Lstat(path(c.name))
		if kept := err == nil; kept != c.kept {
			t.Errorf("%s: kept = %v, want %v (%v)", c.name, kept, c.kept, err)
		}
	}
	warned := map[string]string{}
	for _, e := range logs.FilterLevelExact(zapcore.WarnLevel).All() {
		for _, f := range []string{"socket", "file"} {
			if v, ok := e.ContextMap()[f].(string); ok {
				warned[v] = e.Message
			}
		}
	}
	if len(warned) != 2 || warned[path(serverinfo.MapSocket)] == "" || warned[path(serverinfo.BatchMapSocket)] == "" {
		t.Errorf("warnings %q; want one for the live socket and one for the file that is not a socket", warned)
	}
	if err := clearFiles(dir, container{role: "udf"}, zap.New(core)); err != nil {
		t.Fatalf("clearing again: %v", err)
	}

	// A server-info file that cannot be removed (here a directory that is
	// not empty) is an error that names it.
	blocked := filepath.Join(shortDir(t), serverinfo.SourceInfoFile)
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = clearFiles(filepath.Dir(blocked), container{role: "udsource"}, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), blocked) {
		t.Errorf("clearing a server-info file that cannot be removed: %v; want an error naming it", err)
	}
}

// Every role a container can have has the kinds of server it runs.
func TestRoleKinds(t *testing.T) {
	spec := &config.Container{Command: []string{"x"}}
	cs := containersOf(&config.Source{UDSource: &config.UDContainer{Container: spec}, Transformer: &config.Transformer{Container: spec}},
		&config.UDF{Container: spec},
		&config.Sink{AbstractSink: config.AbstractSink{UDSink: &config.UDContainer{Container: spec}}, Fallback: &config.AbstractSink{UDSink: &config.UDContainer{Container: spec}},
			OnSuccess: &config.AbstractSink{UDSink: &config.UDContainer{Container: spec}}})
	cs = append(cs, sideInputContainer(config.SideInput{Name: "ticker", Container: spec}))
	if len(cs) != len(roleKinds) {
		t.Fatalf("%d containers, %d roles", len(cs), len(roleKinds))
	}
	for _, c := range cs {
		if len(roleKinds[c.role]) == 0 {
			t.Errorf("role %s has no kinds", c.role)
		}
	}
}

// A udsink, udsource or UDF of a vertex that names side inputs may watch the
// side inputs' directory from its first instruction (numaflow-go's
// sink_sideinput and simple_source_with_sideinput exit when they cannot):
// Start creates the directory before it starts the vertex's containers.
func TestSideInputsDirBeforeContainers(t *testing.T) {
	siDir := filepath.Join(shortDir(t), "side-inputs")
	check := &config.Container{Image: "check", Command: []string{"/bin/sh", "-c",
		`if test -d "$` + sideinputs.EnvDir + `"; then echo there; else echo missing; fi; exec sleep 60`}}
	f := &config.File{Pipeline: &config.Pipeline{Metadata: config.Metadata{Name: "si"}, Spec: config.PipelineSpec{
		Vertices: []config.Vertex{{Name: "out", SideInputs: []string{"t"},
			Sink: &config.Sink{AbstractSink: config.AbstractSink{UDSink: &config.UDContainer{Container: check}}}}},
		SideInputs: []config.SideInput{{Name: "t", Container: &config.Container{Image: "t", Command: []string{"/bin/sh", "-c", "exec sleep 60"}}}},
	}}}
	var out lockedBuffer
	g, err := Start(f, shortDir(t), Deps{Commands: true, Stdout: &out, Stderr: &out, SideInputsDir: siDir})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	for deadline := time.Now().Add(spawnWait); out.String() == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the udsink container wrote nothing")
		}
	}
	if got := strings.TrimSpace(out.String()); got != "there" {
		t.Fatalf("the udsink container found %s missing at its start (it wrote %q)", siDir, got)
	}
}
