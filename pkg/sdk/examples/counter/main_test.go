package main

import (
	"slices"
	"testing"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

// The built binary serves as a reduce UDF that counts each window's messages
// per keys, and stops on SIGTERM.
func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindReduce)
	stream, err := reducev1.NewReduceClient(p.Conn).ReduceFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	w1, w2 := sdktest.Window{Start: 0, End: 60_000}, sdktest.Window{Start: 60_000, End: 120_000}
	sdktest.SendWindow(t, stream, w1, []string{"even"}, "2", "4", "6")
	sdktest.SendWindow(t, stream, w1, []string{"odd"}, "1")
	sdktest.SendWindow(t, stream, w2, []string{"even"}, "8", "not a number")
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	want := []string{"0-60000 even=3", "0-60000 odd=1", "60000-120000 even=2"}
	if got := sdktest.RecvAll(t, stream); !slices.Equal(got, want) {
		t.Errorf("results %q, want %q", got, want)
	}
	if err := p.Terminate(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Stderr())
	}
}
