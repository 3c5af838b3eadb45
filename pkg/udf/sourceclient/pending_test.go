package sourceclient_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/udf/sourceclient"
)

// pendingOf is a source that has nothing to read and the pending count the
// test sets.
type pendingOf struct{ n atomic.Int64 }

func (p *pendingOf) Read(context.Context, sourcer.ReadRequest, chan<- sourcer.Message) {}
func (p *pendingOf) Ack(context.Context, []sourcer.Offset)                             {}
func (p *pendingOf) Nack(context.Context, []sourcer.Offset)                            {}
func (p *pendingOf) Pending(context.Context) int64                                     { return p.n.Load() }
func (p *pendingOf) Partitions(context.Context) []int32                                { return []int32{0} }

// Pending is the source's count once connected, PendingUnknown when the source
// cannot tell, and an error before the server is connected, without waiting.
func TestUDPending(t *testing.T) {
	dir, err := os.MkdirTemp("", "p")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s := sourceclient.New(dir, 100*time.Millisecond, nil)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := s.Pending(ctx); err == nil || n != isb.PendingUnknown {
		t.Fatalf("Pending before the server is up = %d, %v; want PendingUnknown and an error", n, err)
	}
	src := &pendingOf{}
	src.n.Store(12)
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start(sctx) }()
	defer func() { stop(); <-done }()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Pending(ctx); err != nil || n != 12 {
		t.Fatalf("Pending = %d, %v; want 12", n, err)
	}
	src.n.Store(sourcer.PendingUnknown)
	if n, err := s.Pending(ctx); err != nil || n != isb.PendingUnknown {
		t.Fatalf("Pending of a source that cannot tell = %d, %v; want PendingUnknown", n, err)
	}
}
