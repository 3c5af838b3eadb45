package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

// The built binary serves as a reduce UDF that adds up each window's integers
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
	want := []string{"0-60000 even=12", "0-60000 odd=1", "60000-120000 even=8"}
	if got := sdktest.RecvAll(t, stream); !slices.Equal(got, want) {
		t.Errorf("results %q, want %q", got, want)
	}
	if err := p.Terminate(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Stderr())
	}
}

// A payload that is not an integer is left out and logged.
func TestLeavesOutNonIntegers(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindReduce)
	stream, err := reducev1.NewReduceClient(p.Conn).ReduceFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	sdktest.SendWindow(t, stream, sdktest.Window{Start: 0, End: 1000}, []string{"k"}, " 40\n", "x", "-2")
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if got := sdktest.RecvAll(t, stream); !slices.Equal(got, []string{"0-1000 k=38"}) {
		t.Errorf("results %q", got)
	}
	if err := p.Terminate(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Stderr())
	}
	if !strings.Contains(p.Stderr(), `leaving out "x"`) {
		t.Errorf("stderr does not name the payload left out:\n%s", p.Stderr())
	}
}
