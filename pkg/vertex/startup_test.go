package vertex_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// A user-defined server that never starts fails the vertex once the startup
// timeout has passed on the vertex's clock, with an error that names the
// container, the server and the server-info file waited for.
func TestStartupTimeout(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	v, err := vertex.New(udSourceSpec(t, "never"), vertex.WithSocketDir(dir), vertex.WithClock(clk),
		vertex.WithStartupTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- v.Run(context.Background()) }()
	var err2 error
	for i := 0; ; i++ {
		select {
		case err2 = <-done:
		case <-time.After(10 * time.Millisecond):
			if i > 1000 {
				t.Fatal("Run did not return after the startup timeout")
			}
			clk.Advance(10 * time.Second)
			continue
		}
		break
	}
	var se *vertex.StartupError
	if !errors.As(err2, &se) || se.Container != "udsource" || se.Kind != serverinfo.KindSource || se.Timeout != 2*time.Minute {
		t.Fatalf("Run = %v; want a StartupError of the udsource container's source server after 2m", err2)
	}
	if info := filepath.Join(dir, serverinfo.SourceInfoFile); !strings.Contains(err2.Error(), info) {
		t.Fatalf("Run = %q; want it to name %s", err2, info)
	}
	t.Log(err2)
}
