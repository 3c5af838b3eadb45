package sourceclient_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/udf/sourceclient"
)

// counting is a source of "0", "1", ... that hands out again what is not acked
// when a read finds nothing new.
type counting struct {
	mu       sync.Mutex
	next     int
	limit    int
	inflight map[int]bool
	acked    map[int]bool
	twice    int // acks of an offset already acked
}

func (c *counting) Read(_ context.Context, r sourcer.ReadRequest, out chan<- sourcer.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for ; uint64(n) < r.Count && c.next < c.limit; n++ {
		c.inflight[c.next] = true
		out <- sourcer.Message{Value: []byte(strconv.Itoa(c.next)), Offset: sourcer.Offset{Value: []byte(strconv.Itoa(c.next))},
			EventTime: time.UnixMilli(int64(c.next))}
		c.next++
	}
}

func (c *counting) Ack(_ context.Context, offsets []sourcer.Offset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range offsets {
		n, _ := strconv.Atoi(string(o.Value))
		delete(c.inflight, n)
		if c.acked[n] {
			c.twice++
		}
		c.acked[n] = true
	}
}

func (c *counting) Nack(context.Context, []sourcer.Offset) {}
func (c *counting) Pending(context.Context) int64          { return sourcer.PendingUnknown }
func (c *counting) Partitions(context.Context) []int32     { return []int32{0} }

func TestUDSource(t *testing.T) {
	dir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	src := &counting{limit: 25, inflight: map[int]bool{}, acked: map[int]bool{}}
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
	buf := make([]isb.ReadMessage, 10) // the granted tokens: the source is asked for 10
	total := 0
	for total < 25 {
		n, err := s.Read(cctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n > len(buf) {
			t.Fatalf("read %d into %d", n, len(buf))
		}
		for i := range buf[:n] {
			if string(buf[i].Value) != strconv.Itoa(total+i) || !buf[i].EventTime.Equal(time.UnixMilli(int64(total+i))) {
				t.Fatalf("message %d: %q at %v", total+i, buf[i].Value, buf[i].EventTime)
			}
		}
		if err := s.Ack(cctx, buf[:n]); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.acked) != 25 || len(src.inflight) != 0 || src.twice != 0 {
		t.Fatalf("acked %d, in flight %d, acked twice %d; want all 25 acked once", len(src.acked), len(src.inflight), src.twice)
	}
}
