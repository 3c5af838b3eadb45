package sinker_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
)

// readySinker is a Sinker that reports whether it can take requests.
type readySinker struct {
	sinker.SinkerFunc
	down atomic.Bool
}

func (r *readySinker) Ready() error {
	if r.down.Load() {
		return errors.New("its downstream is down")
	}
	return nil
}

// TestIsReadyAsksTheSinker: a Sinker that implements ReadyReporter makes
// IsReady false while its Ready returns an error.
func TestIsReadyAsksTheSinker(t *testing.T) {
	r := &readySinker{}
	r.down.Store(true)
	s := start(t, serverinfo.KindSink, r)
	c := sinkv1.NewSinkClient(s.Conn)
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
