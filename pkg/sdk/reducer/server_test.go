package reducer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
)

func start(t *testing.T, r reducer.Reducer) *sdktest.Server {
	t.Helper()
	dir := sdktest.Dir(t)
	return sdktest.Start(t, dir, serverinfo.KindReduce, reducer.NewServer(r, reducer.WithSocketDir(dir)).Start)
}

func open(t *testing.T, s *sdktest.Server) reducev1.Reduce_ReduceFnClient {
	t.Helper()
	stream, err := reducev1.NewReduceClient(s.Conn).ReduceFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// join answers a window with its values joined in order, its window and
// the event times of its messages checked against the window's start.
func join(_ context.Context, keys []string, in <-chan reducer.Datum, md reducer.Metadata) reducer.Messages {
	var vals []byte
	for d := range in {
		if !d.EventTime().Equal(md.IntervalWindow.Start) || !d.Watermark().Before(md.IntervalWindow.Start) {
			return reducer.Messages{reducer.NewMessage([]byte("bad times")).WithKeys(keys)}
		}
		vals = append(vals, d.Value()...)
	}
	return reducer.Messages{reducer.NewMessage(vals).WithKeys(keys).WithTags([]string{"t"})}
}

// Two windows and two keys on one stream give four tasks, each answered with
// its own window once the stream is half-closed, then EOF.
func TestWindowsAndKeys(t *testing.T) {
	s := start(t, reducer.ReducerFunc(join))
	stream := open(t, s)
	w1, w2 := sdktest.Window{Start: 0, End: 60_000}, sdktest.Window{Start: 60_000, End: 120_000}
	sdktest.SendWindow(t, stream, w1, []string{"a"}, "1", "2", "3")
	sdktest.SendWindow(t, stream, w1, []string{"b"}, "x")
	sdktest.SendWindow(t, stream, w2, []string{"a"}, "4", "5")
	// An APPEND for a window and keys not open yet opens them.
	if err := stream.Send(sdktest.ReduceRequest(reducev1.ReduceRequest_WindowOperation_APPEND, w2, "y", "b")); err != nil {
		t.Fatal(err)
	}
	sdktest.SendWindow(t, stream, w1, []string{"a"}, "more") // an OPEN of an open task adds to it
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	want := []string{"0-60000 a=123more [t]", "0-60000 b=x [t]", "60000-120000 a=45 [t]", "60000-120000 b=y [t]"}
	if got := sdktest.RecvAll(t, stream); !slices.Equal(got, want) {
		t.Errorf("results %q, want %q", got, want)
	}
}

// A stream with no message at all ends with EOF alone; a Reduce that returns
// early, or returns nothing, holds nothing up.
func TestEmptyAndEarly(t *testing.T) {
	s := start(t, reducer.ReducerFunc(func(_ context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
		d := <-in
		if string(d.Value()) == "none" {
			return nil
		}
		return reducer.Messages{reducer.NewMessage(d.Value()).WithKeys(keys), reducer.MessageToDrop()}
	}))
	stream := open(t, s)
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if got := sdktest.RecvAll(t, stream); len(got) != 0 {
		t.Errorf("results %q, want none", got)
	}

	stream = open(t, s)
	w := sdktest.Window{Start: 1000, End: 2000}
	sdktest.SendWindow(t, stream, w, []string{"k"}, "first", "second", "third")
	sdktest.SendWindow(t, stream, w, []string{"n"}, "none", "x")
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	want := []string{"1000-2000 = [" + reducer.DropTag + "]", "1000-2000 k=first"}
	if got := sdktest.RecvAll(t, stream); !slices.Equal(got, want) {
		t.Errorf("results %q, want %q", got, want)
	}
}

// Requests that break the framing fail the stream with InvalidArgument and
// leave the server running.
func TestInvalidRequests(t *testing.T) {
	s := start(t, reducer.ReducerFunc(join))
	w := sdktest.Window{Start: 0, End: 10}
	noWindow := sdktest.ReduceRequest(reducev1.ReduceRequest_WindowOperation_OPEN, w, "v")
	noWindow.Operation.Windows = nil
	twoWindows := sdktest.ReduceRequest(reducev1.ReduceRequest_WindowOperation_OPEN, w, "v")
	twoWindows.Operation.Windows = append(twoWindows.Operation.Windows, w.Proto())
	for name, req := range map[string]*reducev1.ReduceRequest{
		"no window":   noWindow,
		"two windows": twoWindows,
		"close":       sdktest.ReduceRequest(reducev1.ReduceRequest_WindowOperation_CLOSE, w, "v"),
	} {
		t.Run(name, func(t *testing.T) {
			stream := open(t, s)
			if err := stream.Send(req); err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("Recv = %v, want InvalidArgument", err)
			}
		})
	}
	if !s.Running() {
		t.Fatal("the server stopped")
	}
}

// Many windows of many keys at once, each counted by its own call.
func TestConcurrentTasks(t *testing.T) {
	s := start(t, reducer.ReducerFunc(func(_ context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
		n := 0
		for range in {
			n++
		}
		return reducer.Messages{reducer.NewMessage([]byte(strconv.Itoa(n))).WithKeys(keys)}
	}))
	stream := open(t, s)
	var want []string
	for round := range 5 {
		for k := range 20 {
			w := sdktest.Window{Start: int64(k%2) * 100, End: int64(k%2)*100 + 100}
			ev := reducev1.ReduceRequest_WindowOperation_APPEND
			if round == 0 {
				ev = reducev1.ReduceRequest_WindowOperation_OPEN
				want = append(want, fmt.Sprintf("%d-%d k%d=5", w.Start, w.End, k))
			}
			if err := stream.Send(sdktest.ReduceRequest(ev, w, "v", fmt.Sprint("k", k))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if got := sdktest.RecvAll(t, stream); !slices.Equal(got, want) {
		t.Errorf("results\n%q\nwant\n%q", got, want)
	}
}

// A panic in Reduce fails the stream with UDF_EXECUTION_ERROR and stops the
// server, which removes its socket and server-info file.
func TestPanic(t *testing.T) {
	s := start(t, reducer.ReducerFunc(func(_ context.Context, _ []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
		for d := range in {
			if string(d.Value()) == "boom" {
				panic("reduce boom")
			}
		}
		return nil
	}))
	stream := open(t, s)
	sdktest.SendWindow(t, stream, sdktest.Window{Start: 0, End: 10}, []string{"k"}, "fine", "boom")
	sdktest.SendWindow(t, stream, sdktest.Window{Start: 0, End: 10}, []string{"other"}, "waits")
	_, err := stream.Recv()
	if status.Code(err) != codes.Internal || status.Convert(err).Message() != "UDF_EXECUTION_ERROR(reduce): reduce boom" {
		t.Fatalf("Recv = %v", err)
	}
	if err := s.Wait(t); !errors.Is(err, udfserver.ErrUDFPanic) {
		t.Fatalf("Start = %v, want ErrUDFPanic", err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestServerInfoAndReady(t *testing.T) {
	s := start(t, reducer.ReducerFunc(join))
	ready, err := reducev1.NewReduceClient(s.Conn).IsReady(sdktest.Context(t), &emptypb.Empty{})
	if err != nil || !ready.GetReady() {
		t.Fatalf("IsReady = %v, %v", ready, err)
	}
	if s.SocketPath() != s.Dir+"/reduce.sock" || s.InfoPath() != s.Dir+"/reducer-server-info" {
		t.Errorf("socket %s, server-info file %s", s.SocketPath(), s.InfoPath())
	}
	sdktest.AssertInfoFile(t, s.InfoPath(), serverinfo.KindReduce)
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}
