package reduce

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

func newSessionCounter(t *testing.T, log *wal.Log) *Processor {
	t.Helper()
	s, _ := window.Session(5 * time.Second)
	p, err := New(Config{Strategy: s, Keyed: true, Reducer: ReducerFunc(count), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSessionCount counts per key and session: a gap longer than the
// timeout ends a session, a message between two sessions merges them, and
// a message behind the watermark with no session to join is late.
func TestSessionCount(t *testing.T) {
	p := newSessionCounter(t, nil)
	add(t, p, msg("1", "a", 100), msg("2", "a", 104), msg("3", "b", 100), msg("4", "b", 109), msg("5", "a", 112))
	add(t, p, msg("6", "b", 105)) // joins b's [100,105) and [109,114)
	if got := text(advance(t, p, 112)); got != "a=2@108.999" {
		t.Errorf("watermark 112 emitted %q", got)
	}
	if got := text(advance(t, p, 120)); got != "b=3@113.999 a=1@116.999" {
		t.Errorf("watermark 120 emitted %q", got)
	}
	if late := add(t, p, msg("7", "a", 114), msg("8", "a", 121)); late != 1 || p.Late() != 1 {
		t.Errorf("late %d (total %d); want the message behind the watermark", late, p.Late())
	}
	if res := advance(t, p, 126); text(res) != "a=1@125.999" || res[0].ID != "121000-126000-1:a-0" {
		t.Errorf("watermark 126 emitted %q", text(res))
	}
}

// TestSessionCrashAndRestart runs the same input with and without a crash
// in the middle of sessions that grow and merge: the restarted processor
// emits exactly the results of the run without it, and the log keeps the
// segments of sessions still open however old their first messages.
func TestSessionCrashAndRestart(t *testing.T) {
	var batches [][]isb.Message
	var wms []int64
	n := 0
	id := func() string { n++; return strconv.Itoa(n) }
	for sec := int64(100); sec < 160; sec += 3 {
		b := []isb.Message{msg(id(), "a", sec)} // one session throughout
		if (sec/3)%4 != 0 {
			b = append(b, msg(id(), "b", sec)) // sessions with gaps of 6 s
		}
		b = append(b, msg(id(), "c", sec+6), msg(id(), "c", sec)) // the second merges two sessions
		batches, wms = append(batches, b), append(wms, sec-4)
	}
	batches, wms = append(batches, nil), append(wms, 200)
	want := runWith(t, newSessionCounter, t.TempDir(), batches, wms, 0, true)
	total := 0
	for _, r := range want {
		v, _ := strconv.Atoi(r[strings.LastIndexByte(r, '=')+1:])
		total += v
	}
	if total != n || len(want) < 5 {
		t.Fatalf("without a crash, %d results counting %d messages; want %d: %v", len(want), total, n, want)
	}
	for _, crashAfter := range []int{2, 9, 15} {
		t.Run(fmt.Sprint("committed/", crashAfter), func(t *testing.T) {
			dir := t.TempDir()
			if got := runWith(t, newSessionCounter, dir, batches, wms, crashAfter, true); !slices.Equal(got, want) {
				t.Errorf("results\n%v\nwant\n%v", got, want)
			}
			if names, _ := filepath.Glob(filepath.Join(dir, "*.wal")); len(names) > 1 {
				t.Errorf("%d segments left after every session closed", len(names))
			}
		})
		t.Run(fmt.Sprint("uncommitted/", crashAfter), func(t *testing.T) {
			got := runWith(t, newSessionCounter, t.TempDir(), batches, wms, crashAfter, false)
			seen := map[string]bool{}
			var unique []string
			for _, r := range got {
				if !seen[r] {
					seen[r] = true
					unique = append(unique, r)
				}
			}
			if !slices.Equal(unique, want) {
				t.Errorf("results\n%v\nwant, once each\n%v", got, want)
			}
		})
	}
}
