package window

import (
	"slices"
	"time"
)

// sessions are the open sessions of a Book of session windows, per key set,
// each key set's in the order of their starts; no two of a key set overlap
// or touch.
type sessions[T any] struct {
	timeout time.Duration
	byKeys  map[string][]*session[T]
	n       int
}

// session is one open session of a key set and its items.
type session[T any] struct {
	w Window
	g *Group[T]
}

func newSessions[T any](timeout time.Duration) *sessions[T] {
	return &sessions[T]{timeout: timeout, byKeys: map[string][]*session[T]{}}
}

// joins reports whether [t, t+timeout) falls in or touches w.
func joins(w Window, t time.Time, timeout time.Duration) bool {
	return !t.After(w.End) && !t.Add(timeout).Before(w.Start)
}

// add puts item, of keys and event time t, in the session of its key set
// that [t, t+timeout) falls in or touches, grown to cover it, merging the
// sessions it comes to touch; or in a new session. behind says whether an
// event time is behind the watermark less the allowed lateness. It returns
// what it did to the sessions, or late when the item joins no open session
// and is behind.
func (s *sessions[T]) add(keys []string, t time.Time, item T, behind func(time.Time) bool) (Change, bool) {
	id := KeysID(keys)
	list := s.byKeys[id]
	w := Window{Start: t, End: t.Add(s.timeout)}
	first, last := -1, -1
	for i, ss := range list {
		if joins(ss.w, t, s.timeout) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		if behind(t) {
			return Change{}, true
		}
		ss := &session[T]{w: w, g: &Group[T]{Keys: slices.Clone(keys), Items: []T{item}}}
		i, _ := slices.BinarySearchFunc(list, t, func(x *session[T], t time.Time) int { return x.w.Start.Compare(t) })
		s.byKeys[id] = slices.Insert(list, i, ss)
		s.n++
		return Change{Op: Opened, Window: w}, false
	}
	into := list[first]
	c := Change{Op: Joined}
	if last > first {
		c.Op = Merged
		for _, ss := range list[first : last+1] {
			c.Old = append(c.Old, ss.w)
		}
	} else {
		c.Old = []Window{into.w}
	}
	for _, ss := range list[first+1 : last+1] { // merged into the first
		into.w = into.w.Union(ss.w)
		into.g.Items = append(into.g.Items, ss.g.Items...)
	}
	grown := into.w.Union(w)
	if c.Op == Joined && grown != into.w {
		c.Op = Expanded
	}
	into.w = grown
	into.g.Items = append(into.g.Items, item)
	s.byKeys[id] = slices.Delete(list, first+1, last+1)
	s.n -= last - first
	c.Window = into.w
	if c.Op == Joined {
		c.Old = nil
	}
	return c, false
}

// advance removes the sessions that closes says are closed and appends
// each to closed, with its one group.
func (s *sessions[T]) advance(closed []Closed[T], closes func(Window) bool) []Closed[T] {
	for id, list := range s.byKeys {
		n := 0
		for _, ss := range list {
			if closes(ss.w) {
				closed = append(closed, Closed[T]{Window: ss.w, Groups: []*Group[T]{ss.g}})
				continue
			}
			list[n] = ss
			n++
		}
		clear(list[n:])
		s.n -= len(list) - n
		if n == 0 {
			delete(s.byKeys, id)
		} else {
			s.byKeys[id] = list[:n]
		}
	}
	return closed
}

// each calls f with each open session and its group, the key sets in no
// order, each key set's sessions in the order of their starts.
func (s *sessions[T]) each(f func(Window, *Group[T])) {
	for _, list := range s.byKeys {
		for _, ss := range list {
			f(ss.w, ss.g)
		}
	}
}

// oldest is the earliest start of an open session; ok is false when none
// is open.
func (s *sessions[T]) oldest() (start time.Time, ok bool) {
	for _, list := range s.byKeys {
		if w := list[0].w; !ok || w.Start.Before(start) {
			start, ok = w.Start, true
		}
	}
	return start, ok
}
