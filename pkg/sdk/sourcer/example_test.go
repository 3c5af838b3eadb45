package sourcer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
)

// wordSource hands out a fixed list of words. For brevity, it does not
// hand out unacknowledged words again, as an at-least-once source must (see
// the simplesource example for one that does).
type wordSource struct {
	mu    sync.Mutex
	words []string
	next  int
}

func (s *wordSource) Read(_ context.Context, req sourcer.ReadRequest, out chan<- sourcer.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := uint64(0); n < req.Count && s.next < len(s.words); n++ {
		out <- sourcer.Message{
			Value:     []byte(s.words[s.next]),
			Offset:    sourcer.Offset{Value: []byte(strconv.Itoa(s.next))},
			EventTime: time.Now(),
		}
		s.next++
	}
}

func (s *wordSource) Ack(context.Context, []sourcer.Offset)  {}
func (s *wordSource) Nack(context.Context, []sourcer.Offset) {}

func (s *wordSource) Pending(context.Context) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.words) - s.next)
}

func (s *wordSource) Partitions(context.Context) []int32 { return sourcer.DefaultPartitions() }

func Example() {
	dir, err := os.MkdirTemp("", "sourcer")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	src := &wordSource{words: []string{"a", "b", "c"}}
	go func() {
		done <- sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start(ctx)
	}()

	info, err := serverinfo.Wait(ctx, filepath.Join(dir, serverinfo.SourceInfoFile), 5*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println("protocol:", info.Protocol)

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// protocol: uds
	// stopped: <nil>
}
