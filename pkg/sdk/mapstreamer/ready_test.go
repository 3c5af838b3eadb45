package mapstreamer_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/emptypb"

	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
)

// readyStreamer is a MapStreamer that reports whether it can take requests.
type readyStreamer struct {
	mapstreamer.MapStreamerFunc
	down atomic.Bool
}

var _ mapstreamer.ReadyReporter = (*readyStreamer)(nil)

func (r *readyStreamer) Ready() error {
	if r.down.Load() {
		return errors.New("its downstream is down")
	}
	return nil
}

// TestIsReadyAsksTheMapStreamer: a MapStreamer that implements
// ReadyReporter makes IsReady false while its Ready returns an error.
func TestIsReadyAsksTheMapStreamer(t *testing.T) {
	r := &readyStreamer{}
	r.down.Store(true)
	s := start(t, r)
	c := mapv1.NewMapClient(s.Conn)
	for _, want := range []bool{false, true, false} {
		r.down.Store(!want)
		ready, err := c.IsReady(sdktest.Context(t), &emptypb.Empty{})
		if err != nil || ready.GetReady() != want {
			t.Fatalf("IsReady = %v, %v; want %v", ready, err, want)
		}
	}
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
}
