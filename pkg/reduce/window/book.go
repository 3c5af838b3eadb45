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
	sessions *sessions[T]                    // of session windows, instead of open
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
	b := &Book[T]{strategy: s, lateness: max(allowedLateness, 0), open: map[Window]map[string]*Group[T]{}}
	if s.timeout > 0 {
		b.sessions = newSessions[T](s.timeout)
	}
	return b
}

// Add adds item, of keys and event time t, to each of its windows that the
// watermark has not closed, and returns those windows (valid until the next
// call). late reports that the watermark had closed all of them: the item
// belongs to no window and is to be dropped.
//
// With session windows, the one window returned is the item's session as
// it is after the item: opened, grown or merged. An item is late when it
// joins no open session of its key set and its event time is behind the
// watermark less the allowed lateness.
func (b *Book[T]) Add(keys []string, t time.Time, item T) (windows []Window, late bool) {
	if b.sessions != nil {
		c, late := b.sessions.add(keys, t, item, b.behind)
		if late {
			return nil, true
		}
		return append(b.scratch[:0], c.Window), false
	}
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

// AddSession adds item, of keys and event time t, as Add does to a Book of
// session windows, and returns what it did to the sessions of its key set:
// opened one, joined one, expanded one or merged several. late reports
// that the item joins no open session and is behind the watermark less
// the allowed lateness. It panics on a Book of aligned windows.
func (b *Book[T]) AddSession(keys []string, t time.Time, item T) (c Change, late bool) {
	if b.sessions == nil {
		panic("window: AddSession on a Book of aligned windows")
	}
	return b.sessions.add(keys, t, item, b.behind)
}

// EachSession calls f with each open session of a Book of session windows
// and its group, the items in the order the session holds them; the key
// sets come in no order, each one's sessions in the order of their starts.
// f must not change the Book. A Book of aligned windows has no sessions.
func (b *Book[T]) EachSession(f func(w Window, g *Group[T])) {
	if b.sessions != nil {
		b.sessions.each(f)
	}
}

// EachWindow calls f with each open window of a Book of aligned windows and
// each of its groups, the items in the order added; the windows and key
// sets come in no order. f must not change the Book. A Book of session
// windows calls f with none (see [Book.EachSession]).
func (b *Book[T]) EachWindow(f func(w Window, g *Group[T])) {
	for w, groups := range b.open {
		for _, g := range groups {
			f(w, g)
		}
	}
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
	if b.sessions != nil {
		closed = b.sessions.advance(closed, b.closes)
	}
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
		return cmp.Or(x.Window.End.Compare(y.Window.End), x.Window.Start.Compare(y.Window.Start),
			slices.Compare(x.Groups[0].Keys, y.Groups[0].Keys))
	})
	return closed
}

// Watermark is the last watermark given to Advance; ok is false before the
// first.
func (b *Book[T]) Watermark() (wm time.Time, ok bool) { return b.wm, b.hasWM }

// Open is the number of windows open; with session windows, the number of
// sessions of all key sets.
func (b *Book[T]) Open() int {
	if b.sessions != nil {
		return b.sessions.n
	}
	return len(b.open)
}

// Oldest is the earliest start of an open window; ok is false when none
// is open.
func (b *Book[T]) Oldest() (start time.Time, ok bool) {
	if b.sessions != nil {
		return b.sessions.oldest()
	}
	for w := range b.open {
		if !ok || w.Start.Before(start) {
			start, ok = w.Start, true
		}
	}
	return start, ok
}

// closes reports whether the watermark has closed w: it has reached w's end
// plus the allowed lateness.
func (b *Book[T]) closes(w Window) bool {
	return b.hasWM && !b.wm.Before(w.End.Add(b.lateness))
}

// behind reports whether event time t is behind the watermark less the
// allowed lateness: a message there opens no session.
func (b *Book[T]) behind(t time.Time) bool {
	return b.hasWM && t.Add(b.lateness).Before(b.wm)
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
