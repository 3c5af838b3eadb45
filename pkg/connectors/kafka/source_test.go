package kafka

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// partitionOf returns the partition in a message id topic:partition:offset.
func partitionOf(t *testing.T, m isb.ReadMessage) string {
	t.Helper()
	parts := strings.Split(m.ID, ":")
	if len(parts) != 3 {
		t.Fatalf("id %q is not topic:partition:offset", m.ID)
	}
	return parts[1]
}

func TestSourceReadIsBoundedAndFair(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, "t"))
	_, cl := newAdmin(t, c)
	produce(t, cl, spread("t", 3, 0, 30)...)
	s := newTestSource(t, c, "g", nil, "t")
	runtest.WaitFor(t, "30 records fetched", func() bool { return buffered(s) == 30 }, runtest.Within(10*time.Second))

	buf := make([]isb.ReadMessage, 3)
	n, err := s.Read(context.Background(), buf)
	if err != nil || n != 3 {
		t.Fatalf("Read = %d, %v; want 3", n, err)
	}
	seen := map[string]bool{}
	for _, m := range buf[:n] {
		seen[partitionOf(t, m)] = true
	}
	if len(seen) != 3 {
		t.Fatalf("a read of 3 with 3 partitions buffered took from partitions %v; want one from each", seen)
	}
	// Reads of 2 go on in turn: 6 messages, 2 from each partition.
	count := map[string]int{}
	for range 3 {
		n, err := s.Read(context.Background(), buf[:2])
		if err != nil || n != 2 {
			t.Fatalf("Read = %d, %v; want 2", n, err)
		}
		for _, m := range buf[:n] {
			count[partitionOf(t, m)]++
		}
	}
	for _, k := range count {
		if k != 2 {
			t.Fatalf("6 messages read 2 at a time: %v from each partition; want 2 each", count)
		}
	}
	rest := readN(t, s, 21, 7)
	last := map[string]int64{}
	for _, m := range rest {
		off, _ := strconv.ParseInt(m.ID[strings.LastIndexByte(m.ID, ':')+1:], 10, 64)
		p := partitionOf(t, m)
		if prev, ok := last[p]; ok && off <= prev {
			t.Fatalf("partition %s read out of order: %d after %d", p, off, prev)
		}
		last[p] = off
	}
}

func TestSourceReadAtMostBuf(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "t"))
	_, cl := newAdmin(t, c)
	produce(t, cl, spread("t", 1, 0, 50)...)
	s := newTestSource(t, c, "g", nil, "t")
	runtest.WaitFor(t, "50 records fetched", func() bool { return buffered(s) == 50 }, runtest.Within(10*time.Second))
	buf := make([]isb.ReadMessage, 10)
	for _, size := range []int{1, 4, 10} {
		n, err := s.Read(context.Background(), buf[:size])
		if err != nil || n != size {
			t.Fatalf("Read(buf[:%d]) = %d, %v; want %d", size, n, err, size)
		}
	}
}

func TestSourceMessage(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "t"))
	_, cl := newAdmin(t, c)
	ts := time.UnixMilli(1700000000123)
	produce(t, cl,
		&kgo.Record{Topic: "t", Key: []byte("k1"), Value: []byte("one"), Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: "h1", Value: []byte("x")}, {Key: "h2", Value: []byte("y")}}},
		&kgo.Record{Topic: "t", Value: []byte("two"), Timestamp: ts},
		&kgo.Record{Topic: "t", Key: []byte{}, Value: []byte("three"), Timestamp: ts},
	)
	s := newTestSource(t, c, "g", nil, "t")
	msgs := readN(t, s, 3, 10)
	first := msgs[0]
	if first.ID != "t:0:0" || string(first.Value) != "one" || !first.EventTime.Equal(ts) {
		t.Fatalf("first message = %q %q %v; want t:0:0 one %v", first.ID, first.Value, first.EventTime, ts)
	}
	if len(first.Keys) != 1 || first.Keys[0] != "k1" {
		t.Fatalf("keys = %q; want [k1]", first.Keys)
	}
	want := map[string]string{"h1": "x", "h2": "y", TopicHeader: "t"}
	if len(first.Headers) != len(want) {
		t.Fatalf("headers = %v; want %v", first.Headers, want)
	}
	for k, v := range want {
		if first.Headers[k] != v {
			t.Fatalf("headers = %v; want %v", first.Headers, want)
		}
	}
	for _, m := range msgs[1:] {
		if m.Keys != nil {
			t.Fatalf("message %s without a key has keys %q", m.ID, m.Keys)
		}
	}
}

func TestSourceCommitsOnlyAcked(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "t"))
	adm, cl := newAdmin(t, c)
	produce(t, cl, spread("t", 1, 0, 10)...)
	s := newTestSource(t, c, "g", nil, "t")
	msgs := readN(t, s, 10, 10)
	if got := committed(t, adm, "g", "t", 0); got != -1 {
		t.Fatalf("committed %d before any ack; want none", got)
	}
	// Everything but offset 4 acked: the commit stops at 4.
	if err := s.Ack(context.Background(), append(append([]isb.ReadMessage{}, msgs[:4]...), msgs[5:]...)); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "offset 4 committed", func() bool { return committed(t, adm, "g", "t", 0) == 4 }, runtest.Within(5*time.Second))
	if err := s.Ack(context.Background(), msgs[4:5]); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "offset 10 committed", func() bool { return committed(t, adm, "g", "t", 0) == 10 }, runtest.Within(5*time.Second))
	if n, err := s.Pending(context.Background()); err != nil || n != 0 {
		t.Fatalf("Pending = %d, %v; want 0", n, err)
	}
}

func TestSourceAckOfForeignMessage(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "t"))
	s := newTestSource(t, c, "g", nil, "t")
	err := s.Ack(context.Background(), []isb.ReadMessage{{Message: isb.Message{ID: "x"}}})
	if err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("Ack of a message not read = %v; want an error naming it", err)
	}
}

func TestSourceCloseCommitsAckedAndNextResumes(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "t"))
	adm, cl := newAdmin(t, c)
	produce(t, cl, spread("t", 1, 0, 20)...)
	a := newTestSource(t, c, "g", Properties{"auto.commit.interval.ms": "60000"}, "t")
	msgs := readN(t, a, 15, 5)
	if err := a.Ack(context.Background(), msgs[:10]); err != nil {
		t.Fatal(err)
	}
	// The background commit waits a minute: Close commits.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, adm, "g", "t", 0); got != 10 {
		t.Fatalf("committed %d after Close; want 10", got)
	}
	if _, err := a.Read(context.Background(), make([]isb.ReadMessage, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %v; want ErrClosed", err)
	}
	if err := a.Ack(context.Background(), msgs[10:]); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ack after Close = %v; want ErrClosed", err)
	}
	// The 5 read and not acked are read again.
	b := newTestSource(t, c, "g", nil, "t")
	again := readN(t, b, 10, 4)
	if again[0].ID != "t:0:10" || again[9].ID != "t:0:19" {
		t.Fatalf("next source read %s..%s; want t:0:10..t:0:19", again[0].ID, again[9].ID)
	}
}

func TestSourceReadWaitsReadTimeout(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "t"))
	s := newTestSource(t, c, "g", nil, "t")
	s.cfg.ReadTimeout = 150 * time.Millisecond
	start := time.Now()
	n, err := s.Read(context.Background(), make([]isb.ReadMessage, 10))
	if n != 0 || err != nil {
		t.Fatalf("Read of an empty topic = %d, %v; want 0, nil", n, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 3*time.Second {
		t.Fatalf("Read of an empty topic took %v; want about 150ms", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cfg.ReadTimeout = time.Minute
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Read(ctx, make([]isb.ReadMessage, 10))
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return when its context was canceled")
	}
}

func TestSourceReadWakesOnArrival(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "t"))
	_, cl := newAdmin(t, c)
	s := newTestSource(t, c, "g", nil, "t")
	s.cfg.ReadTimeout = time.Minute
	runtest.WaitFor(t, "the partition assigned", func() bool { return ownedCount(s) == 1 }, runtest.Within(10*time.Second))
	res := make(chan int, 1)
	go func() {
		n, _ := s.Read(context.Background(), make([]isb.ReadMessage, 10))
		res <- n
	}()
	produce(t, cl, spread("t", 1, 0, 1)...)
	select {
	case n := <-res:
		if n != 1 {
			t.Fatalf("Read = %d; want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Read did not return when a record arrived")
	}
}

func TestSourcePending(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, "t"))
	_, cl := newAdmin(t, c)
	produce(t, cl, spread("t", 3, 0, 12)...)
	s := newTestSource(t, c, "g", nil, "t")
	runtest.WaitFor(t, "3 partitions assigned", func() bool { return ownedCount(s) == 3 }, runtest.Within(10*time.Second))
	if n, err := s.Pending(context.Background()); err != nil || n != 12 {
		t.Fatalf("Pending = %d, %v; want 12 (nothing committed)", n, err)
	}
	msgs := readN(t, s, 5, 5)
	if err := s.Ack(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "Pending 7", func() bool {
		n, err := s.Pending(context.Background())
		return err == nil && n == 7
	}, runtest.Within(5*time.Second))
}

func TestSourcePendingLatest(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "t"))
	_, cl := newAdmin(t, c)
	produce(t, cl, spread("t", 1, 0, 5)...)
	s := newTestSource(t, c, "g", Properties{"auto.offset.reset": "latest"}, "t")
	runtest.WaitFor(t, "the partition assigned", func() bool { return ownedCount(s) == 1 }, runtest.Within(10*time.Second))
	if n, err := s.Pending(context.Background()); err != nil || n != 0 {
		t.Fatalf("Pending = %d, %v; want 0 (reading starts at the end)", n, err)
	}
}

// member reads and acks until stop, recording how often it read each id.
type member struct {
	s    *Source
	mu   *sync.Mutex
	seen map[string]int
	read int
}

func (m *member) run(t *testing.T, stop <-chan struct{}, ack bool) {
	buf := make([]isb.ReadMessage, 7)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, err := m.s.Read(context.Background(), buf)
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Read: %v", err)
			return
		}
		m.mu.Lock()
		for _, msg := range buf[:n] {
			m.seen[msg.ID]++
		}
		m.read += n
		m.mu.Unlock()
		if ack && n > 0 {
			if err := m.s.Ack(context.Background(), buf[:n]); err != nil {
				t.Errorf("Ack: %v", err)
			}
		}
	}
}

func TestSourceRebalanceDeliversEachOnce(t *testing.T) {
	for _, strategy := range []string{"cooperative-sticky", "range"} {
		t.Run(strategy, func(t *testing.T) {
			c := newCluster(t, kfake.SeedTopics(3, "t"))
			_, cl := newAdmin(t, c)
			produce(t, cl, spread("t", 3, 0, 150)...)
			props := Properties{"partition.assignment.strategy": strategy}
			var mu sync.Mutex
			seen := map[string]int{}
			total := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
			stop := make(chan struct{})
			var wg sync.WaitGroup
			start := func(m *member) {
				wg.Add(1)
				go func() { defer wg.Done(); m.run(t, stop, true) }()
			}
			a := &member{s: newTestSource(t, c, "g", props, "t"), mu: &mu, seen: seen}
			start(a)
			runtest.WaitFor(t, "150 read by the first member", func() bool { return total() == 150 }, runtest.Within(10*time.Second))
			b := &member{s: newTestSource(t, c, "g", props, "t"), mu: &mu, seen: seen}
			start(b)
			runtest.WaitFor(t, "the second member assigned", func() bool { return ownedCount(b.s) > 0 }, runtest.Within(10*time.Second))
			produce(t, cl, spread("t", 3, 150, 150)...)
			runtest.WaitFor(t, "300 read", func() bool { return total() == 300 }, runtest.Within(10*time.Second))
			close(stop)
			wg.Wait()
			for id, n := range seen {
				if n != 1 {
					t.Errorf("%s read %d times; want once", id, n)
				}
			}
			if b.read == 0 {
				t.Errorf("the second member read nothing")
			}
		})
	}
}

func TestSourceUnackedAreReadAgainByTheGroup(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, "t"))
	_, cl := newAdmin(t, c)
	produce(t, cl, spread("t", 3, 0, 90)...)
	a := newTestSource(t, c, "g", Properties{"auto.commit.interval.ms": "0"}, "t")
	first := readN(t, a, 60, 10)
	if err := a.Ack(context.Background(), first[:30]); err != nil {
		t.Fatal(err)
	}
	b := newTestSource(t, c, "g", nil, "t")
	// a ends without acking the other 30 it read.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	for _, m := range first[:30] {
		acked[m.ID] = true
	}
	seen := map[string]bool{}
	buf := make([]isb.ReadMessage, 16)
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < 60 && time.Now().Before(deadline) {
		n, err := b.Read(context.Background(), buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range buf[:n] {
			if acked[m.ID] {
				t.Fatalf("%s was acked and committed, and read again", m.ID)
			}
			seen[m.ID] = true
		}
	}
	if len(seen) != 60 {
		t.Fatalf("the group read %d of the 60 messages not acked", len(seen))
	}
}

func TestSourceDoesNotWaitForBrokers(t *testing.T) {
	start := time.Now()
	s, err := NewSource(context.Background(), SourceConfig{
		Client: ClientConfig{Brokers: []string{"127.0.0.1:1"}, Properties: Properties{"request.timeout.ms": "500"}},
		Topics: []string{"t"}, Group: "g", ReadTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("NewSource took %v with no broker", d)
	}
	n, _ := s.Read(context.Background(), make([]isb.ReadMessage, 1))
	if n != 0 {
		t.Fatalf("Read = %d with no broker", n)
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close hangs with no broker")
	}
}

func TestNewSourceErrors(t *testing.T) {
	ok := SourceConfig{Client: ClientConfig{Brokers: []string{"127.0.0.1:1"}}, Topics: []string{"t"}, Group: "g"}
	for _, tc := range []struct {
		name string
		edit func(*SourceConfig)
		want string
	}{
		{"no group", func(c *SourceConfig) { c.Group = "" }, "kafka source: consumerGroup is required"},
		{"no topic", func(c *SourceConfig) { c.Topics = nil }, "kafka source: topic is required"},
		{"empty topic", func(c *SourceConfig) { c.Topics = []string{"a", " "} }, `topic ("a, ") must not hold an empty topic name`},
		{"no brokers", func(c *SourceConfig) { c.Client.Brokers = nil }, "kafka source: brokers is required"},
		{"auto commit", func(c *SourceConfig) { c.Client.Properties = Properties{"enable.auto.commit": "true"} }, `enable.auto.commit ("true") must be false`},
		{"gssapi", func(c *SourceConfig) { c.Client.SASL = &SASL{Mechanism: "GSSAPI"} }, "GSSAPI"},
		{"sasl without password", func(c *SourceConfig) { c.Client.SASL = &SASL{Mechanism: "PLAIN", User: "u"} }, "sasl password is required for PLAIN"},
		{"sasl_ssl without sasl", func(c *SourceConfig) { c.Client.Properties = Properties{"security.protocol": "SASL_SSL"} }, "needs sasl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			s, err := NewSource(context.Background(), cfg)
			if err == nil {
				s.Close()
				t.Fatalf("NewSource succeeded; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewSource error = %q; want one with %q matching ErrInvalidConfig", err, tc.want)
			}
		})
	}
}

func TestSourceRevokeWaitsForAcks(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait time.Duration
		ack  bool
	}{
		{"acked during the revoke: committed before the handover", 10 * time.Second, true},
		{"not acked: read again by the new owner", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, kfake.SeedTopics(3, "t"))
			adm, cl := newAdmin(t, c)
			produce(t, cl, spread("t", 3, 0, 30)...)
			edit := func(cfg *SourceConfig) { cfg.RevokeWait = tc.wait }
			a := newTestSourceWith(t, c, "g", nil, edit, "t")
			held := readN(t, a, 30, 30)
			b := newTestSourceWith(t, c, "g", nil, edit, "t")
			if tc.ack {
				runtest.WaitFor(t, "a revoke to begin", func() bool { return revoking(a) }, runtest.Within(10*time.Second))
				if err := a.Ack(context.Background(), held); err != nil {
					t.Fatal(err)
				}
			}
			runtest.WaitFor(t, "b assigned", func() bool { return ownedCount(b) > 0 }, runtest.Within(10*time.Second))
			if !tc.ack {
				readByA := map[string]bool{}
				for _, m := range held {
					readByA[m.ID] = true
				}
				for _, m := range readN(t, b, 10*ownedCount(b), 10) {
					if !readByA[m.ID] {
						t.Fatalf("b read %s, which a did not read", m.ID)
					}
				}
				return
			}
			for _, ps := range b.owned() {
				for _, p := range ps {
					if got := committed(t, adm, "g", "t", p); got != 10 {
						t.Fatalf("partition %d handed over at offset %d; want 10", p, got)
					}
				}
			}
			if n, err := b.Read(context.Background(), make([]isb.ReadMessage, 10)); n != 0 || err != nil {
				t.Fatalf("b read %d, %v; want nothing: a acked all before the handover", n, err)
			}
		})
	}
}

// TestSourceGroupPending has two members of a group share a topic of 3
// partitions holding 12 messages: each one's Pending is the lag of the
// partitions it owns, the two summing to 12, and GroupPending is the whole
// group's lag, 12, for either.
func TestSourceGroupPending(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, "t"))
	_, cl := newAdmin(t, c)
	produce(t, cl, spread("t", 3, 0, 12)...)
	a := newTestSource(t, c, "g", nil, "t")
	b := newTestSource(t, c, "g", nil, "t")
	runtest.WaitFor(t, "the 3 partitions split between the two", func() bool {
		na, nb := ownedCount(a), ownedCount(b)
		return na+nb == 3 && na > 0 && nb > 0
	}, runtest.Within(20*time.Second))
	ctx := context.Background()
	pa, errA := a.Pending(ctx)
	pb, errB := b.Pending(ctx)
	if errA != nil || errB != nil || pa+pb != 12 || pa == 12 || pb == 12 {
		t.Fatalf("Pending = %d (%v) and %d (%v); want parts of 12", pa, errA, pb, errB)
	}
	for _, s := range []*Source{a, b} {
		if n, err := s.GroupPending(ctx); err != nil || n != 12 {
			t.Fatalf("GroupPending = %d, %v; want the group's 12", n, err)
		}
	}
}
