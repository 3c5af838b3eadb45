// Package metadata holds UserMetadata, the user metadata of a message, which
// the SDK packages re-export (mapper.UserMetadata, sinker.UserMetadata, ...),
// and its conversions to and from the protocol's common.Metadata.
package metadata

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// UserMetadata is the metadata that user code attaches to a message: named
// groups, each a set of keys with a value of bytes (a group may hold the
// headers meant for one sink, say). It travels with the message from vertex
// to vertex: a function reads the input's with Datum.UserMetadata and sets
// the output's with Message.WithUserMetadata. The runtime does not carry it
// over by itself: an output message has the user metadata it is given, or
// none.
//
// The zero value is empty and ready to use; so is NewUserMetadata's. A nil
// *UserMetadata reads as empty, but cannot be changed. Groups and Keys list
// names in sorted order. A UserMetadata is not safe for concurrent change.
type UserMetadata struct {
	groups map[string]map[string][]byte
}

// NewUserMetadata returns an empty UserMetadata.
func NewUserMetadata() *UserMetadata { return &UserMetadata{} }

// Groups lists the names of the groups, sorted; empty groups included.
func (m *UserMetadata) Groups() []string {
	if m == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m.groups))
}

// HasGroup reports whether group exists (perhaps with no keys).
func (m *UserMetadata) HasGroup(group string) bool {
	if m == nil {
		return false
	}
	_, ok := m.groups[group]
	return ok
}

// Keys lists the keys of group, sorted; none if there is no such group.
func (m *UserMetadata) Keys(group string) []string {
	if m == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m.groups[group]))
}

// Value is the value of key in group; nil if there is none. Do not modify
// the bytes it returns: set a new value with AddKV.
func (m *UserMetadata) Value(group, key string) []byte {
	v, _ := m.Lookup(group, key)
	return v
}

// Lookup is the value of key in group, and whether it is set (a key may be
// set to an empty value).
func (m *UserMetadata) Lookup(group, key string) ([]byte, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m.groups[group][key]
	return v, ok
}

// Len is the number of groups.
func (m *UserMetadata) Len() int {
	if m == nil {
		return 0
	}
	return len(m.groups)
}

// CreateGroup adds group, with no keys, unless it exists.
func (m *UserMetadata) CreateGroup(group string) {
	m.group(group)
}

// AddKV sets key in group to value (which it does not copy), creating the
// group if need be and replacing any value the key had.
func (m *UserMetadata) AddKV(group, key string, value []byte) {
	m.group(group)[key] = value
}

// RemoveKey removes key from group; the group stays, perhaps empty. It does
// nothing if there is no such key.
func (m *UserMetadata) RemoveKey(group, key string) {
	if m == nil {
		return
	}
	delete(m.groups[group], key)
}

// RemoveGroup removes group and its keys. It does nothing if there is no
// such group.
func (m *UserMetadata) RemoveGroup(group string) {
	if m == nil {
		return
	}
	delete(m.groups, group)
}

// Clone returns a copy of m whose groups can be changed without changing
// m's; the values' bytes are shared. The copy of nil is an empty
// UserMetadata.
func (m *UserMetadata) Clone() *UserMetadata {
	if m == nil || len(m.groups) == 0 {
		return &UserMetadata{}
	}
	out := &UserMetadata{groups: make(map[string]map[string][]byte, len(m.groups))}
	for g, kv := range m.groups {
		out.groups[g] = maps.Clone(kv)
		if out.groups[g] == nil {
			out.groups[g] = map[string][]byte{}
		}
	}
	return out
}

// String renders m for logs and tests, groups and keys sorted:
// `g1{a="x" b="y"} g2{}`.
func (m *UserMetadata) String() string {
	var b strings.Builder
	for i, g := range m.Groups() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(g)
		b.WriteByte('{')
		for j, k := range m.Keys(g) {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(strconv.Quote(string(m.groups[g][k])))
		}
		b.WriteByte('}')
	}
	return b.String()
}

// group returns the keys of group, creating it if need be.
func (m *UserMetadata) group(group string) map[string][]byte {
	if m.groups == nil {
		m.groups = make(map[string]map[string][]byte)
	}
	kv := m.groups[group]
	if kv == nil {
		kv = make(map[string][]byte)
		m.groups[group] = kv
	}
	return kv
}
