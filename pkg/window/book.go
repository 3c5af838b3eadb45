package window

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Book keeps the windows open in one reader of a reduce vertex, and in each
// the items (messages) of each key set, and closes them as the watermark
// advances. The zero value is not usable; make one with [NewBook].
type Book[T any] struct {
	strategy Strategy
	lateness time.Duration
	wm       time.Time // the highest watermark given to Advance
	hasWM    bool
	open     map[Window]map[string]*Group[T] // window → key set's id → its items
	scratch  []Window
}

// Group is the items of one key set in one window, in the order added.
type Group[T any] struct {
	Keys  []string
	Items []T
}

// Closed is a window that a watermark closed, with its groups sorted by
// their keys.
type Closed[T any] struct {
	Window Window
	Groups []*Group[T]
}

// NewBook returns a Book for windows of strategy s that stay open for
// allowedLateness past their end (negative counts as 0).
func NewBook[T any](s Strategy, allowedLateness time.Duration) *Book[T] {
	return &Book[T]{strategy: s, lateness: max(allowedLateness, 0), open: map[Window]map[string]*Group[T]{}}
}

// Add adds item, of keys and event time t, to each of its windows that the
// watermark has not closed, and returns those windows (valid until the next
// call). late reports that the watermark had closed all of them: the item
// belongs to no window and is to be dropped.
func (b *Book[T]) Add(keys []string, t time.Time, item T) (windows []Window, late bool) {
	b.scratch = b.strategy.Assign(b.scratch[:0], t)
	n := 0
	for _, w := range b.scratch {
		if b.closes(w) {
			continue
		}
		groups := b.open[w]
		if groups == nil {
			groups = map[string]*Group[T]{}
			b.open[w] = groups
		}
		id := KeysID(keys)
		g := groups[id]
		if g == nil {
			g = &Group[T]{Keys: slices.Clone(keys)}
			groups[id] = g
		}
		g.Items = append(g.Items, item)
		b.scratch[n] = w
		n++
	}
	return b.scratch[:n], n == 0 && len(b.scratch) > 0
}

// Advance moves the watermark to wm, unless it is behind the last one (a
// watermark never goes back), and returns the windows it closes, earliest
// end first (then earliest start), each with its groups.
func (b *Book[T]) Advance(wm time.Time) []Closed[T] {
	if b.hasWM && !wm.After(b.wm) {
		return nil
	}
	b.wm, b.hasWM = wm, true
	var closed []Closed[T]
	for w, groups := range b.open {
		if !b.closes(w) {
			continue
		}
		c := Closed[T]{Window: w}
		for _, g := range groups {
			c.Groups = append(c.Groups, g)
		}
		slices.SortFunc(c.Groups, func(x, y *Group[T]) int { return slices.Compare(x.Keys, y.Keys) })
		closed = append(closed, c)
		delete(b.open, w)
	}
	slices.SortFunc(closed, func(x, y Closed[T]) int {
		return cmp.Or(x.Window.End.Compare(y.Window.End), x.Window.Start.Compare(y.Window.Start))
	})
	return closed
}

// Watermark is the last watermark given to Advance; ok is false before the
// first.
func (b *Book[T]) Watermark() (wm time.Time, ok bool) { return b.wm, b.hasWM }

// Open is the number of windows open.
func (b *Book[T]) Open() int { return len(b.open) }

// closes reports whether the watermark has closed w: it has reached w's end
// plus the allowed lateness.
func (b *Book[T]) closes(w Window) bool {
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
