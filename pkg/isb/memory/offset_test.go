package memory_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
)

func offsets(b *memory.Buffer, ms []isb.ReadMessage) []int64 {
	var out []int64
	for i := range ms {
		out = append(out, b.Offset(&ms[i]))
	}
	return out
}

// Write gives offsets 1, 2, 3... in write order, whenever the messages are
// read; a message refused as the buffer is full takes none.
func TestOffsets(t *testing.T) {
	b := memory.New("buf", 4, time.Second, clock.NewManual(t0))
	if o, s := b.LastOffset(), b.StartOffset(); o != 0 || s != 0 {
		t.Fatalf("new buffer: LastOffset %d, StartOffset %d; want 0, 0", o, s)
	}
	write(t, b, "a", "b")
	if o := b.LastOffset(); o != 2 {
		t.Fatalf("LastOffset = %d after two messages, want 2", o)
	}
	first := read(t, b, 1)
	write(t, b, "c", "d", "e") // e: full
	if o := b.LastOffset(); o != 4 {
		t.Fatalf("LastOffset = %d after four messages stored, want 4", o)
	}
	rest := read(t, b, 10)
	if got := offsets(b, slices.Concat(first, rest)); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("offsets %v, want [1 2 3 4]", got)
	}
	b.Ack(context.Background(), first)
	write(t, b, "e")
	if got := offsets(b, read(t, b, 1)); !slices.Equal(got, []int64{5}) {
		t.Fatalf("offset of the message written after the full one: %v, want [5]", got)
	}
	if o := b.Offset(&isb.ReadMessage{Handle: "buf-1"}); o != 0 {
		t.Fatalf("Offset of a message not read from the buffer = %d, want 0", o)
	}
}

// A message nacked, at once or with a delay, is read again at its offset.
func TestNackKeepsTheOffset(t *testing.T) {
	for _, delay := range []time.Duration{0, 2 * time.Second} {
		t.Run(delay.String(), func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewManual(t0)
			b := memory.New("buf", 10, time.Second, clk)
			write(t, b, "a", "b", "c")
			r := read(t, b, 3)
			if err := b.Nack(ctx, []isb.ReadMessage{r[2], r[0]}, delay); err != nil {
				t.Fatal(err)
			}
			write(t, b, "d")
			clk.Advance(delay)
			again := read(t, b, 10)
			if got, want := values(again), []string{"c", "a", "d"}; !slices.Equal(got, want) {
				t.Fatalf("read again %q, want %q", got, want)
			}
			if got, want := offsets(b, again), []int64{3, 1, 4}; !slices.Equal(got, want) {
				t.Fatalf("offsets %v, want %v", got, want)
			}
		})
	}
}

// Every message a writer wrote is at or before the LastOffset it sees after
// its Write, with writers and readers at work together.
func TestConcurrentOffsets(t *testing.T) {
	const writers, perWriter = 4, 200
	ctx := context.Background()
	b := memory.New("buf", writers*perWriter, time.Second, nil)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		after = map[string]int64{} // a message's value: LastOffset after its Write
	)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				v := strconv.Itoa(w) + "-" + strconv.Itoa(i)
				errs := make([]error, 1)
				if err := b.Write(ctx, msgs(v), errs); err != nil || errs[0] != nil {
					t.Errorf("write %s: %v, %v", v, err, errs[0])
					return
				}
				o := b.LastOffset()
				mu.Lock()
				after[v] = o
				mu.Unlock()
			}
		})
	}
	var got []isb.ReadMessage
	for len(got) < writers*perWriter {
		buf := make([]isb.ReadMessage, 50)
		n, err := b.Read(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	wg.Wait()
	for i := range got {
		o := b.Offset(&got[i])
		if v := string(got[i].Value); o > after[v] {
			t.Errorf("message %s at offset %d, after the LastOffset %d its writer saw", v, o, after[v])
		}
		if want := int64(i + 1); o != want {
			t.Fatalf("message %d read at offset %d, want %d", i, o, want)
		}
	}
}
