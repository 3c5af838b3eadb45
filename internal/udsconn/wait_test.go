package udsconn_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udsconn"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

// newMapConn is a connection to the map server in dir, as the runtime's map
// UDF makes it.
func newMapConn(t *testing.T, dir string, opts ...udsconn.Option) (*udsconn.Conn, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	c := udsconn.New(dir, serverinfo.KindMap, func(ctx context.Context, cc *grpc.ClientConn) (bool, error) {
		resp, err := mapv1.NewMapClient(cc).IsReady(ctx, &emptypb.Empty{})
		return resp.GetReady(), err
	}, zap.New(core), opts...)
	t.Cleanup(func() { c.Close() })
	return c, logs
}

// startMapServer starts a unary map server of sluice's SDK in dir: it listens
// on map.sock and writes its server-info file. It is stopped when the test
// ends.
func startMapServer(t *testing.T, dir string) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cat := func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
		return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys)}
	}
	go func() { done <- mapper.NewServer(mapper.MapperFunc(cat), mapper.WithSocketDir(dir)).Start(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("map server: %v", err)
		}
	})
}

// writeInfo writes the server-info file a server of kind writes in dir.
func writeInfo(t *testing.T, dir string, kind serverinfo.Kind, version string) {
	t.Helper()
	if err := serverinfo.Write(filepath.Join(dir, kind.InfoFile()), serverinfo.Default(kind, version)); err != nil {
		t.Fatal(err)
	}
}

// getAsync runs Get in a goroutine; the channel gets its result.
func getAsync(c *udsconn.Conn) <-chan getResult {
	done := make(chan getResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_, info, err := c.Get(ctx)
		done <- getResult{info, err}
	}()
	return done
}

type getResult struct {
	info serverinfo.ServerInfo
	err  error
}

// A map-stream server left its server-info file behind; the runtime reads it
// and waits on mapstream.sock. A unary map server then starts and writes its
// own file: the runtime reads the file again, says so, and connects to
// map.sock, instead of waiting on mapstream.sock for ever.
func TestStaleServerInfoIsReadAgain(t *testing.T) {
	dir := socketDir(t)
	info := filepath.Join(dir, serverinfo.MapInfoFile)
	stale := filepath.Join(dir, serverinfo.MapStreamSocket)
	writeInfo(t, dir, serverinfo.KindMapStream, "stale")
	c, logs := newMapConn(t, dir)
	done := getAsync(c)
	runtest.WaitFor(t, "Ready to name mapstream.sock", func() bool {
		err := c.Ready()
		return err != nil && strings.Contains(err.Error(), "waiting for "+stale+" to be ready")
	}, runtest.Within(wait))

	startMapServer(t, dir)
	r := <-done
	if r.err != nil {
		t.Fatalf("Get: %v", r.err)
	}
	if r.info.MapKind() != serverinfo.KindMap {
		t.Fatalf("Get returned the info of a %s server; want the unary map's", r.info.MapKind())
	}
	if err := c.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	changed := logs.FilterMessageSnippet("server-info file changed").All()
	if len(changed) != 1 {
		t.Fatalf("%d warnings that the server-info file changed; want 1 (all: %v)", len(changed), logs.All())
	}
	f := changed[0].ContextMap()
	if changed[0].Level != zapcore.WarnLevel || f["file"] != info || f["waitedFor"] != stale ||
		f["socket"] != filepath.Join(dir, serverinfo.MapSocket) || f["waited"] == nil {
		t.Errorf("the warning %q %v; want the file, the socket waited for, the one it names now and how long", changed[0].Message, f)
	}
	if got := logs.FilterMessage("connected to UDF server").All(); len(got) != 1 || got[0].ContextMap()["socket"] != filepath.Join(dir, serverinfo.MapSocket) {
		t.Errorf("connected %v; want once, to map.sock", got)
	}
}

// poll is how often a connection asks a server whether it is ready.
const poll = 100 * time.Millisecond

// step moves clk by d, in polls, once Get is waiting on it after each; it
// returns early, false, when Get returned.
func step(t *testing.T, clk *clock.Manual, d time.Duration, done <-chan getResult) (getResult, bool) {
	t.Helper()
	for moved := time.Duration(0); moved < d; moved += poll {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		blocked := make(chan error, 1)
		go func() { blocked <- clk.BlockUntil(ctx, 1) }()
		select {
		case r := <-done:
			cancel()
			<-blocked
			return r, false
		case err := <-blocked:
			cancel()
			if err != nil {
				t.Fatal("Get neither returned nor waited on the clock")
			}
		}
		clk.Advance(poll)
	}
	return getResult{}, true
}

// waitedAt lists the time waited that the log lines with msg name.
func waitedAt(logs *observer.ObservedLogs, msg string) []time.Duration {
	var out []time.Duration
	for _, e := range logs.FilterMessage(msg).All() {
		d, _ := e.ContextMap()["waited"].(time.Duration)
		out = append(out, d)
	}
	return out
}

// A wait that goes on is logged at 5s, 10s, 20s and 40s (not at every poll),
// with the file read again every 2s; a server-info file removed meanwhile is
// logged and waited for again, and Ready says what the connection waits for
// at each moment.
func TestLongWaitIsLogged(t *testing.T) {
	const (
		stillSocket = "still waiting for the UDF server's socket to be ready; its server-info file, read again, still names it"
		stillFile   = "still waiting for the UDF server's server-info file"
		removed     = "the server-info file was removed while the socket it named was not ready; waiting for the file again"
	)
	dir := socketDir(t)
	info := filepath.Join(dir, serverinfo.MapInfoFile)
	sock := filepath.Join(dir, serverinfo.MapSocket)
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	writeInfo(t, dir, serverinfo.KindMap, "no server yet")
	c, logs := newMapConn(t, dir, udsconn.WithClock(clk))
	done := getAsync(c)

	if _, ok := step(t, clk, 45*time.Second, done); !ok {
		t.Fatal("Get returned without a server")
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second}
	if got := waitedAt(logs, stillSocket); !reflect.DeepEqual(got, want) {
		t.Fatalf("the wait for the socket was logged at %v; want %v", got, want)
	}
	e := logs.FilterMessage(stillSocket).All()[0]
	if f := e.ContextMap(); e.Level != zapcore.WarnLevel || f["file"] != info || f["socket"] != sock || f["lastAnswer"] == "" {
		t.Errorf("the log line %v; want a warning naming the file, the socket and the last answer", f)
	}
	if err := c.Ready(); err == nil || !strings.Contains(err.Error(), "waiting for "+sock+" to be ready (server-info file "+info+")") {
		t.Fatalf("Ready = %v; want the socket waited for", err)
	}

	if err := os.Remove(info); err != nil {
		t.Fatal(err)
	}
	if _, ok := step(t, clk, 2*time.Second, done); !ok {
		t.Fatal("Get returned without a server")
	}
	if got := logs.FilterMessage(removed).All(); len(got) != 1 || got[0].ContextMap()["waitedFor"] != sock || got[0].ContextMap()["file"] != info {
		t.Fatalf("warnings of the removal: %v; want one naming the file and the socket", got)
	}
	if err := c.Ready(); err == nil || !strings.Contains(err.Error(), "waiting for the server-info file "+info) {
		t.Fatalf("Ready = %v; want the server-info file waited for", err)
	}
	if _, ok := step(t, clk, 6*time.Second, done); !ok {
		t.Fatal("Get returned without a server")
	}
	if got := waitedAt(logs, stillFile); len(got) != 1 || got[0] < 5*time.Second || got[0] > 5*time.Second+poll {
		t.Fatalf("the wait for the file was logged at %v; want once, at 5s", got)
	}

	startMapServer(t, dir)
	r, ok := step(t, clk, time.Hour, done)
	if ok || r.err != nil {
		t.Fatalf("Get = %v (returned %v)", r.err, !ok)
	}
	if err := c.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
}
