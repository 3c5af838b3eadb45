package memory_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is where every manual clock in these tests starts.
var t0 = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// wait bounds every wait on a channel in these tests.
const wait = 5 * time.Second

// waitArmed waits until a timer is armed on clk, so that a test knows a Read is
// waiting before it moves the clock.
func waitArmed(t *testing.T, clk *clock.Manual) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal("no timer armed on the clock")
	}
}

// msgs returns messages with the given payloads.
func msgs(values ...string) []isb.Message {
	out := make([]isb.Message, len(values))
	for i, v := range values {
		out[i] = isb.Message{Value: []byte(v)}
	}
	return out
}

// write writes values to b and returns the errors per message.
func write(t *testing.T, b *memory.Buffer, values ...string) []error {
	t.Helper()
	errs := make([]error, len(values))
	for i := range errs {
		errs[i] = errors.New("not set")
	}
	if err := b.Write(context.Background(), msgs(values...), errs); err != nil {
		t.Fatalf("Write = %v", err)
	}
	return errs
}

// read reads up to n messages from b.
func read(t *testing.T, b *memory.Buffer, n int) []isb.ReadMessage {
	t.Helper()
	buf := make([]isb.ReadMessage, n)
	got, err := b.Read(context.Background(), buf)
	if err != nil {
		t.Fatalf("Read = %v", err)
	}
	return buf[:got]
}

func values(ms []isb.ReadMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Value))
	}
	return out
}

func pendingValues(b *memory.Buffer) []string {
	var out []string
	for _, m := range b.Messages() {
		out = append(out, string(m.Value))
	}
	return out
}

// readResult is what a Read run in a goroutine returned.
type readResult struct {
	msgs []isb.ReadMessage
	err  error
}

// readAsync runs a Read of up to n messages in a goroutine.
func readAsync(ctx context.Context, b *memory.Buffer, n int) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		buf := make([]isb.ReadMessage, n)
		got, err := b.Read(ctx, buf)
		ch <- readResult{buf[:got], err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan readResult) readResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Read = %v", r.err)
		}
		return r
	case <-time.After(wait):
		t.Fatal("Read did not return")
		return readResult{}
	}
}

func TestWriteUpToCapacity(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		writes   [][]string
		wantErrs [][]error
		want     []string
	}{
		{"under capacity", 3, [][]string{{"a", "b"}}, [][]error{{nil, nil}}, []string{"a", "b"}},
		{"exactly capacity", 2, [][]string{{"a", "b"}}, [][]error{{nil, nil}}, []string{"a", "b"}},
		{"over capacity in one batch", 2, [][]string{{"a", "b", "c", "d"}},
			[][]error{{nil, nil, isb.ErrBufferFull, isb.ErrBufferFull}}, []string{"a", "b"}},
		{"over capacity across batches", 3, [][]string{{"a", "b"}, {"c", "d"}, {"e"}},
			[][]error{{nil, nil}, {nil, isb.ErrBufferFull}, {isb.ErrBufferFull}}, []string{"a", "b", "c"}},
		{"zero capacity", 0, [][]string{{"a"}}, [][]error{{isb.ErrBufferFull}}, nil},
		{"empty batch", 1, [][]string{{}}, [][]error{{}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := memory.New("buf", tt.capacity, time.Second, clock.NewManual(t0))
			for i, w := range tt.writes {
				errs := write(t, b, w...)
				for j := range errs {
					if errs[j] != tt.wantErrs[i][j] {
						t.Errorf("write %d message %d: err = %v, want %v", i, j, errs[j], tt.wantErrs[i][j])
					}
				}
			}
			if got := pendingValues(b); !slices.Equal(got, tt.want) {
				t.Errorf("pending %q, want %q", got, tt.want)
			}
			if s := b.Stats(); s.Pending != len(tt.want) || s.InFlight != 0 || s.Acked != 0 {
				t.Errorf("Stats() = %+v, want %d pending", s, len(tt.want))
			}
		})
	}
}

func TestReadMovesToInFlight(t *testing.T) {
	tests := []struct {
		name         string
		write        []string
		bufLen       int
		wantRead     []string
		wantPending  []string
		wantInFlight int
	}{
		{"fewer than the buffer", []string{"a", "b"}, 5, []string{"a", "b"}, nil, 2},
		{"as many as the buffer", []string{"a", "b"}, 2, []string{"a", "b"}, nil, 2},
		{"more than the buffer", []string{"a", "b", "c", "d"}, 3, []string{"a", "b", "c"}, []string{"d"}, 3},
		{"one at a time", []string{"a", "b", "c"}, 1, []string{"a"}, []string{"b", "c"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
			write(t, b, tt.write...)
			got := read(t, b, tt.bufLen)
			if !slices.Equal(values(got), tt.wantRead) {
				t.Fatalf("read %q, want %q", values(got), tt.wantRead)
			}
			if p := pendingValues(b); !slices.Equal(p, tt.wantPending) {
				t.Errorf("pending %q, want %q", p, tt.wantPending)
			}
			if s := b.Stats(); s.InFlight != tt.wantInFlight || s.Pending != len(tt.wantPending) {
				t.Errorf("Stats() = %+v, want %d in flight, %d pending", s, tt.wantInFlight, len(tt.wantPending))
			}
		})
	}
}

func TestReadIDs(t *testing.T) {
	b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
	in := []isb.Message{
		{Value: []byte("a")},
		{ID: "own-id", Value: []byte("b"), Keys: []string{"k"}, Headers: map[string]string{"h": "v"}, EventTime: t0},
		{Value: []byte("c")},
	}
	if err := b.Write(context.Background(), in, make([]error, len(in))); err != nil {
		t.Fatal(err)
	}
	got := read(t, b, 10)
	wantIDs := []string{"buf-1", "own-id", "buf-3"}
	for i, m := range got {
		if m.ID != wantIDs[i] {
			t.Errorf("message %d: ID = %q, want %q", i, m.ID, wantIDs[i])
		}
		if m.Handle == nil {
			t.Errorf("message %d: no handle", i)
		}
	}
	if m := got[1]; !slices.Equal(m.Keys, []string{"k"}) || m.Headers["h"] != "v" || !m.EventTime.Equal(t0) {
		t.Errorf("message 1 = %+v, want its keys, headers and event time kept", m.Message)
	}
	// Every read gets a new handle, even for a message that has its own id.
	if got[0].Handle == got[1].Handle || got[1].Handle == got[2].Handle {
		t.Errorf("handles not distinct: %v", []any{got[0].Handle, got[1].Handle, got[2].Handle})
	}
}

func TestInFlightCountsAgainstCapacity(t *testing.T) {
	ctx := context.Background()
	b := memory.New("buf", 3, time.Second, clock.NewManual(t0))
	write(t, b, "a", "b", "c")
	got := read(t, b, 2)

	steps := []struct {
		name     string
		do       func()
		write    []string
		wantErrs []error
	}{
		{"two in flight and one pending fill the buffer", func() {}, []string{"d"}, []error{isb.ErrBufferFull}},
		{"ack one frees one place", func() { b.Ack(ctx, got[:1]) }, []string{"d", "e"}, []error{nil, isb.ErrBufferFull}},
		{"ack the other frees one more", func() { b.Ack(ctx, got[1:]) }, []string{"e", "f"}, []error{nil, isb.ErrBufferFull}},
		{"nack frees nothing", func() {
			r := read(t, b, 1)
			b.Nack(ctx, r, 0)
		}, []string{"f"}, []error{isb.ErrBufferFull}},
	}
	for _, s := range steps {
		s.do()
		errs := write(t, b, s.write...)
		for i := range errs {
			if errs[i] != s.wantErrs[i] {
				t.Fatalf("%s: write %q: err = %v, want %v", s.name, s.write[i], errs[i], s.wantErrs[i])
			}
		}
	}
	if got := pendingValues(b); !slices.Equal(got, []string{"c", "d", "e"}) {
		t.Fatalf("pending %q, want [c d e]", got)
	}
}

func TestAck(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		ack   func(b *memory.Buffer, read []isb.ReadMessage)
		acked uint64
		left  int
	}{
		{"all", func(b *memory.Buffer, r []isb.ReadMessage) { b.Ack(ctx, r) }, 3, 0},
		{"some", func(b *memory.Buffer, r []isb.ReadMessage) { b.Ack(ctx, r[1:2]) }, 1, 2},
		{"twice counts once", func(b *memory.Buffer, r []isb.ReadMessage) {
			b.Ack(ctx, r[:2])
			b.Ack(ctx, r[:2])
		}, 2, 1},
		{"unknown handles are ignored", func(b *memory.Buffer, r []isb.ReadMessage) {
			b.Ack(ctx, []isb.ReadMessage{{Handle: "buf-99"}, {Handle: 7}, {}})
		}, 0, 3},
		{"empty", func(b *memory.Buffer, r []isb.ReadMessage) { b.Ack(ctx, nil) }, 0, 3},
		{"after nack the old handle is stale", func(b *memory.Buffer, r []isb.ReadMessage) {
			b.Nack(ctx, r[:1], 0)
			b.Ack(ctx, r[:1])
		}, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
			write(t, b, "a", "b", "c")
			r := read(t, b, 3)
			tt.ack(b, r)
			if s := b.Stats(); s.Acked != tt.acked || s.InFlight != tt.left {
				t.Fatalf("Stats() = %+v, want %d acked and %d in flight", s, tt.acked, tt.left)
			}
		})
	}
}

func TestNackPutsBackAtTheFront(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		nack        func(r []isb.ReadMessage) []isb.ReadMessage
		wantPending []string
	}{
		{"all in order", func(r []isb.ReadMessage) []isb.ReadMessage { return r }, []string{"a", "b", "c", "d"}},
		{"in the order given", func(r []isb.ReadMessage) []isb.ReadMessage {
			return []isb.ReadMessage{r[2], r[0]}
		}, []string{"c", "a", "d"}},
		{"one", func(r []isb.ReadMessage) []isb.ReadMessage { return r[1:2] }, []string{"b", "d"}},
		{"twice puts back once", func(r []isb.ReadMessage) []isb.ReadMessage {
			return []isb.ReadMessage{r[0], r[0]}
		}, []string{"a", "d"}},
		{"none", func(r []isb.ReadMessage) []isb.ReadMessage { return nil }, []string{"d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
			write(t, b, "a", "b", "c", "d")
			r := read(t, b, 3)
			nacked := tt.nack(r)
			if err := b.Nack(ctx, nacked, 0); err != nil {
				t.Fatal(err)
			}
			if got := pendingValues(b); !slices.Equal(got, tt.wantPending) {
				t.Fatalf("pending %q, want %q", got, tt.wantPending)
			}
			again := read(t, b, 10)
			if !slices.Equal(values(again), tt.wantPending) {
				t.Fatalf("read again %q, want %q", values(again), tt.wantPending)
			}
			// In flight: the messages not nacked and everything read again.
			if s := b.Stats(); s.InFlight != 4 || s.Pending != 0 || s.Acked != 0 {
				t.Fatalf("Stats() = %+v, want 4 in flight", s)
			}
		})
	}
}

func TestNackKeepsTheID(t *testing.T) {
	ctx := context.Background()
	b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
	write(t, b, "a")
	first := read(t, b, 1)
	b.Nack(ctx, first, 0)
	again := read(t, b, 1)
	if again[0].ID != first[0].ID {
		t.Fatalf("read again with ID %q, first read with %q", again[0].ID, first[0].ID)
	}
}

func TestNackWithDelay(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(t0)
	b := memory.New("buf", 10, time.Second, clk)
	write(t, b, "a", "b")
	first := read(t, b, 1)
	if err := b.Nack(ctx, first, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Pending != 1 || s.InFlight != 1 {
		t.Fatalf("before the delay: %+v; want the nack'd message still in flight", s)
	}
	clk.Advance(2 * time.Second)
	if s := b.Stats(); s.Pending != 2 || s.InFlight != 0 {
		t.Fatalf("after the delay: %+v; want it pending again", s)
	}
	if again := read(t, b, 1); string(again[0].Value) != "a" {
		t.Fatalf("read %q first after the delay; want the nack'd message at the front", again[0].Value)
	}
}

func TestWaitAcked(t *testing.T) {
	tests := []struct {
		name   string
		n      uint64
		ackNow int // acked before waiting
		ackBg  int // acked while waiting
	}{
		{"zero returns at once", 0, 0, 0},
		{"already acked", 2, 2, 0},
		{"acked while waiting", 3, 1, 2},
		{"all while waiting", 3, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
			write(t, b, "a", "b", "c")
			r := read(t, b, 3)
			b.Ack(ctx, r[:tt.ackNow])
			done := make(chan error, 1)
			go func() { done <- b.WaitAcked(ctx, tt.n) }()
			for i := tt.ackNow; i < tt.ackNow+tt.ackBg; i++ {
				b.Ack(ctx, r[i:i+1])
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("WaitAcked = %v", err)
				}
			case <-time.After(wait):
				t.Fatal("WaitAcked did not return")
			}
		})
	}
}

func TestWaitAckedBlocksUntilAck(t *testing.T) {
	ctx := context.Background()
	b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
	write(t, b, "a", "b")
	r := read(t, b, 2)
	done := make(chan error, 1)
	go func() { done <- b.WaitAcked(ctx, 2) }()
	b.Ack(ctx, r[:1])
	select {
	case err := <-done:
		t.Fatalf("WaitAcked(2) returned %v after one ack", err)
	default:
	}
	b.Ack(ctx, r[1:])
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitAcked = %v", err)
		}
	case <-time.After(wait):
		t.Fatal("WaitAcked did not return after the second ack")
	}
}

func TestWaitCancelled(t *testing.T) {
	tests := []struct {
		name string
		wait func(ctx context.Context, b *memory.Buffer) error
	}{
		{"acked", func(ctx context.Context, b *memory.Buffer) error { return b.WaitAcked(ctx, 1) }},
		{"pending", func(ctx context.Context, b *memory.Buffer) error { return b.WaitPending(ctx, 1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tt.wait(ctx, b) }()
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("wait = %v, want context.Canceled", err)
				}
			case <-time.After(wait):
				t.Fatal("wait did not return on cancel")
			}
		})
	}
}

func TestWaitPending(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		before  []string
		while   [][]string // batches written while waiting
		wantErr bool
	}{
		{"zero returns at once", 0, nil, nil, false},
		{"already there", 2, []string{"a", "b"}, nil, false},
		{"written while waiting", 3, []string{"a"}, [][]string{{"b"}, {"c", "d"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
			write(t, b, tt.before...)
			done := make(chan error, 1)
			go func() { done <- b.WaitPending(context.Background(), tt.n) }()
			for _, w := range tt.while {
				write(t, b, w...)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("WaitPending = %v", err)
				}
			case <-time.After(wait):
				t.Fatal("WaitPending did not return")
			}
		})
	}
}

func TestWaitPendingCountsOnlyUnread(t *testing.T) {
	b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
	write(t, b, "a", "b")
	read(t, b, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.WaitPending(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitPending(2) with one unread = %v, want context.Canceled", err)
	}
	if err := b.WaitPending(ctx, 1); err != nil {
		t.Fatalf("WaitPending(1) with one unread = %v", err)
	}
}

func TestReadTimeoutManualClock(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
	}{
		{"one second", time.Second},
		{"one millisecond", time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			b := memory.New("buf", 10, tt.timeout, clk)
			ch := readAsync(context.Background(), b, 5)
			waitArmed(t, clk)
			clk.Advance(tt.timeout - time.Nanosecond)
			select {
			case r := <-ch:
				t.Fatalf("Read returned %d messages before its timeout", len(r.msgs))
			default:
			}
			if clk.Pending() != 1 {
				t.Fatalf("Pending() = %d before the timeout, want 1", clk.Pending())
			}
			clk.Advance(time.Nanosecond)
			if r := await(t, ch); len(r.msgs) != 0 {
				t.Fatalf("Read returned %d messages, want 0", len(r.msgs))
			}
			if clk.Pending() != 0 {
				t.Fatalf("Pending() = %d after Read returned, want 0", clk.Pending())
			}
		})
	}
}

func TestReadWaitsForWrite(t *testing.T) {
	clk := clock.NewManual(t0)
	b := memory.New("buf", 10, time.Hour, clk)
	ch := readAsync(context.Background(), b, 5)
	waitArmed(t, clk)
	write(t, b, "a", "b")
	r := await(t, ch)
	if !slices.Equal(values(r.msgs), []string{"a", "b"}) {
		t.Fatalf("Read %q, want [a b]", values(r.msgs))
	}
	if clk.Pending() != 0 {
		t.Fatalf("Read left %d timers on the clock", clk.Pending())
	}
}

func TestReadReturnsOnCancel(t *testing.T) {
	clk := clock.NewManual(t0)
	b := memory.New("buf", 10, time.Hour, clk)
	ctx, cancel := context.WithCancel(context.Background())
	ch := readAsync(ctx, b, 5)
	waitArmed(t, clk)
	cancel()
	if r := await(t, ch); len(r.msgs) != 0 {
		t.Fatalf("Read returned %d messages, want 0", len(r.msgs))
	}
}

func TestReadAckWakesNothing(t *testing.T) {
	// An ack or nack of nothing wakes a waiting Read, which goes back to waiting
	// for the same deadline.
	clk := clock.NewManual(t0)
	b := memory.New("buf", 10, time.Second, clk)
	ch := readAsync(context.Background(), b, 5)
	waitArmed(t, clk)
	b.Ack(context.Background(), nil)
	b.Nack(context.Background(), nil, 0)
	select {
	case r := <-ch:
		t.Fatalf("Read returned %d messages on an empty ack", len(r.msgs))
	default:
	}
	clk.Advance(time.Second)
	if r := await(t, ch); len(r.msgs) != 0 {
		t.Fatalf("Read returned %d messages, want 0", len(r.msgs))
	}
}

func TestClose(t *testing.T) {
	tests := []struct {
		name     string
		before   []string
		wantRead []string
	}{
		{"empty buffer reads nothing at once", nil, nil},
		{"messages left stay readable", []string{"a", "b"}, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			b := memory.New("buf", 10, time.Hour, clk)
			write(t, b, tt.before...)
			if err := b.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			// The clock never moves: the reads return because the buffer is closed.
			r := await(t, readAsync(context.Background(), b, 10))
			if !slices.Equal(values(r.msgs), tt.wantRead) {
				t.Fatalf("Read %q, want %q", values(r.msgs), tt.wantRead)
			}
			r = await(t, readAsync(context.Background(), b, 10))
			if len(r.msgs) != 0 {
				t.Fatalf("second Read returned %d messages, want 0", len(r.msgs))
			}
			if errs := write(t, b, "z"); errs[0] != memory.ErrClosed {
				t.Fatalf("Write after Close: err = %v, want ErrClosed", errs[0])
			}
			if err := b.Close(); err != nil {
				t.Fatalf("second Close = %v", err)
			}
		})
	}
}

func TestCloseWakesWaitingRead(t *testing.T) {
	clk := clock.NewManual(t0)
	b := memory.New("buf", 10, time.Hour, clk)
	ch := readAsync(context.Background(), b, 5)
	waitArmed(t, clk)
	b.Close()
	if r := await(t, ch); len(r.msgs) != 0 {
		t.Fatalf("Read returned %d messages, want 0", len(r.msgs))
	}
}

func TestMessagesIsACopy(t *testing.T) {
	b := memory.New("buf", 10, time.Second, clock.NewManual(t0))
	write(t, b, "a", "b")
	got := b.Messages()
	got[0] = isb.Message{Value: []byte("changed")}
	if p := pendingValues(b); !slices.Equal(p, []string{"a", "b"}) {
		t.Fatalf("pending %q after changing the copy, want [a b]", p)
	}
}

func TestConcurrentUse(t *testing.T) {
	const (
		writers   = 4
		perWriter = 500
		readers   = 4
		total     = writers * perWriter
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := memory.New("buf", 64, time.Millisecond, nil)

	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; i < perWriter; {
				acked := b.Stats().Acked
				errs := make([]error, 1)
				b.Write(ctx, msgs(strconv.Itoa(w)+"-"+strconv.Itoa(i)), errs)
				if errs[0] == nil {
					i++
					continue
				}
				// Full: wait for room freed by an ack.
				if err := b.WaitAcked(ctx, acked+1); err != nil {
					return
				}
			}
		})
	}
	var (
		mu      sync.Mutex
		acked   = map[string]int{}
		nacked  = map[string]bool{}
		rg      sync.WaitGroup
		nackAll = func(buf []isb.ReadMessage) (nack, ack []isb.ReadMessage) {
			// Nack each message the first time it is read at the head of a batch.
			mu.Lock()
			defer mu.Unlock()
			if len(buf) > 1 && !nacked[string(buf[0].Value)] {
				nacked[string(buf[0].Value)] = true
				nack, buf = buf[:1], buf[1:]
			}
			for _, m := range buf {
				acked[string(m.Value)]++
			}
			return nack, buf
		}
	)
	for range readers {
		rg.Go(func() {
			buf := make([]isb.ReadMessage, 7)
			for ctx.Err() == nil {
				n, _ := b.Read(ctx, buf)
				nack, ack := nackAll(buf[:n])
				b.Nack(ctx, nack, 0)
				b.Ack(ctx, ack)
			}
		})
	}
	wg.Wait()
	wctx, wcancel := context.WithTimeout(ctx, wait)
	defer wcancel()
	if err := b.WaitAcked(wctx, total); err != nil {
		t.Fatalf("WaitAcked(%d) = %v; Stats() = %+v", total, err, b.Stats())
	}
	cancel()
	rg.Wait()

	if len(acked) != total {
		t.Fatalf("acked %d distinct messages, want %d", len(acked), total)
	}
	for w := range writers {
		for i := range perWriter {
			if v := strconv.Itoa(w) + "-" + strconv.Itoa(i); acked[v] != 1 {
				t.Fatalf("message %s acked %d times, want 1", v, acked[v])
			}
		}
	}
	if len(nacked) == 0 {
		t.Error("no message was nacked; the test did not exercise Nack")
	}
	if s := b.Stats(); s.Acked != total || s.InFlight != 0 || s.Pending != 0 {
		t.Fatalf("Stats() = %+v, want all %d acked", s, total)
	}
}

// NackOptions with MaxDeliveries puts a message back until it has been read
// that many times, then drops it as acked.
func TestNackOptionsMaxDeliveries(t *testing.T) {
	ctx := context.Background()
	b := memory.New("buf", 10, time.Millisecond, clock.NewManual(t0))
	write(t, b, "a")
	opts := isb.NackOptions{MaxDeliveries: 2}
	for delivery := 1; delivery <= 2; delivery++ {
		got := read(t, b, 1)
		if err := b.NackOptions(ctx, got, opts); err != nil {
			t.Fatal(err)
		}
	}
	if s := b.Stats(); s.Pending != 0 || s.InFlight != 0 {
		t.Fatalf("after the second delivery: %+v; want the message dropped", s)
	}
	if err := b.WaitAcked(ctx, 1); err != nil {
		t.Fatalf("the dropped message is not counted acked: %v", err)
	}
}
