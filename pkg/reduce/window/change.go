package window

import "strconv"

// Op is what adding an item did to the sessions of its key set. The zero
// value is Opened.
type Op uint8

const (
	// Opened is an item that opened a session of its own.
	Opened Op = iota
	// Joined is an item that fell in an open session, which did not change.
	Joined
	// Expanded is an item that grew an open session: Change.Old[0] became
	// Change.Window.
	Expanded
	// Merged is an item that came to touch several open sessions, which
	// merged into one: Change.Old became Change.Window, which covers them
	// all and the item.
	Merged
)

var opNames = [...]string{Opened: "opened", Joined: "joined", Expanded: "expanded", Merged: "merged"}

// String returns the op's name: opened, joined, expanded or merged.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Change is what one [Book.AddSession] did to the sessions of the item's
// key set.
type Change struct {
	Op Op
	// Window is the item's session after the item.
	Window Window
	// Old is, for Expanded, the session before the item; for Merged, the
	// sessions merged, in the order of their starts; nil otherwise.
	Old []Window
}
