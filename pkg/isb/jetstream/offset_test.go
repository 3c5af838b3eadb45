package jetstream

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// Offsets are stream sequences: they grow in write order, a frame's
// messages share one, every message a Write stored is at or before the
// Writer's LastOffset, a message written again (a duplicate) does not move
// it, and a message delivered again keeps its offset.
func TestOffsets(t *testing.T) {
	t.Parallel()
	for _, frame := range []int{1, 4} {
		t.Run(fmt.Sprint("frame=", frame), func(t *testing.T) {
			t.Parallel()
			sp := spec("offsets-0", 1000)
			_, c := setup(t, sp, func(cfg *Config) { cfg.FrameSize = frame })
			w := newWriter(t, c, sp, "up")
			r := newReader(t, c, sp.Name, 200*time.Millisecond)
			if o := w.LastOffset(); o != 0 {
				t.Fatalf("LastOffset before any write = %d, want 0", o)
			}

			// LastOffset never goes down, read while Writes are in progress.
			done := make(chan struct{})
			var watch sync.WaitGroup
			watch.Go(func() {
				for prev := int64(0); ; {
					select {
					case <-done:
						return
					default:
					}
					o := w.LastOffset()
					if o < prev {
						t.Errorf("LastOffset went from %d to %d", prev, o)
						return
					}
					prev = o
				}
			})
			first, second := messages("a", 10), messages("b", 10)
			write(t, w, first)
			lastFirst := w.LastOffset()
			write(t, w, second)
			last := w.LastOffset()
			write(t, w, first) // duplicates: stored before, at or before lastFirst
			close(done)
			watch.Wait()
			if o := w.LastOffset(); o != last {
				t.Fatalf("LastOffset after writing duplicates = %d, want %d as before", o, last)
			}

			got := readN(t, r, 20, 20)
			if want := ids(toRead(slices.Concat(first, second))); !slices.Equal(ids(got), want) {
				t.Fatalf("read %v, want %v", ids(got), want)
			}
			offsets := make(map[string]int64)
			for i := range got {
				o := r.Offset(&got[i])
				offsets[got[i].ID] = o
				bound := last
				if i < len(first) {
					bound = lastFirst
				}
				if o <= 0 || o > bound {
					t.Errorf("message %s: offset %d, want 1 to %d", got[i].ID, o, bound)
				}
				if i == 0 {
					continue
				}
				prev := r.Offset(&got[i-1])
				// Messages i-1 and i share a frame when both are in the same
				// batch and the same group of frame messages.
				sameFrame := i%len(first) != 0 && i%len(first)/frame == (i-1)%len(first)/frame
				if sameFrame && o != prev || !sameFrame && o <= prev {
					t.Errorf("message %s: offset %d after %d; same frame: %v", got[i].ID, o, prev, sameFrame)
				}
			}

			// Nack one message and ack the rest: it comes back (with its
			// frame) at the offsets read first.
			nacked := got[5]
			if err := r.Nack(testCtx(t), []isb.ReadMessage{nacked}, 0); err != nil {
				t.Fatal(err)
			}
			ack(t, r, slices.Concat(got[:5], got[6:]))
			again := readN(t, r, frame, frame)
			if !slices.Contains(ids(again), nacked.ID) {
				t.Fatalf("read again %v, want %s among them", ids(again), nacked.ID)
			}
			for i := range again {
				if o := r.Offset(&again[i]); o != offsets[again[i].ID] {
					t.Errorf("message %s read again at offset %d, first at %d", again[i].ID, o, offsets[again[i].ID])
				}
			}
			ack(t, r, again)
		})
	}
}

// A Reader starts at the consumer's ack floor: every message up to the
// last of those acked in order by the Reader before it.
func TestStartOffset(t *testing.T) {
	t.Parallel()
	sp := spec("start-0", 1000)
	_, c := setup(t, sp, nil)
	w := newWriter(t, c, sp, "up")
	r := newReader(t, c, sp.Name, 200*time.Millisecond)
	if o := r.StartOffset(); o != 0 {
		t.Fatalf("StartOffset of a new buffer = %d, want 0", o)
	}
	write(t, w, messages("a", 10))
	got := readN(t, r, 10, 10)
	ack(t, r, got[:4])
	ack(t, r, got[6:7]) // acked, but after a gap: not under the floor
	floor := r.Offset(&got[3])
	if err := r.Close(); err != nil { // hands back the rest; the cleanup closes it again
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the ack floor to reach the fourth message", func() bool {
		cons, err := c.js.Consumer(testCtx(t), sp.Name, sp.Name)
		return err == nil && int64(cons.CachedInfo().AckFloor.Stream) == floor
	})

	r = newReader(t, c, sp.Name, 200*time.Millisecond)
	if o := r.StartOffset(); o != floor {
		t.Fatalf("StartOffset = %d, want the ack floor %d", o, floor)
	}
	rest := readN(t, r, 5, 5)
	if want := ids(slices.Concat(got[4:6], got[7:])); !slices.Equal(ids(rest), want) {
		t.Fatalf("read %v, want %v", ids(rest), want)
	}
	for i := range rest {
		if o := r.Offset(&rest[i]); o <= floor {
			t.Errorf("message %s at offset %d, at or before the start %d", rest[i].ID, o, floor)
		}
	}
	ack(t, r, rest)
}

// toRead wraps msgs as read messages, for ids.
func toRead(msgs []isb.Message) []isb.ReadMessage {
	out := make([]isb.ReadMessage, len(msgs))
	for i := range msgs {
		out[i].Message = msgs[i]
	}
	return out
}
