package sdktest

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
)

// Window is a window of a reduce request, [Start, End) in Unix
// milliseconds.
type Window struct{ Start, End int64 }

// Proto is the window as a request names it, in slot "slot-0".
func (w Window) Proto() *reducev1.Window {
	return &reducev1.Window{Start: timestamppb.New(time.UnixMilli(w.Start)), End: timestamppb.New(time.UnixMilli(w.End)), Slot: "slot-0"}
}

// ReduceRequest is a request that sends value with keys to window w with
// operation ev; its event time is the window's start.
func ReduceRequest(ev reducev1.ReduceRequest_WindowOperation_Event, w Window, value string, keys ...string) *reducev1.ReduceRequest {
	return &reducev1.ReduceRequest{
		Payload: &reducev1.ReduceRequest_Payload{Keys: keys, Value: []byte(value),
			EventTime: timestamppb.New(time.UnixMilli(w.Start)), Watermark: timestamppb.New(time.UnixMilli(w.Start - 1))},
		Operation: &reducev1.ReduceRequest_WindowOperation{Event: ev, Windows: []*reducev1.Window{w.Proto()}},
	}
}

// SendWindow sends the values, each with keys, to window w: OPEN with the
// first, APPEND with the rest. A stream the server has ended takes no more
// and is no failure here: Recv returns its status.
func SendWindow(t testing.TB, stream reducev1.Reduce_ReduceFnClient, w Window, keys []string, values ...string) {
	t.Helper()
	for i, v := range values {
		ev := reducev1.ReduceRequest_WindowOperation_APPEND
		if i == 0 {
			ev = reducev1.ReduceRequest_WindowOperation_OPEN
		}
		if err := stream.Send(ReduceRequest(ev, w, v, keys...)); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// RecvResult receives one response, which must be a result, and renders it
// "start-end keys=value [tags]".
func RecvResult(t testing.TB, stream reducev1.Reduce_ReduceFnClient) string {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetEOF() {
		t.Fatalf("EOF, want a result")
	}
	return describe(resp)
}

// RecvAll receives the results until the response with EOF set and the end
// of the stream, and returns them rendered as RecvResult does, sorted.
func RecvAll(t testing.TB, stream reducev1.Reduce_ReduceFnClient) []string {
	t.Helper()
	var got []string
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv after %q: %v", got, err)
		}
		if resp.GetEOF() {
			break
		}
		got = append(got, describe(resp))
	}
	if resp, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after EOF: %v, %v; want the end of the stream", resp, err)
	}
	slices.Sort(got)
	return got
}

func describe(resp *reducev1.ReduceResponse) string {
	w, r := resp.GetWindow(), resp.GetResult()
	s := fmt.Sprintf("%d-%d %s=%s", w.GetStart().AsTime().UnixMilli(), w.GetEnd().AsTime().UnixMilli(),
		strings.Join(r.GetKeys(), ","), r.GetValue())
	if len(r.GetTags()) > 0 {
		s += fmt.Sprint(" ", r.GetTags())
	}
	return s
}
