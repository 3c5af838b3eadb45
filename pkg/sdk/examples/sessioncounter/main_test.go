package main

import (
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	sessionreducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/sessionreduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

func kw(start, end int64, key string) *sessionreducev1.KeyedWindow {
	return &sessionreducev1.KeyedWindow{Start: timestamppb.New(timeAt(start)), End: timestamppb.New(timeAt(end)), Slot: "slot-0", Keys: []string{key}}
}

func op(ev sessionreducev1.SessionReduceRequest_WindowOperation_Event, payload bool, ws ...*sessionreducev1.KeyedWindow) *sessionreducev1.SessionReduceRequest {
	req := &sessionreducev1.SessionReduceRequest{Operation: &sessionreducev1.SessionReduceRequest_WindowOperation{Event: ev, KeyedWindows: ws}}
	if payload {
		req.Payload = &sessionreducev1.SessionReduceRequest_Payload{Keys: ws[0].Keys, Value: []byte("x"), EventTime: ws[0].Start}
	}
	return req
}

// The built binary serves as a session reduce UDF that counts each
// session's messages, merged sessions adding up, and stops on SIGTERM.
func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindSessionReduce)
	stream, err := sessionreducev1.NewSessionReduceClient(p.Conn).SessionReduceFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	const (
		open   = sessionreducev1.SessionReduceRequest_WindowOperation_OPEN
		appnd  = sessionreducev1.SessionReduceRequest_WindowOperation_APPEND
		expand = sessionreducev1.SessionReduceRequest_WindowOperation_EXPAND
		merge  = sessionreducev1.SessionReduceRequest_WindowOperation_MERGE
		closeW = sessionreducev1.SessionReduceRequest_WindowOperation_CLOSE
	)
	for _, req := range []*sessionreducev1.SessionReduceRequest{
		op(open, true, kw(0, 10, "a")),
		op(appnd, true, kw(0, 10, "a")),
		op(open, true, kw(20, 30, "a")),
		op(open, true, kw(0, 10, "b")),
		op(expand, true, kw(0, 10, "a"), kw(0, 20, "a")),
		op(merge, false, kw(0, 20, "a"), kw(20, 30, "a")),
		op(appnd, true, kw(0, 30, "a")),
		op(closeW, false, kw(0, 30, "a"), kw(0, 10, "b")),
	} {
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		w := resp.GetKeyedWindow()
		s := fmt.Sprintf("%d-%d %v", w.GetStart().AsTime().Unix(), w.GetEnd().AsTime().Unix(), w.GetKeys())
		if resp.GetEOF() {
			got = append(got, s+" EOF")
		} else {
			got = append(got, fmt.Sprintf("%s %v=%s", s, resp.GetResult().GetKeys(), resp.GetResult().GetValue()))
		}
	}
	slices.Sort(got)
	want := []string{"0-10 [b] EOF", "0-10 [b] [b]=1", "0-30 [a] EOF", "0-30 [a] [a]=5"}
	if !slices.Equal(got, want) {
		t.Errorf("responses %q, want %q", got, want)
	}
	if err := p.Terminate(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Stderr())
	}
}

func timeAt(sec int64) time.Time { return time.Unix(sec, 0) }
