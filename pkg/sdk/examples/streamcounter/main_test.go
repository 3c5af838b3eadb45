package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

// The built binary serves as a reduce streamer that sends each window's
// count per keys every STREAMCOUNTER_EVERY messages, before the window
// ends, and the rest when it ends; it stops on SIGTERM.
func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindReduceStream, "STREAMCOUNTER_EVERY=2")
	stream, err := reducev1.NewReduceClient(p.Conn).ReduceFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	w1, w2 := sdktest.Window{Start: 0, End: 60_000}, sdktest.Window{Start: 60_000, End: 120_000}
	sdktest.SendWindow(t, stream, w1, []string{"even"}, "2", "4", "6")
	if got := sdktest.RecvResult(t, stream); got != "0-60000 even=2" {
		t.Errorf("before the window ends: %q", got)
	}
	sdktest.SendWindow(t, stream, w1, []string{"odd"}, "1")
	sdktest.SendWindow(t, stream, w2, []string{"even"}, "8", "10")
	if got := sdktest.RecvResult(t, stream); got != "60000-120000 even=2" {
		t.Errorf("before the second window ends: %q", got)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	want := []string{"0-60000 even=1", "0-60000 odd=1", "60000-120000 even=0"}
	if got := sdktest.RecvAll(t, stream); !slices.Equal(got, want) {
		t.Errorf("results at the end %q, want %q", got, want)
	}
	if err := p.Terminate(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Stderr())
	}
}

// A STREAMCOUNTER_EVERY that is no positive integer stops the command with
// an error naming it.
func TestEveryFromEnv(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want int
		err  string
	}{
		{"", 10, ""},
		{"3", 3, ""},
		{"0", 0, `STREAMCOUNTER_EVERY ("0") must be a positive integer`},
		{"ten", 0, `STREAMCOUNTER_EVERY ("ten") must be a positive integer`},
	} {
		t.Run(tt.v, func(t *testing.T) {
			n, err := everyFromEnv(tt.v)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("everyFromEnv(%q) = %d, %v; want an error %q", tt.v, n, err, tt.err)
				}
				return
			}
			if err != nil || n != tt.want {
				t.Errorf("everyFromEnv(%q) = %d, %v; want %d", tt.v, n, err, tt.want)
			}
		})
	}
}
