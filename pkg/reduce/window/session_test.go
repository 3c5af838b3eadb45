package window

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestSessions adds messages (key, event second) and advances watermarks,
// in order, and checks each session, its window and items, as it closes.
func TestSessions(t *testing.T) {
	type step struct {
		key  string
		t    int64 // a message at this second; or, with wm, a watermark
		wm   bool
		want string // the windows the step returns; for a watermark, closedText
	}
	msg := func(key string, t int64, want string) step { return step{key: key, t: t, want: want} }
	wm := func(t int64, want string) step { return step{t: t, wm: true, want: want} }
	tests := []struct {
		name     string
		lateness time.Duration
		steps    []step
	}{
		{"one message opens a session of the timeout", 0, []step{
			msg("a", 100, "[100,110)"),
			wm(109, ""),
			wm(110, "[100,110)[[a] [100]] "),
		}},
		{"a message inside expands the session", 0, []step{
			msg("a", 100, "[100,110)"),
			msg("a", 105, "[100,115)"),
			msg("a", 101, "[100,115)"),
			wm(114, ""),
			wm(115, "[100,115)[[a] [100 105 101]] "),
		}},
		{"a message at the end touches and expands", 0, []step{
			msg("a", 100, "[100,110)"),
			msg("a", 110, "[100,120)"),
			msg("a", 121, "[121,131)"), // a gap: a session of its own
			wm(131, "[100,120)[[a] [100 110]] [121,131)[[a] [121]] "),
		}},
		{"a message before the start within the timeout expands it back", 0, []step{
			msg("a", 100, "[100,110)"),
			msg("a", 90, "[90,110)"),
			msg("a", 89, "[89,110)"),
			wm(200, "[89,110)[[a] [100 90 89]] "),
		}},
		{"a message between two sessions merges them", 0, []step{
			msg("a", 100, "[100,110)"),
			msg("a", 120, "[120,130)"),
			msg("b", 110, "[110,120)"), // another key: no merge
			msg("a", 110, "[100,130)"),
			wm(129, "[110,120)[[b] [110]] "),
			wm(130, "[100,130)[[a] [100 120 110]] "),
		}},
		{"one message merges three sessions", 0, []step{
			msg("a", 100, "[100,110)"),
			msg("a", 111, "[111,121)"),
			msg("a", 122, "[122,132)"),
			msg("a", 108, "[100,121)"),
			msg("a", 121, "[100,132)"),
			wm(140, "[100,132)[[a] [100 111 108 122 121]] "),
		}},
		{"sessions close in the order of their ends, then keys", 0, []step{
			msg("b", 100, "[100,110)"),
			msg("a", 100, "[100,110)"),
			msg("c", 95, "[95,105)"),
			wm(120, "[95,105)[[c] [95]] [100,110)[[a] [100]] [100,110)[[b] [100]] "),
		}},
		{"a message behind the watermark joins an open session", 0, []step{
			msg("a", 100, "[100,110)"),
			wm(105, ""),
			msg("a", 90, "[90,110)"),
			msg("b", 90, "late"), // behind the watermark, and b has no session
			wm(110, "[90,110)[[a] [100 90]] "),
			msg("a", 105, "late"),
		}},
		{"allowed lateness keeps a session open", 5 * time.Second, []step{
			msg("a", 100, "[100,110)"),
			wm(112, ""),
			msg("a", 108, "[100,118)"), // open until 123
			msg("b", 107, "[107,117)"), // 107 is within the lateness of 112
			msg("c", 106, "late"),
			wm(122, "[107,117)[[b] [107]] "),
			wm(123, "[100,118)[[a] [100 108]] "),
			msg("a", 117, "late"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := Session(10 * time.Second)
			b := NewBook[int64](s, tt.lateness)
			for i, st := range tt.steps {
				if st.wm {
					if got := closedText(b.Advance(at(st.t, 0))); got != st.want {
						t.Fatalf("step %d: watermark %d closed %q; want %q", i, st.t, got, st.want)
					}
					continue
				}
				ws, late := b.Add([]string{st.key}, at(st.t, 0), st.t)
				got := spans(ws)
				if late {
					got = "late"
				}
				if got != st.want {
					t.Fatalf("step %d: Add(%s, %d) = %s; want %s", i, st.key, st.t, got, st.want)
				}
			}
			if b.Open() != 0 {
				if _, ok := b.Oldest(); !ok {
					t.Errorf("%d open, and no oldest", b.Open())
				}
			}
		})
	}
}

// TestSessionsOpen counts the open sessions and finds the oldest start.
func TestSessionsOpen(t *testing.T) {
	s, _ := Session(10 * time.Second)
	b := NewBook[int64](s, 0)
	if _, ok := b.Oldest(); ok || b.Open() != 0 {
		t.Fatal("an empty book has an oldest session")
	}
	for _, m := range []struct {
		key string
		t   int64
	}{{"a", 100}, {"a", 130}, {"b", 95}, {"a", 120}} {
		b.Add([]string{m.key}, at(m.t, 0), m.t)
	}
	// a: [100,110) and [120,140), which 120 joined to [130,140); b: [95,105)
	if start, ok := b.Oldest(); !ok || b.Open() != 3 || !start.Equal(at(95, 0)) {
		t.Errorf("Open() = %d, Oldest() = %v, %v; want 3 open, the oldest at 95", b.Open(), start, ok)
	}
	b.Advance(at(105, 0))
	if start, _ := b.Oldest(); b.Open() != 2 || !start.Equal(at(100, 0)) {
		t.Errorf("after watermark 105: Open() = %d, Oldest() = %v; want 2, at 100", b.Open(), start)
	}
}

func TestSessionStrategy(t *testing.T) {
	if _, err := Session(0); !errors.Is(err, ErrInvalid) {
		t.Errorf("Session(0) = %v; want ErrInvalid", err)
	}
	s, _ := Session(time.Minute)
	if s.Timeout() != time.Minute || spans(s.Assign(nil, at(100, 0))) != "[100,160)" {
		t.Errorf("Session(1m): timeout %v, assigns %s", s.Timeout(), spans(s.Assign(nil, at(100, 0))))
	}
	if f, _ := Fixed(time.Minute); f.Timeout() != 0 {
		t.Error("a fixed strategy has a timeout")
	}
}

// TestAddSessionChanges checks what each AddSession reports it did to the
// sessions of its key set.
func TestAddSessionChanges(t *testing.T) {
	s, _ := Session(10 * time.Second)
	b := NewBook[int](s, 0)
	at := func(sec int64) time.Time { return time.Unix(sec, 0) }
	win := func(start, end int64) Window { return Window{Start: at(start), End: at(end)} }
	steps := []struct {
		key  string
		t    int64
		want Change
	}{
		{"a", 100, Change{Op: Opened, Window: win(100, 110)}},
		{"a", 105, Change{Op: Expanded, Window: win(100, 115), Old: []Window{win(100, 110)}}},
		{"a", 101, Change{Op: Joined, Window: win(100, 115)}},
		{"b", 101, Change{Op: Opened, Window: win(101, 111)}},
		{"a", 124, Change{Op: Opened, Window: win(124, 134)}},
		{"a", 95, Change{Op: Expanded, Window: win(95, 115), Old: []Window{win(100, 115)}}},
		{"a", 115, Change{Op: Merged, Window: win(95, 134), Old: []Window{win(95, 115), win(124, 134)}}},
	}
	for i, st := range steps {
		got, late := b.AddSession([]string{st.key}, at(st.t), i)
		if late || got.Op != st.want.Op || got.Window != st.want.Window || !slices.Equal(got.Old, st.want.Old) {
			t.Errorf("step %d (%s at %d): %v %v %v (late %v); want %v %v %v", i, st.key, st.t,
				got.Op, got.Window, got.Old, late, st.want.Op, st.want.Window, st.want.Old)
		}
	}
	var open []string
	b.EachSession(func(w Window, g *Group[int]) { open = append(open, fmt.Sprint(g.Keys, w, g.Items)) })
	slices.Sort(open)
	if want := []string{
		"[a] [1970-01-01T00:01:35Z, 1970-01-01T00:02:14Z) [0 1 2 5 4 6]",
		"[b] [1970-01-01T00:01:41Z, 1970-01-01T00:01:51Z) [3]",
	}; !slices.Equal(open, want) {
		t.Errorf("open sessions %q; want %q", open, want)
	}
	if Merged.String() != "merged" || Op(9).String() != "Op(9)" {
		t.Errorf("Op names %q %q", Merged, Op(9))
	}
}
