package vertex

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// tracker wraps a reader of a vertex with watermarks to know how far the
// vertex has got: which messages it has read and not yet finished (acked,
// or handed back).
//
// For a reader of a buffer partition that is its frontier, the offset up
// to which every message read is finished: the tracker counts the messages
// read and not finished at each offset, by their offsets, and leaves their
// handles alone. A source's messages have no offsets: each one read gets a
// handle of the tracker's own, which wraps the reader's (the reader gets its
// own back), so that its batch is known when it is finished; the batches,
// once finished in the order they were read, move the source's watermark.
type tracker struct {
	r    isb.Reader
	off  isb.OffsetReader  // nil for a source
	src  *watermark.Source // nil for a buffer partition
	part int32             // the source's partition, unless parts tells
	// parts tells the partition of a source's message, when it has them.
	parts isb.PartitionReader
	// floorer, for a partition the vertex's replicas share, knows what they
	// have all acked; floor is what it said last.
	floorer isb.AckFloorer
	floor   atomic.Int64

	mu sync.Mutex
	// A buffer partition's: the offsets read and not finished, increasing,
	// with how many messages at each (0: finished, not yet dropped); the
	// largest offset read; the offsets handed back, to be read again.
	open   []openOffset
	hint   int
	done   int64
	nacked map[int64]int
	// A source's: its batches not finished, in the order read.
	batches []*readBatch
	scratch []isb.ReadMessage
	free    []*readBatch
}

// openOffset is an offset of a buffer partition with messages read and not
// finished.
type openOffset struct {
	off int64
	n   int
}

// readBatch is what one Read of a source returned.
type readBatch struct {
	left  int        // messages not finished
	marks []partMark // the oldest event time of each partition read
	slots []slot
}

// partMark is the oldest event time a batch read from a partition.
type partMark struct {
	part  int32
	minET time.Time
}

// mark notes event time et of partition part.
func (b *readBatch) mark(part int32, et time.Time) {
	if et.IsZero() {
		return
	}
	for i := range b.marks {
		if m := &b.marks[i]; m.part == part {
			if et.Before(m.minET) {
				m.minET = et
			}
			return
		}
	}
	b.marks = append(b.marks, partMark{part, et})
}

// slot is a source message's handle while the tracker holds it.
type slot struct {
	handle any
	b      *readBatch
}

func newTracker(r isb.Reader, src *watermark.Source, part int32) *tracker {
	t := &tracker{r: r, src: src, part: part}
	if p, ok := r.(isb.PartitionReader); ok && src != nil {
		t.parts = p
		p.OnPartitionsGone(func(parts []int32) {
			for _, n := range parts {
				src.Remove(n)
			}
		})
	}
	if o, ok := r.(isb.OffsetReader); ok && src == nil {
		t.off = o
		t.done = o.StartOffset()
		if f, ok := r.(isb.AckFloorer); ok {
			t.floorer = f
			t.floor.Store(t.done)
		}
	}
	return t
}

// reader returns t as a reader with the optional methods of the reader it
// wraps.
func (t *tracker) reader() isb.Reader {
	_, nack := t.r.(isb.Nacker)
	_, opts := t.r.(isb.OptionsNacker)
	switch {
	case nack && opts:
		return trackedNackers{trackedNacker{trackedReader{t}}}
	case nack:
		return trackedNacker{trackedReader{t}}
	case opts:
		return trackedOptionsNacker{trackedReader{t}}
	}
	return trackedReader{t}
}

func (t *tracker) read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	n, err := t.r.Read(ctx, buf)
	if n == 0 {
		return n, err
	}
	if t.off != nil {
		t.readOffsets(buf[:n])
	} else {
		t.readBatch(buf[:n])
	}
	return n, err
}

// readOffsets counts the messages read at their offsets.
func (t *tracker) readOffsets(msgs []isb.ReadMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range msgs {
		o := t.off.Offset(&msgs[i])
		t.done = max(t.done, o)
		if k := len(t.open); k > 0 && t.open[k-1].off == o {
			t.open[k-1].n++
		} else if k == 0 || t.open[k-1].off < o {
			t.open = append(t.open, openOffset{o, 1})
		} else { // read again after a nack: in its place
			j, found := slices.BinarySearchFunc(t.open, o, func(e openOffset, o int64) int { return cmp.Compare(e.off, o) })
			if found {
				t.open[j].n++
			} else {
				t.open = slices.Insert(t.open, j, openOffset{o, 1})
			}
		}
		if t.nacked != nil && t.nacked[o] > 0 {
			if t.nacked[o]--; t.nacked[o] == 0 {
				delete(t.nacked, o)
			}
		}
	}
}

// readBatch gives a source's messages handles of the tracker's own.
func (t *tracker) readBatch(msgs []isb.ReadMessage) {
	t.mu.Lock()
	var b *readBatch
	if k := len(t.free); k > 0 {
		b, t.free = t.free[k-1], t.free[:k-1]
	} else {
		b = &readBatch{}
	}
	t.mu.Unlock()
	if cap(b.slots) < len(msgs) {
		b.slots = make([]slot, len(msgs))
	}
	b.slots, b.left, b.marks = b.slots[:len(msgs)], len(msgs), b.marks[:0]
	for i := range msgs {
		m := &msgs[i]
		part := t.part
		if t.parts != nil {
			part = t.parts.Partition(m)
		}
		b.mark(part, m.EventTime)
		b.slots[i] = slot{handle: m.Handle, b: b}
		m.Handle = &b.slots[i]
	}
	t.mu.Lock()
	t.batches = append(t.batches, b)
	t.mu.Unlock()
}

// unwrap returns a source's msgs with the reader's own handles, in a slice
// of t's (callers make one Ack or Nack call at a time; release gives it
// back).
func (t *tracker) unwrap(msgs []isb.ReadMessage) []isb.ReadMessage {
	if t.off != nil {
		return msgs
	}
	t.mu.Lock()
	out := t.scratch
	t.scratch = nil
	t.mu.Unlock()
	out = append(out[:0], msgs...)
	for i := range out {
		if s, ok := out[i].Handle.(*slot); ok {
			out[i].Handle = s.handle
		}
	}
	return out
}

// finish counts msgs finished, before the reader hears of them; nacked says
// they are handed back, to be read again: a buffer partition's frontier
// stays before them until then.
func (t *tracker) finish(msgs []isb.ReadMessage, nacked bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.off == nil {
		t.finishBatches(msgs)
		return
	}
	for i := range msgs {
		o := t.off.Offset(&msgs[i])
		j := t.find(o)
		if j < 0 {
			continue
		}
		t.open[j].n--
		t.hint = j
		if nacked {
			if t.nacked == nil {
				t.nacked = map[int64]int{}
			}
			t.nacked[o]++
		}
	}
	k := 0
	for k < len(t.open) && t.open[k].n <= 0 {
		k++
	}
	if k > 0 {
		t.open = append(t.open[:0], t.open[k:]...)
		t.hint = 0
	}
}

// find returns the index of offset o in t.open, -1 when it is not there.
func (t *tracker) find(o int64) int {
	for _, j := range [2]int{t.hint, t.hint + 1} {
		if j < len(t.open) && t.open[j].off == o {
			return j
		}
	}
	j, found := slices.BinarySearchFunc(t.open, o, func(e openOffset, o int64) int { return cmp.Compare(e.off, o) })
	if !found {
		return -1
	}
	return j
}

// finishBatches counts a source's msgs finished, and moves its watermark by
// the batches finished in the order they were read.
func (t *tracker) finishBatches(msgs []isb.ReadMessage) {
	for i := range msgs {
		if s, ok := msgs[i].Handle.(*slot); ok && s.b.left > 0 {
			s.b.left--
		}
	}
	i := 0
	for ; i < len(t.batches) && t.batches[i].left == 0; i++ {
		b := t.batches[i]
		if t.src != nil {
			for _, m := range b.marks {
				t.src.Observe(m.part, m.minET)
			}
		}
		if len(t.free) < 4 {
			t.free = append(t.free, b) // its messages are all acked or handed back
		}
	}
	t.batches = append(t.batches[:0], t.batches[i:]...)
}

// release gives back what unwrap returned.
func (t *tracker) release(own []isb.ReadMessage) {
	if t.off != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(own)
	t.scratch = own[:0]
}

// refreshFloor asks the buffer what every reader of the partition has
// acked.
func (t *tracker) refreshFloor(ctx context.Context) error {
	if t.floorer == nil {
		return nil
	}
	f, err := t.floorer.AckFloor(ctx)
	if err != nil {
		return err
	}
	t.floor.Store(f)
	return nil
}

// frontier returns the offset up to which every message of the partition
// is finished: every message this reader read and, for a partition the
// vertex's replicas share, every message they have all acked (which leaves
// out messages a replica that died had read, until they come again).
func (t *tracker) frontier() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.done
	if len(t.open) > 0 {
		f = t.open[0].off - 1
	}
	if t.floorer != nil {
		f = min(f, t.floor.Load())
	}
	for o := range t.nacked {
		f = min(f, o-1)
	}
	return f
}

func (t *tracker) ack(ctx context.Context, msgs []isb.ReadMessage) error {
	own := t.unwrap(msgs)
	// A message whose ack fails is finished too: it is written, and what
	// comes again of it is a duplicate.
	t.finish(msgs, false)
	err := t.r.Ack(ctx, own)
	t.release(own)
	return err
}

func (t *tracker) nack(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	own := t.unwrap(msgs)
	t.finish(msgs, true)
	err := t.r.(isb.Nacker).Nack(ctx, own, delay)
	t.release(own)
	return err
}

func (t *tracker) nackOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	own := t.unwrap(msgs)
	// With MaxDeliveries the reader may drop them, and they would hold the
	// frontier for ever: they count as finished.
	t.finish(msgs, opts.MaxDeliveries == 0)
	err := t.r.(isb.OptionsNacker).NackOptions(ctx, own, opts)
	t.release(own)
	return err
}

// trackedReader is a tracker as an isb.Reader; the types that embed it add
// the optional methods of the reader it wraps.
type trackedReader struct{ t *tracker }

func (r trackedReader) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	return r.t.read(ctx, buf)
}
func (r trackedReader) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	return r.t.ack(ctx, msgs)
}

type trackedNacker struct{ trackedReader }

func (r trackedNacker) Nack(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	return r.t.nack(ctx, msgs, delay)
}

type trackedOptionsNacker struct{ trackedReader }

func (r trackedOptionsNacker) NackOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	return r.t.nackOptions(ctx, msgs, opts)
}

type trackedNackers struct{ trackedNacker }

func (r trackedNackers) NackOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	return r.t.nackOptions(ctx, msgs, opts)
}
