package serve

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udstest"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

// TestSinkIsReadyFollowsTheStore: the served sink's IsReady answers true
// while its store answers, false once the store is lost, and true again
// once it is back.
func TestSinkIsReadyFollowsTheStore(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	srv := httptest.NewServer(&endpoint{bodies: map[string]int{}})
	defer srv.Close()
	dir, _ := startSink(t, sinkYAML(srv.URL, fmt.Sprintf(`  limits:
    readTimeout: 100ms
    rateLimit:
      max: 100
      min: 100
      rampUpDuration: 0s
      store:
        redisStore:
          mode: single
          url: redis://%s
`, rs.Addr)))
	connect(t, dir) // waits for the socket
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, serverinfo.KindSink.Socket()),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := sinkv1.NewSinkClient(conn)
	ready := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, err := c.IsReady(ctx, &emptypb.Empty{})
		return err == nil && r.GetReady()
	}
	runtest.WaitFor(t, "IsReady true with the store up", ready)
	rs.Kill()
	runtest.WaitFor(t, "IsReady false with the store lost", func() bool { return !ready() }, runtest.Within(30*time.Second))
	rs.Restart(t)
	runtest.WaitFor(t, "IsReady true with the store back", ready, runtest.Within(30*time.Second))
}

// TestMapIsReadyFollowsTheForward: the served map's IsReady answers false
// once the user's map server on --forward is gone, and while a server in
// its place takes connections and never answers (its socket and server-info
// file there), with the reason logged; and true again once a server that
// answers is back.
func TestMapIsReadyFollowsTheForward(t *testing.T) {
	fwd, dir := shortDir(t), shortDir(t)
	startUser := func() (stop func()) {
		uctx, ustop := context.WithCancel(context.Background())
		udone := make(chan error, 1)
		go func() {
			udone <- mapper.NewServer(mapper.MapperFunc(func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
				return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys)}
			}), mapper.WithSocketDir(fwd)).Start(uctx)
		}()
		return func() {
			ustop()
			<-udone
		}
	}
	stopUser := startUser()
	defer func() { stopUser() }()
	path := filepath.Join(t.TempDir(), "mv.yaml")
	if err := os.WriteFile(path, []byte(mapMonoVertex), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := cli.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	log, logs := udstest.ObservedLogger()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runMap(ctx, Options{File: f, Path: path, SocketDir: dir, Addr: "127.0.0.1:0",
			Forward: filepath.Join(fwd, serverinfo.KindMap.Socket()), Log: log})
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("map role did not stop")
		}
	}()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, serverinfo.KindMap.Socket()),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := mapv1.NewMapClient(conn)
	ready := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		r, err := c.IsReady(ctx, &emptypb.Empty{})
		return err == nil && r.GetReady()
	}
	runtest.WaitFor(t, "IsReady true with the forward up", ready)
	stopUser()
	stopUser = func() {}
	runtest.WaitFor(t, "IsReady false with the forward gone", func() bool { return !ready() }, runtest.Within(30*time.Second))
	stopMute := muteMapServerIn(t, fwd)
	runtest.WaitFor(t, "the reason of a forward that never answers logged", func() bool {
		if ready() {
			t.Fatal("IsReady true with a forward that never answers")
		}
		for _, e := range logs.FilterMessage("IsReady answers false").All() {
			if err, _ := e.ContextMap()["error"].(string); strings.Contains(err, "did not answer within") {
				t.Log(err)
				return true
			}
		}
		return false
	}, runtest.Within(30*time.Second))
	stopMute()
	stopUser = startUser()
	runtest.WaitFor(t, "IsReady true with the forward back", ready, runtest.Within(30*time.Second))
}

// countingMapper is a user's map whose IsReady answers are counted.
type countingMapper struct {
	mapper.MapperFunc
	asked atomic.Int64
}

func (m *countingMapper) Ready() error { m.asked.Add(1); return nil }

// TestForwardProbe: the probe asks the user's server at most once in its
// interval, however often it is asked, and answers with the reason when the
// server takes the call and never answers.
func TestForwardProbe(t *testing.T) {
	t.Run("asks once an interval", func(t *testing.T) {
		dir := shortDir(t)
		m := &countingMapper{}
		udstest.Start(t, mapper.NewServer(m, mapper.WithSocketDir(dir)).Start)
		clk := clock.NewManual(time.Unix(1_700_000_000, 0))
		p := newForwardProbe(dir, clk)
		defer p.Close()
		runtest.WaitFor(t, "the user's server ready", func() bool {
			clk.Advance(p.every)
			return p.Ready() == nil
		})
		m.asked.Store(0)
		clk.Advance(p.every)
		for range 10 {
			if err := p.Ready(); err != nil {
				t.Fatal(err)
			}
		}
		if n := m.asked.Load(); n != 1 {
			t.Fatalf("asked the user's server %d times in one interval; want 1", n)
		}
		clk.Advance(p.every)
		if err := p.Ready(); err != nil || m.asked.Load() != 2 {
			t.Fatalf("after the interval: %v, asked %d times; want nil, 2", err, m.asked.Load())
		}
	})
	t.Run("a server that never answers", func(t *testing.T) {
		dir := shortDir(t)
		muteMapServerIn(t, dir)
		p := newForwardProbe(dir, clock.NewManual(time.Unix(1_700_000_000, 0)))
		p.timeout = 100 * time.Millisecond
		defer p.Close()
		err := p.Ready()
		if err == nil || !strings.Contains(err.Error(), "did not answer within 100ms") {
			t.Fatalf("Ready = %v; want that IsReady did not answer within 100ms", err)
		}
	})
	t.Run("a server that is gone", func(t *testing.T) {
		p := newForwardProbe(shortDir(t), clock.Real())
		defer p.Close()
		if err := p.Ready(); err == nil || !strings.Contains(err.Error(), "the --forward server is gone") {
			t.Fatalf("Ready = %v; want the --forward server is gone", err)
		}
	})
}
