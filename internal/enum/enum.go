// Package enum is the text form of sluice's typed enumerations: a uint8 type
// whose values index a list of their names, as written in a vertex's YAML.
package enum

import (
	"fmt"
	"strings"
)

// Name returns the name of v, or typ(v) for a value without one.
func Name[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}

// Marshal returns the name of v, or an error for a value without one.
func Marshal[T ~uint8](names []string, v T, what string) ([]byte, error) {
	if int(v) >= len(names) {
		return nil, fmt.Errorf("unknown %s %d", what, uint8(v))
	}
	return []byte(names[v]), nil
}

// Parse sets *v to the value named text. Any other text, "" included, is an
// error naming what is parsed and listing the names: unknown mode "x" (want
// relaxed, scheduled or goBackN).
func Parse[T ~uint8](v *T, names []string, text []byte, what string) error {
	for i, name := range names {
		if name != "" && name == string(text) {
			*v = T(i)
			return nil
		}
	}
	return fmt.Errorf("unknown %s %q (want %s)", what, text, want(names))
}

// want lists the names: "a, b or c".
func want(names []string) string {
	var named []string
	for _, n := range names {
		if n != "" {
			named = append(named, n)
		}
	}
	if len(named) < 2 {
		return strings.Join(named, "")
	}
	return strings.Join(named[:len(named)-1], ", ") + " or " + named[len(named)-1]
}
