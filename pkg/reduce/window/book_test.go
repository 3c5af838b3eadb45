package window

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// closedText is each window with its key sets and their items.
func closedText(cs []Closed[int64]) string {
	out := ""
	for _, c := range cs {
		var groups []string
		for _, g := range c.Groups {
			groups = append(groups, fmt.Sprint(g.Keys, g.Items))
		}
		out += fmt.Sprintf("[%d,%d)%v ", c.Window.Start.Unix(), c.Window.End.Unix(), groups)
	}
	return out
}

// TestBookFixed closes fixed windows in the order of their ends once the
// watermark reaches them, each with the key sets it saw, and drops what
// comes for a closed window.
func TestBookFixed(t *testing.T) {
	s, _ := Fixed(10 * time.Second)
	b := NewBook[int64](s, 0)
	for _, m := range []struct {
		keys []string
		t    int64
	}{{[]string{"a"}, 101}, {[]string{"b"}, 105}, {[]string{"a"}, 109}, {[]string{"a"}, 112}, {nil, 95}} {
		if _, late := b.Add(m.keys, at(m.t, 0), m.t); late {
			t.Fatalf("Add(%v, %d) late before any watermark", m.keys, m.t)
		}
	}
	if got := closedText(b.Advance(at(109, 999))); got != "[90,100)[[] [95]] " {
		t.Errorf("watermark 109.999 closed %q; want [90,100) alone", got)
	}
	if got := closedText(b.Advance(at(110, 0))); got != "[100,110)[[a] [101 109] [b] [105]] " {
		t.Errorf("watermark 110 closed %q; want [100,110) with a and b", got)
	}
	if ws, late := b.Add([]string{"c"}, at(108, 0), 108); !late || len(ws) != 0 {
		t.Errorf("a message for a closed window: %v, late %v; want late", ws, late)
	}
	if got := b.Advance(at(105, 0)); got != nil {
		t.Errorf("a watermark going back closed %q", closedText(got))
	}
	if wm, ok := b.Watermark(); !ok || !wm.Equal(at(110, 0)) {
		t.Errorf("Watermark() = %v, %v; want 110, the highest", wm, ok)
	}
	if got := closedText(b.Advance(at(200, 0))); got != "[110,120)[[a] [112]] " || b.Open() != 0 {
		t.Errorf("watermark 200 closed %q, %d open", got, b.Open())
	}
}

// TestBookLateness keeps a window open for the allowed lateness past its
// end, and a sliding message goes to the windows still open.
func TestBookLateness(t *testing.T) {
	s, _ := Sliding(20*time.Second, 10*time.Second)
	b := NewBook[int64](s, 5*time.Second)
	b.Advance(at(124, 0))
	ws, late := b.Add([]string{"k"}, at(115, 0), 115) // [100,120) open until 125, [110,130) open
	if late || spans(ws) != "[100,120)[110,130)" {
		t.Errorf("Add at 115 under watermark 124: %s, late %v", spans(ws), late)
	}
	b.Advance(at(125, 0))
	ws, late = b.Add([]string{"k"}, at(115, 0), 115)
	if late || spans(ws) != "[110,130)" {
		t.Errorf("Add at 115 under watermark 125: %s, late %v; want [110,130) alone", spans(ws), late)
	}
	if got := closedText(b.Advance(at(135, 0))); got != "[110,130)[[k] [115 115]] " {
		t.Errorf("watermark 135 closed %q", got)
	}
	if _, late := b.Add([]string{"k"}, at(115, 0), 115); !late {
		t.Error("Add at 115 under watermark 135 is not late")
	}
}

// TestBookEachWindow visits every open window and key set with its items,
// and no closed one.
func TestBookEachWindow(t *testing.T) {
	s, _ := Sliding(20*time.Second, 10*time.Second)
	b := NewBook[int64](s, 0)
	b.Add([]string{"a"}, at(105, 0), 105)
	b.Add([]string{"b"}, at(112, 0), 112)
	b.Add([]string{"a"}, at(113, 0), 113)
	b.Advance(at(120, 0)) // closes [100,120)
	var got []string
	b.EachWindow(func(w Window, g *Group[int64]) {
		got = append(got, fmt.Sprintf("[%d,%d)%v%v", w.Start.Unix(), w.End.Unix(), g.Keys, g.Items))
	})
	slices.Sort(got)
	if want := "[110,130)[a][113] [110,130)[b][112]"; strings.Join(got, " ") != want {
		t.Errorf("EachWindow visited %q; want %q", got, want)
	}
	ss, _ := Session(time.Second)
	sb := NewBook[int64](ss, 0)
	sb.AddSession([]string{"a"}, at(100, 0), 100)
	sb.EachWindow(func(Window, *Group[int64]) { t.Error("EachWindow visited a session") })
}

// TestKeysID tells key sets apart that a plain join would not.
func TestKeysID(t *testing.T) {
	if KeysID([]string{"a,b"}) == KeysID([]string{"a", "b"}) || KeysID(nil) == KeysID([]string{""}) {
		t.Error("two key sets share an id")
	}
}
