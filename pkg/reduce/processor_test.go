package reduce

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

func msg(id string, key string, sec int64) isb.Message {
	return isb.Message{ID: id, Keys: []string{key}, Value: []byte(`{"n": 2}`), EventTime: time.Unix(sec, 0),
		Headers: map[string]string{"h": id}}
}

func newCounter(t *testing.T, log *wal.Log) *Processor {
	t.Helper()
	s, _ := window.Fixed(10 * time.Second)
	p, err := New(Config{Strategy: s, Keyed: true, Reducer: ReducerFunc(count), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// text is "key=value@eventtime" of each result.
func text(res []isb.Message) string {
	var out []string
	for _, r := range res {
		out = append(out, fmt.Sprintf("%s=%s@%d.%03d", strings.Join(r.Keys, ","), r.Value, r.EventTime.Unix(), r.EventTime.Nanosecond()/1e6))
	}
	return strings.Join(out, " ")
}

func advance(t *testing.T, p *Processor, sec int64) []isb.Message {
	t.Helper()
	res, err := p.Advance(context.Background(), time.Unix(sec, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	return res
}

func add(t *testing.T, p *Processor, msgs ...isb.Message) int {
	t.Helper()
	late, err := p.Add(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	return late
}

// TestKeyedCount counts per key and window, closes windows in order as the
// watermark passes their ends, and drops what comes late.
func TestKeyedCount(t *testing.T) {
	p := newCounter(t, nil)
	add(t, p, msg("1", "a", 101), msg("2", "b", 102), msg("3", "a", 109), msg("4", "a", 111))
	if got := text(advance(t, p, 109)); got != "" {
		t.Errorf("watermark 109 emitted %q", got)
	}
	res := advance(t, p, 110)
	if got := text(res); got != "a=2@109.999 b=1@109.999" {
		t.Errorf("watermark 110 emitted %q", got)
	}
	if res[0].ID != "100000-110000-1:a-0" {
		t.Errorf("result ID %q", res[0].ID)
	}
	if late := add(t, p, msg("5", "a", 105), msg("6", "b", 115)); late != 1 || p.Late() != 1 {
		t.Errorf("late %d (total %d); want the message of the closed window", late, p.Late())
	}
	if got := text(advance(t, p, 120)); got != "a=1@119.999 b=1@119.999" {
		t.Errorf("watermark 120 emitted %q", got)
	}
	if p.Open() != 0 {
		t.Errorf("%d windows open", p.Open())
	}
}

// TestSlidingSum adds a JSON field over sliding windows, all keys together.
func TestSlidingSum(t *testing.T) {
	s, _ := window.Sliding(10*time.Second, 5*time.Second)
	r, err := Builtin("sum", map[string]string{"field": "n"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Strategy: s, Reducer: r})
	if err != nil {
		t.Fatal(err)
	}
	add(t, p, msg("1", "a", 101), msg("2", "b", 106), isb.Message{ID: "3", Value: []byte(`{"n": 0.5}`), EventTime: time.Unix(108, 0)})
	if got := text(advance(t, p, 120)); got != "=2@104.999 =4.500000@109.999 =2.500000@114.999" {
		t.Errorf("emitted %q", got)
	}
}

// run feeds batches to a processor, with the watermark after each, and
// returns every result; crashAfter, when positive, drops the processor and
// its log after that batch (without closing either) and goes on with new
// ones on the same directory.
func run(t *testing.T, dir string, batches [][]isb.Message, wms []int64, crashAfter int, commitBeforeCrash bool) []string {
	t.Helper()
	return runWith(t, newCounter, dir, batches, wms, crashAfter, commitBeforeCrash)
}

// runWith is run with the processors that mk makes.
func runWith(t *testing.T, mk func(*testing.T, *wal.Log) *Processor, dir string, batches [][]isb.Message, wms []int64, crashAfter int, commitBeforeCrash bool) []string {
	t.Helper()
	open := func() (*Processor, *wal.Log) {
		l, err := wal.Open(dir, wal.Options{SegmentSize: 200})
		if err != nil {
			t.Fatal(err)
		}
		p := mk(t, l)
		if _, err := p.Recover(); err != nil {
			t.Fatal(err)
		}
		return p, l
	}
	p, l := open()
	var out []string
	for i, b := range batches {
		add(t, p, b...)
		res, err := p.Advance(context.Background(), time.Unix(wms[i], 0))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			out = append(out, r.ID+"="+string(r.Value))
		}
		if i+1 != crashAfter || commitBeforeCrash {
			if err := p.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		if i+1 == crashAfter {
			p, l = open() // the old ones are dropped as a killed process leaves them
		}
	}
	l.Close()
	return out
}

// TestCrashAndRestart runs the same input with and without a crash in the
// middle of a window: the restarted processor emits exactly the results of
// the run without it, and a window reduced but not committed before the
// crash is emitted again, the same.
func TestCrashAndRestart(t *testing.T) {
	var batches [][]isb.Message
	var wms []int64
	n := 0
	for sec := int64(100); sec < 160; sec += 3 {
		var b []isb.Message
		for _, k := range []string{"a", "b", "c"} {
			n++
			b = append(b, msg(fmt.Sprint(n), k, sec), msg(fmt.Sprint(n)+"x", k, sec+1))
		}
		batches, wms = append(batches, b), append(wms, sec-4)
	}
	batches, wms = append(batches, nil), append(wms, 200)
	want := run(t, t.TempDir(), batches, wms, 0, true)
	if len(want) != 18 {
		t.Fatalf("%d results without a crash; want 3 keys × 6 windows", len(want))
	}
	for _, crashAfter := range []int{3, 7, 12} {
		t.Run(fmt.Sprint("committed/", crashAfter), func(t *testing.T) {
			dir := t.TempDir()
			if got := run(t, dir, batches, wms, crashAfter, true); !slices.Equal(got, want) {
				t.Errorf("results\n%v\nwant\n%v", got, want)
			}
			if names, _ := filepath.Glob(filepath.Join(dir, "*.wal")); len(names) > 1 {
				t.Errorf("%d segments left after every window closed", len(names))
			}
		})
		t.Run(fmt.Sprint("uncommitted/", crashAfter), func(t *testing.T) {
			got := run(t, t.TempDir(), batches, wms, crashAfter, false)
			// The windows the crashed run reduced come again after the
			// restart, the same; the rest as without the crash.
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

func TestNewErrors(t *testing.T) {
	s, _ := window.Fixed(time.Second)
	if _, err := New(Config{Strategy: s}); err == nil {
		t.Error("New without a reducer succeeded")
	}
	if _, err := New(Config{Reducer: ReducerFunc(count)}); err == nil || !strings.Contains(err.Error(), "assigns no windows") {
		t.Errorf("New without a strategy: %v", err)
	}
}

func TestBuiltinErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		kw   map[string]string
		want string
	}{
		{"sum", nil, "sum needs kwargs.field"},
		{"avg", nil, `unknown "avg" (want count or sum)`},
	} {
		if _, err := Builtin(tt.name, tt.kw); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Builtin(%q) = %v; want %q", tt.name, err, tt.want)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	m := isb.Message{ID: "id-1", Keys: []string{"a", ""}, Value: []byte("v"), EventTime: time.Unix(5, 6),
		Headers: map[string]string{"x": "1", "y": ""}}
	b := appendMessage(nil, &m)
	got, err := decodeMessage(b[1:])
	if err != nil || got.ID != m.ID || !slices.Equal(got.Keys, m.Keys) || string(got.Value) != "v" ||
		!got.EventTime.Equal(m.EventTime) || len(got.Headers) != 2 || got.Headers["x"] != "1" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if _, err := decodeMessage(b[1 : len(b)-3]); err == nil {
		t.Error("a record cut short decoded")
	}
}

// TestRedeliveredAfterCrash logs a batch and crashes before acking it: the
// buffer delivers it again to the restarted processor, which has it from
// its log already and counts it once.
func TestRedeliveredAfterCrash(t *testing.T) {
	dir := t.TempDir()
	open := func() *Processor {
		l, err := wal.Open(dir, wal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		p := newCounter(t, l)
		if _, err := p.Recover(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := open()
	add(t, p, msg("1", "a", 101), msg("2", "a", 102))
	add(t, p, msg("3", "a", 103), msg("4", "b", 104)) // logged, then the crash: never acked
	p = open()
	add(t, p, msg("3", "a", 103), msg("4", "b", 104), msg("5", "a", 105)) // delivered again, and one new
	if p.Duplicates() != 2 {
		t.Errorf("%d duplicates dropped; want 2", p.Duplicates())
	}
	if got := text(advance(t, p, 110)); got != "a=4@109.999 b=1@109.999" {
		t.Errorf("emitted %q; want each message counted once", got)
	}
	if late := add(t, p, msg("4", "b", 104)); late != 1 {
		t.Errorf("a message delivered again after its window closed: late %d, want 1", late)
	}
}
