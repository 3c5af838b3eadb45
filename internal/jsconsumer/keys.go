package jsconsumer

// Keys holds the keys of many decoded messages in one array, so that the
// messages of a pull cost one allocation for all of their keys. Keys handed
// out stay valid when it grows: it then moves on to a new array. A Consumer
// gives each pull a Keys of its own, sized for the messages the pull may
// bring; the zero value is ready to use, and grows as needed.
type Keys struct {
	keys []string
	hint int // keys to make room for at the first one
}

// NewKeys returns a Keys with room for n keys before it first grows.
func NewKeys(n int) *Keys { return &Keys{hint: n} }

// Len returns the number of keys added.
func (a *Keys) Len() int { return len(a.keys) }

// Add adds k.
func (a *Keys) Add(k string) {
	if a.keys == nil {
		a.keys = make([]string, 0, max(a.hint, 1))
	}
	a.keys = append(a.keys, k)
}

// Since returns the keys added from index first on, or nil when there are
// none. Its capacity ends with it: appending to it never touches the keys of
// another message.
func (a *Keys) Since(first int) []string {
	if len(a.keys) == first {
		return nil
	}
	return a.keys[first:len(a.keys):len(a.keys)]
}
