package vertex

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// tracker wraps a reader of a vertex with watermarks to know how far the
// vertex has got: which messages it has read and not yet finished (acked,
// or handed back). For a reader of a buffer partition that is its frontier,
// the offset up to which every message read is finished; a source's
// batches, once finished in the order they were read, move its watermark.
//
// Each message read gets a handle of the tracker's own, which wraps the
// reader's; the tracker hands the reader its own handles back.
type tracker struct {
	r    isb.Reader
	off  isb.OffsetReader  // nil for a source
	src  *watermark.Source // nil for a buffer partition
	part int32             // the source's partition
	// floorer, for a partition the vertex's replicas share, knows what they
	// have all acked; floor is what it said last.
	floorer isb.AckFloorer
	floor   atomic.Int64

	mu      sync.Mutex
	batches []*readBatch // not finished, in the order read
	done    int64        // the largest offset of a batch finished in order
	naked   map[int64]int
	scratch []isb.ReadMessage
}

// readBatch is what one Read returned.
type readBatch struct {
	left           int // messages not finished
	minOff, maxOff int64
	minET          time.Time
	slots          []slot
}

// slot is a message's handle while the tracker holds it.
type slot struct {
	handle any
	b      *readBatch
	off    int64
}

func newTracker(r isb.Reader, src *watermark.Source, part int32) *tracker {
	t := &tracker{r: r, src: src, part: part}
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
	_, nak := t.r.(isb.Naker)
	_, opts := t.r.(isb.OptionsNaker)
	switch {
	case nak && opts:
		return trackedNakers{t}
	case nak:
		return trackedNaker{t}
	case opts:
		return trackedOptionsNaker{t}
	}
	return trackedReader{t}
}

func (t *tracker) read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	n, err := t.r.Read(ctx, buf)
	if n == 0 {
		return n, err
	}
	b := &readBatch{left: n, slots: make([]slot, n)}
	for i := range buf[:n] {
		m := &buf[i]
		var o int64
		if t.off != nil {
			o = t.off.Offset(m)
			if i == 0 || o < b.minOff {
				b.minOff = o
			}
			b.maxOff = max(b.maxOff, o)
		}
		if et := m.EventTime; !et.IsZero() && (b.minET.IsZero() || et.Before(b.minET)) {
			b.minET = et
		}
		b.slots[i] = slot{handle: m.Handle, b: b, off: o}
		m.Handle = &b.slots[i]
	}
	t.mu.Lock()
	t.batches = append(t.batches, b)
	if t.naked != nil {
		for i := range b.slots {
			if o := b.slots[i].off; t.naked[o] > 0 {
				if t.naked[o]--; t.naked[o] == 0 {
					delete(t.naked, o)
				}
			}
		}
	}
	t.mu.Unlock()
	return n, err
}

// unwrap returns msgs with the reader's own handles, in a slice of t's
// (callers make one Ack or Nak call at a time; finish gives it back).
func (t *tracker) unwrap(msgs []isb.ReadMessage) []isb.ReadMessage {
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

// finish counts msgs finished; naked says they are handed back, to be
// read again: a buffer partition's frontier stays before them until then.
func (t *tracker) finish(msgs, own []isb.ReadMessage, naked bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if naked && t.off != nil {
		if t.naked == nil {
			t.naked = map[int64]int{}
		}
		for i := range msgs {
			if s, ok := msgs[i].Handle.(*slot); ok {
				t.naked[s.off]++
			}
		}
	}
	clear(own)
	t.scratch = own[:0]
	for i := range msgs {
		if s, ok := msgs[i].Handle.(*slot); ok && s.b.left > 0 {
			s.b.left--
		}
	}
	i := 0
	for ; i < len(t.batches) && t.batches[i].left == 0; i++ {
		b := t.batches[i]
		t.done = max(t.done, b.maxOff)
		if t.src != nil && !b.minET.IsZero() {
			t.src.Observe(t.part, b.minET)
		}
	}
	t.batches = append(t.batches[:0], t.batches[i:]...)
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
	if t.floorer != nil {
		f = min(f, t.floor.Load())
	}
	for _, b := range t.batches {
		f = min(f, b.minOff-1)
	}
	for o := range t.naked {
		f = min(f, o-1)
	}
	return f
}

func (t *tracker) ack(ctx context.Context, msgs []isb.ReadMessage) error {
	own := t.unwrap(msgs)
	err := t.r.Ack(ctx, own)
	// A message whose ack failed is finished too: it is written, and what
	// comes again of it is a duplicate.
	t.finish(msgs, own, false)
	return err
}

func (t *tracker) nak(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	own := t.unwrap(msgs)
	err := t.r.(isb.Naker).Nak(ctx, own, delay)
	t.finish(msgs, own, true)
	return err
}

func (t *tracker) nakOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	own := t.unwrap(msgs)
	err := t.r.(isb.OptionsNaker).NakOptions(ctx, own, opts)
	t.finish(msgs, own, true)
	return err
}

type trackedReader struct{ t *tracker }

func (r trackedReader) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	return r.t.read(ctx, buf)
}
func (r trackedReader) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	return r.t.ack(ctx, msgs)
}

type trackedNaker struct{ t *tracker }

func (r trackedNaker) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	return r.t.read(ctx, buf)
}
func (r trackedNaker) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	return r.t.ack(ctx, msgs)
}
func (r trackedNaker) Nak(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	return r.t.nak(ctx, msgs, delay)
}

type trackedOptionsNaker struct{ t *tracker }

func (r trackedOptionsNaker) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	return r.t.read(ctx, buf)
}
func (r trackedOptionsNaker) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	return r.t.ack(ctx, msgs)
}
func (r trackedOptionsNaker) NakOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	return r.t.nakOptions(ctx, msgs, opts)
}

type trackedNakers struct{ t *tracker }

func (r trackedNakers) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	return r.t.read(ctx, buf)
}
func (r trackedNakers) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	return r.t.ack(ctx, msgs)
}
func (r trackedNakers) Nak(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	return r.t.nak(ctx, msgs, delay)
}
func (r trackedNakers) NakOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	return r.t.nakOptions(ctx, msgs, opts)
}
