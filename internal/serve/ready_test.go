package serve

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
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
