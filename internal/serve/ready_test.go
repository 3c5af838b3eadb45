package serve

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
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
// once the user's map server on --forward is gone.
func TestMapIsReadyFollowsTheForward(t *testing.T) {
	fwd, dir := shortDir(t), shortDir(t)
	uctx, ustop := context.WithCancel(context.Background())
	defer ustop()
	udone := make(chan error, 1)
	go func() {
		udone <- mapper.NewServer(mapper.MapperFunc(func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
			return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys)}
		}), mapper.WithSocketDir(fwd)).Start(uctx)
	}()
	path := filepath.Join(t.TempDir(), "mv.yaml")
	if err := os.WriteFile(path, []byte(mapMonoVertex), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := cli.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runMap(ctx, Options{File: f, Path: path, SocketDir: dir, Addr: "127.0.0.1:0",
			Forward: filepath.Join(fwd, serverinfo.KindMap.Socket()), Log: zap.NewNop()})
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
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, err := c.IsReady(ctx, &emptypb.Empty{})
		return err == nil && r.GetReady()
	}
	runtest.WaitFor(t, "IsReady true with the forward up", ready)
	ustop()
	<-udone
	runtest.WaitFor(t, "IsReady false with the forward gone", func() bool { return !ready() }, runtest.Within(30*time.Second))
}
