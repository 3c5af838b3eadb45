package batchmapper_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/emptypb"

	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"

	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

// readyBatchMapper is a BatchMapper that reports whether it can take requests.
type readyBatchMapper struct {
	batchmapper.BatchMapperFunc
	down atomic.Bool
}

func (r *readyBatchMapper) Ready() error {
	if r.down.Load() {
		return errors.New("its downstream is down")
	}
	return nil
}

// TestIsReadyAsksTheBatchMapper: a BatchMapper that implements ReadyReporter makes
// IsReady false while its Ready returns an error.
func TestIsReadyAsksTheBatchMapper(t *testing.T) {
	r := &readyBatchMapper{}
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
