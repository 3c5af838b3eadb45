package window

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Book keeps the windows open in one reader of a reduce vertex and the key
// sets each has seen, and closes them as the watermark advances. The zero
// value is not usable; make one with [NewBook].
type Book struct {
	strategy Strategy
	lateness time.Duration
	wm       time.Time // the highest watermark given to Advance
	hasWM    bool
	open     map[Window]map[string][]string // window → key set's id → keys
	scratch  []Window
}

// Closed is a window that a watermark closed, with the key sets it saw,
// sorted.
type Closed struct {
	Window Window
	Keys   [][]string
}

// NewBook returns a Book for windows of strategy s that stay open for
// allowedLateness past their end (negative counts as 0).
func NewBook(s Strategy, allowedLateness time.Duration) *Book {
	return &Book{strategy: s, lateness: max(allowedLateness, 0), open: map[Window]map[string][]string{}}
}

// Add notes a message of keys with event time t in each of its windows that
// the watermark has not closed, and returns those windows (valid until the
// next call). late reports that the watermark had closed all of them: the
// message belongs to no window and is to be dropped.
func (b *Book) Add(keys []string, t time.Time) (windows []Window, late bool) {
	b.scratch = b.strategy.Assign(b.scratch[:0], t)
	n := 0
	for _, w := range b.scratch {
		if b.closes(w) {
			continue
		}
		sets := b.open[w]
		if sets == nil {
			sets = map[string][]string{}
			b.open[w] = sets
		}
		id := KeysID(keys)
		if _, ok := sets[id]; !ok {
			sets[id] = slices.Clone(keys)
		}
		b.scratch[n] = w
		n++
	}
	return b.scratch[:n], n == 0 && len(b.scratch) > 0
}

// Advance moves the watermark to wm, unless it is behind the last one (a
// watermark never goes back), and returns the windows it closes, earliest
// end first (then earliest start), each with its key sets.
func (b *Book) Advance(wm time.Time) []Closed {
	if b.hasWM && !wm.After(b.wm) {
		return nil
	}
	b.wm, b.hasWM = wm, true
	var closed []Closed
	for w, sets := range b.open {
		if !b.closes(w) {
			continue
		}
		c := Closed{Window: w}
		for _, keys := range sets {
			c.Keys = append(c.Keys, keys)
		}
		slices.SortFunc(c.Keys, func(x, y []string) int { return slices.Compare(x, y) })
		closed = append(closed, c)
		delete(b.open, w)
	}
	slices.SortFunc(closed, func(x, y Closed) int {
		return cmp.Or(x.Window.End.Compare(y.Window.End), x.Window.Start.Compare(y.Window.Start))
	})
	return closed
}

// Watermark is the last watermark given to Advance; ok is false before the
// first.
func (b *Book) Watermark() (wm time.Time, ok bool) { return b.wm, b.hasWM }

// Open is the number of windows open.
func (b *Book) Open() int { return len(b.open) }

// closes reports whether the watermark has closed w: it has reached w's end
// plus the allowed lateness.
func (b *Book) closes(w Window) bool {
	return b.hasWM && !b.wm.Before(w.End.Add(b.lateness))
}

// KeysID is a key set's identity, for a map key: each key's length and the
// key, so that no two sets share one.
func KeysID(keys []string) string {
	var sb strings.Builder
	for _, k := range keys {
		sb.WriteString(strconv.Itoa(len(k)))
		sb.WriteByte(':')
		sb.WriteString(k)
	}
	return sb.String()
}
