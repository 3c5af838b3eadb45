package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
)

// clock is a clock the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestSource(count *uint64) (*source, *clock) {
	c := &clock{t: time.Unix(1000, 0)}
	return newSource(config{count: count, redelivery: 10 * time.Second, now: c.now, partition: 3}), c
}

// read calls Read and returns the values handed out; with nothing to hand
// out, Read waits for timeout.
func read(t *testing.T, s *source, n uint64, timeout time.Duration) string {
	t.Helper()
	out := make(chan sourcer.Message, n)
	s.Read(context.Background(), sourcer.ReadRequest{Count: n, Timeout: timeout}, out)
	close(out)
	var got []string
	for m := range out {
		if string(m.Offset.Value) != string(m.Value) || m.Offset.PartitionID != 3 || m.EventTime.IsZero() {
			t.Errorf("message %+v", m)
		}
		got = append(got, string(m.Value))
	}
	return fmt.Sprint(got)
}

func offsets(values ...string) []sourcer.Offset {
	out := make([]sourcer.Offset, len(values))
	for i, v := range values {
		out[i] = sourcer.Offset{Value: []byte(v), PartitionID: 3}
	}
	return out
}

func TestAtLeastOnce(t *testing.T) {
	count := uint64(5)
	s, clk := newTestSource(&count)
	ctx := context.Background()
	const short = time.Millisecond // Read's wait when nothing is available
	steps := []struct {
		name    string
		do      func()
		read    uint64 // 0: no read
		want    string
		pending int64
	}{
		{"first read", nil, 3, "[0 1 2]", 2},
		{"ack one, read the rest", func() { s.Ack(ctx, offsets("1")) }, 10, "[3 4]", 0},
		{"all in flight", nil, 10, "[]", 0},
		{"nack is handed out again at once", func() { s.Nack(ctx, offsets("3")) }, 0, "", 1},
		{"read the nacked one", nil, 10, "[3]", 0},
		{"timeout expires the unacked", func() { clk.advance(11 * time.Second) }, 0, "", 4},
		{"oldest first", nil, 2, "[0 2]", 2},
		{"then the others", nil, 10, "[3 4]", 0},
		{"acked never again", func() { s.Ack(ctx, offsets("0", "2", "3", "4", "junk")); clk.advance(time.Hour) }, 10, "[]", 0},
	}
	for _, st := range steps {
		if st.do != nil {
			st.do()
		}
		if st.read > 0 {
			if got := read(t, s, st.read, short); got != st.want {
				t.Fatalf("%s: read %s, want %s", st.name, got, st.want)
			}
		}
		if got := s.Pending(ctx); got != st.pending {
			t.Fatalf("%s: pending %d, want %d", st.name, got, st.pending)
		}
	}
}

// A nack with a delay hands the message out again no sooner than the delay;
// one with options but no delay, at once.
func TestNackDelay(t *testing.T) {
	count := uint64(3)
	s, clk := newTestSource(&count)
	ctx := context.Background()
	if got := read(t, s, 3, time.Millisecond); got != "[0 1 2]" {
		t.Fatalf("read %s", got)
	}
	delay := uint64(5000)
	s.NackWithOptions(ctx, []sourcer.NackRequest{
		{Offsets: offsets("0", "2"), Options: &sourcer.NackOptions{Delay: &delay}},
		{Offsets: offsets("1"), Options: &sourcer.NackOptions{}},
	})
	steps := []struct {
		name    string
		advance time.Duration
		want    string
		pending int64
	}{
		{"at once: the one without delay", 0, "[1]", 0},
		{"just before the delay", 4999 * time.Millisecond, "[]", 0},
		{"at the delay", time.Millisecond, "[0 2]", 0},
	}
	for _, st := range steps {
		clk.advance(st.advance)
		if got := read(t, s, 10, time.Millisecond); got != st.want {
			t.Fatalf("%s: read %s, want %s", st.name, got, st.want)
		}
		if got := s.Pending(ctx); got != st.pending {
			t.Fatalf("%s: pending %d, want %d", st.name, got, st.pending)
		}
	}
	// A delayed nack of a message not in flight changes nothing.
	s.Ack(ctx, offsets("0", "1", "2"))
	s.NackWithOptions(ctx, []sourcer.NackRequest{{Offsets: offsets("0"), Options: &sourcer.NackOptions{Delay: &delay}}})
	clk.advance(time.Hour)
	if got := read(t, s, 10, time.Millisecond); got != "[]" {
		t.Fatalf("acknowledged message read again: %s", got)
	}
}

// A Read with nothing to hand out returns as soon as a Nack makes something
// available.
func TestNackWakesRead(t *testing.T) {
	count := uint64(1)
	s, _ := newTestSource(&count)
	if got := read(t, s, 1, time.Millisecond); got != "[0]" {
		t.Fatalf("read %s", got)
	}
	done := make(chan string)
	go func() { done <- read(t, s, 1, time.Minute) }()
	s.Nack(context.Background(), offsets("0"))
	select {
	case got := <-done:
		if got != "[0]" {
			t.Fatalf("read %s, want [0]", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read not woken by Nack")
	}
}

// A source started at 3 of 5 hands out 3 and 4, and has 2 pending at first.
func TestStart(t *testing.T) {
	count := uint64(5)
	c := &clock{t: time.Unix(1000, 0)}
	s := newSource(config{count: &count, start: 3, redelivery: time.Second, now: c.now, partition: 3})
	if got := s.Pending(context.Background()); got != 2 {
		t.Fatalf("pending %d, want 2", got)
	}
	if got := read(t, s, 10, time.Millisecond); got != "[3 4]" {
		t.Fatalf("read %s, want [3 4]", got)
	}
	beyond := newSource(config{count: &count, start: 9, redelivery: time.Second, now: c.now})
	if got := beyond.Pending(context.Background()); got != 0 {
		t.Fatalf("pending of a source started beyond its count: %d, want 0", got)
	}
}

func TestUnlimited(t *testing.T) {
	s, _ := newTestSource(nil)
	if got := read(t, s, 4, time.Millisecond); got != "[0 1 2 3]" {
		t.Fatalf("read %s", got)
	}
	if got := s.Pending(context.Background()); got != sourcer.PendingUnknown {
		t.Errorf("pending %d", got)
	}
	if got := fmt.Sprint(s.Partitions(context.Background())); got != "[3]" {
		t.Errorf("partitions %s", got)
	}
}

func TestConfigFromEnv(t *testing.T) {
	cases := []struct {
		count, redelivery, replica, start string
		want                              string // "" for an error
	}{
		{"", "", "", "", "count <nil> start 0 redelivery 30s partition 0"},
		{"7", "2s", "4", "3", "count 7 start 3 redelivery 2s partition 4"},
		{"-1", "", "", "", ""},
		{"", "soon", "", "", ""},
		{"", "-1s", "", "", ""},
		{"", "", "", "first", ""},
	}
	for _, c := range cases {
		t.Run(c.count+"/"+c.redelivery+"/"+c.start, func(t *testing.T) {
			t.Setenv("SIMPLESOURCE_COUNT", c.count)
			t.Setenv("SIMPLESOURCE_START", c.start)
			t.Setenv("SIMPLESOURCE_REDELIVERY_TIMEOUT", c.redelivery)
			t.Setenv("NUMAFLOW_REPLICA", c.replica)
			cfg, err := configFromEnv()
			if c.want == "" {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			count := "<nil>"
			if cfg.count != nil {
				count = fmt.Sprint(*cfg.count)
			}
			if got := fmt.Sprintf("count %s start %d redelivery %v partition %d", count, cfg.start, cfg.redelivery, cfg.partition); got != c.want {
				t.Errorf("%s, want %s", got, c.want)
			}
		})
	}
}

// With a read wait of 0, a read with nothing to hand out answers at once,
// whatever its timeout; messages are still handed out as before.
func TestReadWaitZero(t *testing.T) {
	count, wait := uint64(2), time.Duration(0)
	s, _ := newTestSource(&count)
	s.cfg.readWait = &wait
	if got := read(t, s, 5, time.Minute); got != "[0 1]" {
		t.Fatalf("read %s", got)
	}
	done := make(chan string)
	go func() { done <- read(t, s, 5, time.Minute) }()
	select {
	case got := <-done:
		if got != "[]" {
			t.Fatalf("read %s, want []", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a dry read waited for its timeout")
	}
}

func TestReadWaitFromEnv(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{"", "<nil>"},
		{"0s", "0s"},
		{"250ms", "250ms"},
		{"-1s", ""},
		{"never", ""},
	} {
		t.Run(c.env, func(t *testing.T) {
			t.Setenv("SIMPLESOURCE_READ_WAIT", c.env)
			cfg, err := configFromEnv()
			if c.want == "" {
				if err == nil || !strings.Contains(err.Error(), "SIMPLESOURCE_READ_WAIT") {
					t.Fatalf("err = %v; want one naming SIMPLESOURCE_READ_WAIT", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := "<nil>"
			if cfg.readWait != nil {
				got = cfg.readWait.String()
			}
			if got != c.want {
				t.Fatalf("read wait %s, want %s", got, c.want)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	count := uint64(2)
	s, _ := newTestSource(&count)
	s.cfg.metadata = true
	out := make(chan sourcer.Message, 2)
	s.Read(context.Background(), sourcer.ReadRequest{Count: 2, Timeout: time.Minute}, out)
	close(out)
	var got []string
	for m := range out {
		got = append(got, string(m.UserMetadata.Value("simplesource", "seq")))
	}
	if fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("metadata simplesource/seq of the messages: %v; want [0 1]", got)
	}
}

func TestMetadataFromEnv(t *testing.T) {
	t.Setenv("SIMPLESOURCE_METADATA", "1")
	if cfg, err := configFromEnv(); err != nil || !cfg.metadata {
		t.Fatalf("metadata %v, %v; want on", cfg.metadata, err)
	}
	t.Setenv("SIMPLESOURCE_METADATA", "yes")
	if _, err := configFromEnv(); err == nil || !strings.Contains(err.Error(), `SIMPLESOURCE_METADATA="yes"`) {
		t.Fatalf("error %v; want one naming SIMPLESOURCE_METADATA and its value", err)
	}
}
