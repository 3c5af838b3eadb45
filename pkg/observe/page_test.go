package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// pageRig is a rate limiter on a manual clock whose epochs a History keeps,
// served on /status/live, with counters the test moves.
type pageRig struct {
	clk    *clock.Manual
	l      *ratelimit.Limiter
	h      *History
	totals Totals
	addr   string
}

func newPageRig(t *testing.T, size int, cfg ratelimit.Config) *pageRig {
	t.Helper()
	r := &pageRig{clk: clock.NewManual(time.Now().Truncate(time.Second))}
	// The manual clock runs the limiter's timers, and so the observer, in
	// the goroutine that advances it: the test's own.
	r.h = NewHistory(size, func() Totals { return r.totals })
	l, err := ratelimit.New(cfg, ratelimit.WithClock(r.clk), ratelimit.WithEpochObserver(r.h.Observe))
	if err != nil {
		t.Fatal(err)
	}
	r.l = l
	t.Cleanup(func() { l.Close(context.Background()) })
	data := func(since int64) any {
		return struct {
			Epochs []Epoch `json:"epochs"`
		}{r.h.Since(since)}
	}
	r.addr = serve(t, Handlers{PageData: data}, nil)
	return r
}

// epoch takes n tokens, counts them read and written, adds paused seconds
// of rate_limited, and ends the epoch.
func (r *pageRig) epoch(t *testing.T, n int, paused float64) int64 {
	t.Helper()
	e, _ := r.l.Epoch()
	if n > 0 {
		if g, _ := r.l.TryAcquire(n); g.Tokens != n {
			t.Fatalf("epoch %d: granted %d, want %d", e, g.Tokens, n)
		}
	}
	r.totals.Read += float64(n)
	r.totals.Written += float64(n)
	r.totals.Throttled.RateLimited += paused
	r.clk.Advance(time.Second)
	return e
}

func (r *pageRig) get(t *testing.T, query string) []Epoch {
	t.Helper()
	code, body := get(t, http.DefaultClient, "http://"+r.addr+PageDataPath+query)
	if code != http.StatusOK {
		t.Fatalf("GET %s%s: %d %s", PageDataPath, query, code, body)
	}
	var v struct {
		Epochs []Epoch `json:"epochs"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("GET %s%s: %v in %s", PageDataPath, query, err, body)
	}
	return v.Epochs
}

// TestPageEpochs ends three epochs of a flat limit of 20 on the manual
// clock and reads them back from /status/live: the pool, the grants, what
// was read and written, and the seconds paused, per epoch; since keeps
// only the later ones.
func TestPageEpochs(t *testing.T) {
	r := newPageRig(t, DefaultHistory, ratelimit.Config{Max: 20, Min: 20})
	first := r.epoch(t, 20, 0.25)
	second := r.epoch(t, 7, 0)
	r.epoch(t, 0, 0)

	got := r.get(t, "")
	if len(got) != 3 {
		t.Fatalf("%d epochs, want 3: %+v", len(got), got)
	}
	for i, want := range []struct {
		epoch   int64
		granted int64
		moved   float64
		paused  float64
	}{{first, 20, 20, 0.25}, {second, 7, 7, 0}, {second + 1, 0, 0, 0}} {
		e := got[i]
		if e.Epoch != want.epoch || e.Pool != 20 || e.Share != 20 || e.Replicas != 1 || e.Max != 20 {
			t.Errorf("epoch %d: %+v; want epoch %d, pool, share and max 20, replica count 1", i, e, want.epoch)
		}
		if e.Granted != want.granted || e.Read != want.moved || e.Written != want.moved || e.Throttled.RateLimited != want.paused {
			t.Errorf("epoch %d: granted %d, read %v, written %v, rate_limited %vs; want %d, %v, %v, %vs",
				i, e.Granted, e.Read, e.Written, e.Throttled.RateLimited, want.granted, want.moved, want.moved, want.paused)
		}
	}
	if later := r.get(t, fmt.Sprintf("?since=%d", second)); len(later) != 1 || later[0].Epoch != second+1 {
		t.Errorf("since=%d: %+v; want epoch %d alone", second, later, second+1)
	}
	if none := r.get(t, fmt.Sprintf("?since=%d", second+1)); len(none) != 0 {
		t.Errorf("since the last epoch: %+v; want none", none)
	}
}

// TestPageKeepsTheLastEpochs fills a ring of three with five epochs: the
// last three are served, oldest first.
func TestPageKeepsTheLastEpochs(t *testing.T) {
	r := newPageRig(t, 3, ratelimit.Config{Max: 20, Min: 20})
	var epochs []int64
	for n := range 5 {
		epochs = append(epochs, r.epoch(t, n+1, 0))
	}
	got := r.get(t, "?since=0")
	if len(got) != 3 {
		t.Fatalf("%d epochs, want 3", len(got))
	}
	for i, e := range got {
		if e.Epoch != epochs[i+2] || e.Granted != int64(i+3) {
			t.Errorf("epoch %d: %d granted %d; want %d granted %d", i, e.Epoch, e.Granted, epochs[i+2], i+3)
		}
	}
}

// TestPageLastChange changes the max live: the epoch it takes effect in, the
// next one, is marked switched, and LastChange reports it.
func TestPageLastChange(t *testing.T) {
	r := newPageRig(t, DefaultHistory, ratelimit.Config{Max: 20, Min: 1})
	if _, _, ok := r.h.LastChange(); ok {
		t.Fatal("a last change before any")
	}
	r.epoch(t, 0, 0)
	if err := r.l.Update(ratelimit.Config{Max: 40, Min: 1}); err != nil {
		t.Fatal(err)
	}
	r.epoch(t, 0, 0) // the change applies from the next epoch
	switched := r.epoch(t, 0, 0)
	r.epoch(t, 0, 0)
	e, m, ok := r.h.LastChange()
	if !ok || e != switched || m != 40 {
		t.Errorf("LastChange() = %d, %d, %v; want %d, 40, true", e, m, ok, switched)
	}
	got := r.get(t, "")
	for i, e := range got {
		if e.Switched != (i == 2) || (i >= 2) != (e.Max == 40) {
			t.Errorf("epoch %d: switched %v, max %d; want the third alone switched, to max 40 from it", i, e.Switched, e.Max)
		}
	}
}

// TestPageBadQuery asks with bad query parameters: each is a 400 that
// names the parameter and its value.
func TestPageBadQuery(t *testing.T) {
	var calls atomic.Int32
	addr := serve(t, Handlers{PageData: func(int64) any { calls.Add(1); return nil }}, nil)
	for _, tc := range []struct{ name, query, want string }{
		{"not a number", "?since=soon", `since ("soon")`},
		{"negative", "?since=-5", `since ("-5")`},
		{"fraction", "?since=1.5", `since ("1.5")`},
		{"twice", "?since=1&since=2", `since given 2 times`},
		{"unknown", "?vertex=cat", `unknown query parameter "vertex" ("cat")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, http.DefaultClient, "http://"+addr+PageDataPath+tc.query)
			if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
				t.Errorf("GET %s: %d %q; want 400 naming %s", tc.query, code, body, tc.want)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("PageData called %d times for bad queries", n)
	}
}

// TestPageAlone serves the page on / alone: it loads no other file, and
// reads status/live by a relative URL, so that it works over HTTPS and
// behind a path prefix.
func TestPageAlone(t *testing.T) {
	addr := serve(t, Handlers{}, nil)
	code, body := get(t, http.DefaultClient, "http://"+addr+"/")
	if code != http.StatusOK || !strings.Contains(body, `"status/live`) {
		t.Fatalf("GET /: %d; want 200 and a page that reads status/live", code)
	}
	for _, abs := range []string{`"/status`, `'/status`, `src=`, `href=`, `url(`, `@import`} {
		if strings.Contains(body, abs) {
			t.Errorf("the page holds %s: it loads nothing else, and its one URL is relative", abs)
		}
	}
	if code, _ := get(t, http.DefaultClient, "http://"+addr+"/nothing"); code != http.StatusNotFound {
		t.Errorf("GET /nothing: %d, want 404", code)
	}
	if code, body := get(t, http.DefaultClient, "http://"+addr+PageDataPath); code != http.StatusOK || strings.TrimSpace(body) != "{}" {
		t.Errorf("GET %s without PageData: %d %q, want 200 {}", PageDataPath, code, body)
	}
}
