package test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// streamWindow is the groupBy window of a reduce streamer over fixed 60 s
// windows.
const streamWindow = "            fixed:\n              length: 60s\n              streaming: true\n"

// arrivals notes when each result line of a log sink came, for a waitFor
// condition (called with the process's lock held).
type arrivals struct {
	mu   sync.Mutex
	seen int
	at   map[string]time.Time // by the result's ID
}

// note notes the arrival of the sink lines in lines not seen yet, by ID.
func (a *arrivals) note(lines []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	for _, l := range lines[a.seen:] {
		if m := sinkLineRE.FindStringSubmatch(l); m != nil {
			if _, ok := a.at[m[4]]; !ok {
				a.at[m[4]] = now
			}
		}
	}
	a.seen = len(lines)
}

// early counts, per key, the windows with a result that came before the
// window's end, and the results that did, of results whose event time is
// their window's end less 1 ms.
func (a *arrivals) early(results []sinkLine) (windows map[string]int, n int) {
	windows = map[string]int{}
	seen := map[windowKey]bool{}
	for _, r := range results {
		at, ok := a.of(r.id)
		w := windowKey{r.keys, r.eventTime + 1}
		if !ok || !at.Before(time.UnixMilli(w.end)) {
			continue
		}
		n++
		if !seen[w] {
			seen[w] = true
			windows[r.keys]++
		}
	}
	return windows, n
}

// soonest tells how soon after its window opened the first result of a
// window came, at the least and the median over the windows, for windows
// of length ms that the results' event times (end less 1 ms) name.
func (a *arrivals) soonest(results []sinkLine, length int64) string {
	first := map[windowKey]time.Time{}
	for _, r := range results {
		at, ok := a.of(r.id)
		w := windowKey{r.keys, r.eventTime + 1}
		if f, seen := first[w]; ok && (!seen || at.Before(f)) {
			first[w] = at
		}
	}
	var ds []time.Duration
	for w, at := range first {
		ds = append(ds, at.Sub(time.UnixMilli(w.end-length)))
	}
	if len(ds) == 0 {
		return "no result"
	}
	slices.Sort(ds)
	return fmt.Sprintf("the first result of a window came %.2fs after it opened at the least, %.2fs in the median", ds[0].Seconds(), ds[len(ds)/2].Seconds())
}

func (a *arrivals) of(id string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[id]
	return t, ok
}

// TestReduceStreamerEarly runs sluice's SDK reduce streamer streamcounter
// as the keyed reduce of fixed 60 s windows, in one process: it sends each
// key's count every 10 messages, and each count is written as it comes,
// with the window open, not when it closes. The test waits until every key
// has had a count written at least 10 s before its window could close
// (the watermark, with no maxDelay, cannot pass the end of a window before
// the clock does), then stops. Every result written before its window's
// end is a count of 10, with the window's end less 1 ms as event time and
// the IDs of its window and key numbered from 0.
func TestReduceStreamerEarly(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, reducePipeline("red-stream", streamWindow, example(t, "streamcounter"), jetStreamISB("nats://127.0.0.1:9", ""), ""))
	started := time.Now()
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0", "--state-dir", t.TempDir())
	arr := &arrivals{at: map[string]time.Time{}}
	early := map[string]time.Duration{} // how long before its window's end the key's first such result came
	var first time.Time                 // the first result's arrival
	var firstWindow int64               // its window's start (ms)
	p.waitFor(40*time.Second, "a result of each key 10 s before its window's end", func() bool {
		arr.note(p.lines)
		_, res := sinkLinesLocked(p.lines)
		for _, r := range res {
			at, _ := arr.of(r.id)
			end := time.UnixMilli(r.eventTime + 1)
			if first.IsZero() || at.Before(first) {
				first, firstWindow = at, r.eventTime+1-60_000
			}
			if _, ok := early[r.keys]; !ok && !at.After(end.Add(-10*time.Second)) {
				early[r.keys] = end.Sub(at)
			}
		}
		return len(early) == 3
	})
	if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	_, res := sinkLines(t, p.stdoutLines())
	next := map[windowKey]int{}
	for _, r := range res {
		at, ok := arr.of(r.id)
		w := windowKey{r.keys, r.eventTime + 1}
		if !ok || !at.Before(time.UnixMilli(w.end)) {
			continue // written at the close, or after the waiting stopped
		}
		if r.payload != "10" {
			t.Errorf("result %+v written while its window was open: count %s; want 10", r, r.payload)
		}
		if (w.end-r.eventTime) != 1 || w.end%60_000 != 0 {
			t.Errorf("result %+v: event time %d; want a minute's end less 1 ms", r, r.eventTime)
		}
		prefix := strconv.FormatInt(w.end-60_000, 10) + "-" + strconv.FormatInt(w.end, 10) + "-"
		wantID := prefix + strconv.Itoa(len(r.keys)) + ":" + r.keys + "-" + strconv.Itoa(next[w])
		if r.id != wantID {
			t.Errorf("result %+v: ID %q; want %q", r, r.id, wantID)
		}
		next[w]++
	}
	if len(next) == 0 {
		t.Fatal("no result written while its window was open")
	}
	opened := map[string]string{}
	for k, ahead := range early {
		opened[k] = fmt.Sprintf("%.2fs", (time.Minute - ahead).Seconds())
	}
	t.Logf("first result %.2fs after its window opened, %.2fs after the vertex started; each key's first result 10s or more before its window's end came after that window opened by %v; results written while their windows were open: %v",
		first.Sub(time.UnixMilli(firstWindow)).Seconds(), first.Sub(started).Seconds(), opened, next)
	if strings.Contains(p.stderrText(), `"level":"error"`) {
		t.Errorf("errors logged:\n%s", p.stderrText())
	}
}
