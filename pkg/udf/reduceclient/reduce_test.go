package reduceclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udstest"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
	"github.com/sluiceflow/sluice/pkg/sdk/reducestreamer"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/reduceclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// socketDir is a new directory with a path short enough for a unix socket.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "reduce")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// client connects to the server of kind in dir; it is closed when the test
// ends.
func client(t *testing.T, dir string, kind udf.Kind) *reduceclient.Client {
	t.Helper()
	c, err := reduceclient.New(dir, kind, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// describe renders a result "keys=value @eventTime(ms) [tags] metadata".
func describe(r reduceclient.Result) string {
	s := fmt.Sprintf("%s=%s @%d", strings.Join(r.Keys, ","), r.Value, r.EventTime.UnixMilli())
	if len(r.Tags) > 0 {
		s += fmt.Sprint(" ", r.Tags)
	}
	if len(r.Metadata) > 0 {
		s += fmt.Sprint(" ", map[string]map[string][]byte(r.Metadata))
	}
	return s
}

func messages(keys []string, values ...string) []reduceclient.Message {
	var out []reduceclient.Message
	for i, v := range values {
		out = append(out, reduceclient.Message{Message: isb.Message{ID: strconv.Itoa(i), Keys: keys, Value: []byte(v),
			EventTime: time.UnixMilli(60_000 + int64(i)), Headers: map[string]string{"h": v}}})
	}
	return out
}

// summary answers each keys of a window with what the reducer saw: the
// count, the values and headers in order, the window, and whether event
// times and watermarks came through; it passes on the user metadata of the
// last message.
func summary(_ context.Context, keys []string, in <-chan reducer.Datum, md reducer.Metadata) reducer.Messages {
	var vals, hdrs []string
	times := "ok"
	var last *reducer.UserMetadata
	for d := range in {
		vals = append(vals, string(d.Value()))
		hdrs = append(hdrs, d.Headers()["h"])
		if d.EventTime().Before(md.IntervalWindow.Start) || !d.EventTime().Before(md.IntervalWindow.End) || d.Watermark().UnixMilli() != -1 {
			times = fmt.Sprintf("event time %v watermark %v", d.EventTime(), d.Watermark())
		}
		last = d.UserMetadata()
	}
	v := fmt.Sprintf("%d|%s|%s|%d-%d|%s", len(vals), strings.Join(vals, ""), strings.Join(hdrs, ""),
		md.IntervalWindow.Start.UnixMilli(), md.IntervalWindow.End.UnixMilli(), times)
	return reducer.Messages{reducer.NewMessage([]byte(v)).WithKeys(keys).WithTags([]string{"t"}).WithUserMetadata(last)}
}

// One window with two keys, over sluice's own reducer: a result per keys,
// with the window's end less 1 ms as its event time.
func TestReduceWithSDKReducer(t *testing.T) {
	dir := socketDir(t)
	udstest.Start(t, reducer.NewServer(reducer.ReducerFunc(summary), reducer.WithSocketDir(dir)).Start)
	c := client(t, dir, serverinfo.KindReduce)
	w := reduceclient.Window{Start: time.UnixMilli(60_000), End: time.UnixMilli(120_000)}
	in := append(messages([]string{"a"}, "1", "2", "3"), messages([]string{"b"}, "x")...)
	in[1].Metadata = isb.Metadata{"g": {"k": []byte("v")}}
	in[2].Metadata = isb.Metadata{"g": {"k": []byte("last")}}
	for round := range 2 { // a stream per window, on one connection
		out, err := c.Reduce(testContext(t), w, in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range out {
			if r.Window != w {
				t.Errorf("result window %v, want %v", r.Window, w)
			}
			got = append(got, describe(r))
		}
		slices.Sort(got)
		want := []string{
			"a=3|123|123|60000-120000|ok @119999 [t] map[g:map[k:[108 97 115 116]]]",
			"b=1|x|x|60000-120000|ok @119999 [t]",
		}
		if !slices.Equal(got, want) {
			t.Errorf("round %d: results\n%q\nwant\n%q", round, got, want)
		}
	}
}

// A window with no message gives no result.
func TestEmptyWindow(t *testing.T) {
	dir := socketDir(t)
	udstest.Start(t, reducer.NewServer(reducer.ReducerFunc(summary), reducer.WithSocketDir(dir)).Start)
	c := client(t, dir, serverinfo.KindReduce)
	out, err := c.Reduce(testContext(t), reduceclient.Window{Start: time.UnixMilli(0), End: time.UnixMilli(10)}, nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("Reduce = %v, %v; want no result", out, err)
	}
}

// Over sluice's reduce streamer, results come while the window is still open.
func TestStreamWithSDKReduceStreamer(t *testing.T) {
	dir := socketDir(t)
	byTwo := func(_ context.Context, keys []string, in <-chan reducestreamer.Datum, out chan<- reducestreamer.Message, _ reducestreamer.Metadata) {
		var vals []byte
		for d := range in {
			if vals = append(vals, d.Value()...); len(vals) == 2 {
				out <- reducestreamer.NewMessage(vals).WithKeys(keys)
				vals = nil
			}
		}
		out <- reducestreamer.NewMessage(append([]byte("end:"), vals...)).WithKeys(keys)
	}
	udstest.Start(t, reducestreamer.NewServer(reducestreamer.ReduceStreamerFunc(byTwo), reducestreamer.WithSocketDir(dir)).Start)
	c := client(t, dir, serverinfo.KindReduceStream)
	w := reduceclient.Window{Start: time.UnixMilli(60_000), End: time.UnixMilli(70_000), Slot: "slot-1"}
	s, err := c.Open(testContext(t), w)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range messages([]string{"k"}, "a", "b", "c") {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Recv()
	if err != nil || describe(r) != "k=ab @69999" {
		t.Fatalf("Recv before the window ends = %q, %v", describe(r), err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(messages(nil, "late")[0]); !errors.Is(err, reduceclient.ErrClosed) {
		t.Errorf("Send after CloseSend = %v, want ErrClosed", err)
	}
	r, err = s.Recv()
	if err != nil || describe(r) != "k=end:c @69999" {
		t.Fatalf("Recv at the end = %q, %v", describe(r), err)
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("Recv after the results = %v, want io.EOF", err)
	}
}

// A function that panics fails the window with the server's
// UDF_EXECUTION_ERROR, as a gRPC status, and the connection is dropped.
func TestPanicFailsTheWindow(t *testing.T) {
	dir := socketDir(t)
	udstest.Start(t, reducer.NewServer(reducer.ReducerFunc(func(context.Context, []string, <-chan reducer.Datum, reducer.Metadata) reducer.Messages {
		panic("boom")
	}), reducer.WithSocketDir(dir)).Start)
	c := client(t, dir, serverinfo.KindReduce)
	w := reduceclient.Window{Start: time.UnixMilli(0), End: time.UnixMilli(1000)}
	_, err := c.Reduce(testContext(t), w, messages([]string{"k"}, "1", "2"))
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "UDF_EXECUTION_ERROR(reduce): boom") ||
		!strings.Contains(err.Error(), w.String()) {
		t.Fatalf("Reduce = %v; want Internal UDF_EXECUTION_ERROR naming the window", err)
	}
	if c.Ready() == nil {
		t.Error("Ready = nil after the server failed")
	}
}

// rogue is a reduce server on the generated code that breaks the framing as
// its mode says.
type rogue struct {
	reducev1.UnimplementedReduceServer
	mode string
}

func (r *rogue) IsReady(context.Context, *emptypb.Empty) (*reducev1.ReadyResponse, error) {
	return &reducev1.ReadyResponse{Ready: true}, nil
}

func (r *rogue) ReduceFn(stream reducev1.Reduce_ReduceFnServer) error {
	var win *reducev1.Window
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		win = req.GetOperation().GetWindows()[0]
	}
	switch r.mode {
	case "no EOF":
		return stream.Send(&reducev1.ReduceResponse{Result: &reducev1.ReduceResponse_Result{Value: []byte("1")}, Window: win})
	case "other window":
		other := &reducev1.Window{Start: win.GetEnd(), End: win.GetEnd()}
		return stream.Send(&reducev1.ReduceResponse{Result: &reducev1.ReduceResponse_Result{Value: []byte("1")}, Window: other})
	default: // after EOF
		if err := stream.Send(&reducev1.ReduceResponse{Window: win, EOF: true}); err != nil {
			return err
		}
		return stream.Send(&reducev1.ReduceResponse{Result: &reducev1.ReduceResponse_Result{Value: []byte("1")}, Window: win})
	}
}

func serveRogue(t *testing.T, dir, mode string) {
	t.Helper()
	udstest.Serve(t, dir, serverinfo.KindReduce, func(srv *grpc.Server) { reducev1.RegisterReduceServer(srv, &rogue{mode: mode}) })
}

func TestProtocolErrors(t *testing.T) {
	for _, mode := range []string{"no EOF", "other window", "after EOF"} {
		t.Run(mode, func(t *testing.T) {
			dir := socketDir(t)
			serveRogue(t, dir, mode)
			c := client(t, dir, serverinfo.KindReduce)
			_, err := c.Reduce(testContext(t), reduceclient.Window{Start: time.UnixMilli(0), End: time.UnixMilli(1000)}, messages([]string{"k"}, "1"))
			if !errors.Is(err, udf.ErrProtocol) {
				t.Fatalf("Reduce = %v, want udf.ErrProtocol", err)
			}
		})
	}
}

func TestNewRefusesOtherKinds(t *testing.T) {
	if _, err := reduceclient.New(t.TempDir(), serverinfo.KindMap, nil); !errors.Is(err, reduceclient.ErrKind) {
		t.Fatalf("New(map) = %v, want ErrKind", err)
	}
}

// A window whose context ends is no failure of the server: the error wraps
// the context's, and the connection is kept for the next window.
func TestContextEndsTheWindow(t *testing.T) {
	dir := socketDir(t)
	entered := make(chan struct{}, 1)
	udstest.Start(t, reducer.NewServer(reducer.ReducerFunc(func(ctx context.Context, keys []string, in <-chan reducer.Datum, md reducer.Metadata) reducer.Messages {
		if keys[0] == "hold" {
			entered <- struct{}{}
			<-ctx.Done() // until the client gives up on the window
			return nil
		}
		return summary(ctx, keys, in, md)
	}), reducer.WithSocketDir(dir)).Start)
	c := client(t, dir, serverinfo.KindReduce)
	w := reduceclient.Window{Start: time.UnixMilli(60_000), End: time.UnixMilli(120_000)}

	ctx, cancel := context.WithCancel(testContext(t))
	s, err := c.Open(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send(messages([]string{"hold"}, "1")[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	<-entered
	cancel()
	if _, err := s.Recv(); status.Code(err) != codes.Canceled || !strings.Contains(err.Error(), w.String()) {
		t.Fatalf("Recv = %v, want Canceled naming the window", err)
	}
	if err := c.Ready(); err != nil {
		t.Fatalf("Ready = %v after the caller's cancel; the connection must be kept", err)
	}
	out, err := c.Reduce(testContext(t), w, messages([]string{"k"}, "a"))
	if err != nil || len(out) != 1 || describe(out[0]) != "k=1|a|a|60000-120000|ok @119999 [t]" {
		t.Fatalf("the next window: %v, %v", out, err)
	}
}
