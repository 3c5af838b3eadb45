package sourcer_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/emptypb"

	sourcev1 "github.com/sluiceflow/sluice/pkg/apis/proto/source/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

// readySource is a listSource that reports whether it can read.
type readySource struct {
	*listSource
	down atomic.Bool
}

func (r *readySource) Ready() error {
	if r.down.Load() {
		return errors.New("its source is down")
	}
	return nil
}

// TestIsReadyAsksTheSourcer: a Sourcer that implements ReadyReporter makes
// IsReady false while its Ready returns an error.
func TestIsReadyAsksTheSourcer(t *testing.T) {
	src := &readySource{listSource: newListSource()}
	src.down.Store(true)
	s := start(t, src)
	c := sourcev1.NewSourceClient(s.Conn)
	for _, want := range []bool{false, true} {
		src.down.Store(!want)
		ready, err := c.IsReady(sdktest.Context(t), &emptypb.Empty{})
		if err != nil || ready.GetReady() != want {
			t.Fatalf("IsReady = %v, %v; want %v", ready, err, want)
		}
	}
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
}
