package udfserver

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

// concurrentMap serves map.v1.Map with ServeConcurrent alone (no handshake):
// a request is answered with its id, except "slow", answered once the stream
// is cancelled, and "fail", whose handler fails. When ServeConcurrent has
// returned, the stacks of the goroutines it started that are still running go
// to left.
type concurrentMap struct {
	mapv1.UnimplementedMapServer
	left chan []string
}

func (m *concurrentMap) MapFn(stream mapv1.Map_MapFnServer) error {
	err := ServeConcurrent(stream, func(ctx context.Context, req *mapv1.MapRequest, send func(*mapv1.MapResponse) error) error {
		switch req.GetId() {
		case "fail":
			return status.Error(codes.Internal, "handler failed")
		case "slow":
			<-ctx.Done()
		}
		return send(&mapv1.MapResponse{Id: req.GetId()})
	})
	m.left <- settledGoroutinesIn("/udfserver/concurrent.go:")
	return err
}

// settledGoroutinesIn is goroutinesIn once the watchdog, which has said it
// is done, has returned too: it yields until then, a bounded number of
// times.
func settledGoroutinesIn(file string) []string {
	left := goroutinesIn(file)
	for i := 0; i < 10000 && slices.ContainsFunc(left, func(s string) bool { return strings.Contains(s, ").watch(") }); i++ {
		runtime.Gosched()
		left = goroutinesIn(file)
	}
	return left
}

// goroutinesIn returns the stacks of the other goroutines running code of file.
func goroutinesIn(file string) []string {
	buf := make([]byte, 1<<20)
	stacks := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
	var out []string
	for _, s := range stacks[1:] { // the first is this goroutine's
		if strings.Contains(s, file) {
			out = append(out, s)
		}
	}
	return out
}

// startConcurrentMap serves a concurrentMap on a unix socket and opens a
// stream to it. stop ends the stream, the connection and the server.
func startConcurrentMap(t *testing.T) (m *concurrentMap, stream mapv1.Map_MapFnClient, stop func()) {
	t.Helper()
	path := filepath.Join(sdktest.Dir(t), "map.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	m = &concurrentMap{left: make(chan []string, 1)}
	srv := grpc.NewServer()
	mapv1.RegisterMapServer(srv, m)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	conn := sdktest.Dial(t, path)
	ctx, cancel := context.WithCancel(sdktest.Context(t))
	stream, err = mapv1.NewMapClient(conn).MapFn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m, stream, func() {
		cancel()
		_ = conn.Close()
		srv.Stop()
		<-served
	}
}

// When the client closes its side, every goroutine of ServeConcurrent has
// returned when it does.
func TestServeConcurrentClientCloses(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, stream, stop := startConcurrentMap(t)
	defer stop()
	want := []string{"a", "b", "c", "d"}
	for _, id := range want {
		if err := stream.Send(&mapv1.MapRequest{Id: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv = %v", err)
		}
		got = append(got, resp.GetId())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("answers %q, want %q", got, want)
	}
	if left := <-m.left; len(left) > 0 {
		t.Errorf("%d goroutines of ServeConcurrent left after it returned:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// When a handler fails, ServeConcurrent cancels the others and returns with
// every goroutine it started returned but the one receiving, still in Recv
// until the RPC ends; then none is left.
func TestServeConcurrentHandlerFails(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, stream, stop := startConcurrentMap(t)
	defer stop()
	for _, id := range []string{"slow", "a", "fail"} {
		if err := stream.Send(&mapv1.MapRequest{Id: id}); err != nil {
			t.Fatal(err)
		}
	}
	// The client sends nothing more and does not close its side: only
	// the end of the RPC ends the receiving goroutine's Recv.
	left := <-m.left
	if len(left) != 1 || !strings.Contains(left[0], ".receive(") {
		t.Errorf("goroutines of ServeConcurrent left after it returned: %d, want the one receiving:\n%s",
			len(left), strings.Join(left, "\n\n"))
	}
	for {
		_, err := stream.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.Internal {
			t.Errorf("Recv = %v, want the handler's error", err)
		}
		break
	}
	// Once the RPC has ended, nothing is left (VerifyNone, deferred).
}
