package sourceclient_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/udf/sourceclient"
)

// nackRecorder is a source of one message with user metadata that records
// the nacks it gets, with their options.
type nackRecorder struct {
	counting
	mu    sync.Mutex
	nacks []sourcer.NackRequest
}

func (s *nackRecorder) Read(ctx context.Context, r sourcer.ReadRequest, out chan<- sourcer.Message) {
	md := sourcer.NewUserMetadata()
	md.AddKV("origin", "source", []byte("simple"))
	out <- sourcer.Message{Value: []byte("x"), Offset: sourcer.Offset{Value: []byte("7")}}.WithUserMetadata(md)
}

func (s *nackRecorder) NackWithOptions(_ context.Context, reqs []sourcer.NackRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nacks = append(s.nacks, reqs...)
}

func TestUDSourceNackOptionsAndMetadata(t *testing.T) {
	dir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	src := &nackRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start(ctx) }()
	defer func() { cancel(); <-done }()

	s := sourceclient.New(dir, 100*time.Millisecond, nil)
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if err := s.Connect(cctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]isb.ReadMessage, 1)
	n, err := s.Read(cctx, buf)
	if err != nil || n != 1 {
		t.Fatalf("read %d, %v", n, err)
	}
	if got := string(buf[0].Metadata["origin"]["source"]); got != "simple" {
		t.Fatalf("metadata %v; want origin/source = simple", buf[0].Metadata)
	}
	opts := isb.NackOptions{Reason: "later", Delay: 2 * time.Second, MaxDeliveries: 4, Values: map[string]string{"a": "b"}}
	if err := s.NackOptions(cctx, buf[:1], opts); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.nacks) != 1 || len(src.nacks[0].Offsets) != 1 || string(src.nacks[0].Offsets[0].Value) != "7" {
		t.Fatalf("nacks %+v; want offset 7", src.nacks)
	}
	o := src.nacks[0].Options
	if o == nil || *o.Reason != "later" || *o.Delay != 2000 || *o.MaxDeliveries != 4 || o.NackMap["a"] != "b" {
		t.Fatalf("nack options %+v; want %+v", o, opts)
	}
}
