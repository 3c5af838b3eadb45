package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Tokens belong to their epoch (DESIGN.md §3): a read or a write that returns
// in a later second than the one that granted its tokens must not spend
// those tokens on top of the current second's. The two rows here stall a read
// (the user-defined source is killed and started again 3 s later) and a write
// (the sink holds a batch for 3 s before it takes it) across epoch
// boundaries, and count what the sink takes in each wall-clock second.

// lateMax is the limit of the late-token rows: max = min, no ramp.
const lateMax = 50

// stampedLines stamps each stdout line of a vertex with the time the test
// saw it, which is within a scheduling delay of when the log sink wrote it
// (the sink flushes each batch at once).
type stampedLines struct {
	mu   sync.Mutex
	at   []time.Time
	stop chan struct{}
	done chan struct{}
}

// stampLines starts stamping p's stdout lines; call it right after the
// process starts, before it writes any.
func stampLines(t *testing.T, p *proc) *stampedLines {
	s := &stampedLines{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			p.mu.Lock()
			n, ch := len(p.lines), p.notify
			p.mu.Unlock()
			now := time.Now()
			s.mu.Lock()
			for len(s.at) < n {
				s.at = append(s.at, now)
			}
			s.mu.Unlock()
			select {
			case <-ch:
			case <-p.done:
				p.mu.Lock()
				n = len(p.lines)
				p.mu.Unlock()
				s.mu.Lock()
				for len(s.at) < n {
					s.at = append(s.at, time.Now())
				}
				s.mu.Unlock()
				return
			case <-s.stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(s.stop)
		<-s.done
	})
	return s
}

// firstStamp waits, at most a second, for the first line's stamp.
func (s *stampedLines) firstStamp(t *testing.T) time.Time {
	t.Helper()
	for range 100 {
		if at := s.times(); len(at) > 0 {
			return at[0]
		}
		time.Sleep(10 * time.Millisecond) // the stamper runs on its own goroutine
	}
	t.Fatal("no stdout line stamped a second after the vertex wrote one")
	return time.Time{}
}

// times returns the stamps so far, one per line in order.
func (s *stampedLines) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

// wallSeconds counts times per wall-clock second, from the second of the
// first to that of the last, and returns the counts, the first second, the
// worst count and how many seconds were over limit.
func wallSeconds(times []time.Time, limit int) (counts []int, first int64, worst, over int) {
	if len(times) == 0 {
		return nil, 0, 0, 0
	}
	per := map[int64]int{}
	first, last := times[0].Unix(), times[0].Unix()
	for _, at := range times {
		s := at.Unix()
		per[s]++
		first, last = min(first, s), max(last, s)
	}
	for s := first; s <= last; s++ {
		counts = append(counts, per[s])
		worst = max(worst, per[s])
		if per[s] > limit {
			over++
		}
	}
	return counts, first, worst, over
}

// sleepUntil sleeps until at (at once when it has passed).
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// contiguous checks the integers a sink got: every one from 0 to the largest
// at least once. It returns how many below the largest never came (lost),
// how many came more than once (extra copies), and the largest.
func contiguous(seen map[int]int) (lost, duplicated, largest int) {
	largest = -1
	for n, c := range seen {
		largest = max(largest, n)
		duplicated += c - 1
	}
	for n := 0; n <= largest; n++ {
		if seen[n] == 0 {
			lost++
		}
	}
	return lost, duplicated, largest
}

// logNumbers counts the integer payloads of log-sink lines.
func logNumbers(t *testing.T, lines []string) map[int]int {
	t.Helper()
	return sinkNumbers(t, payloads(t, lines))
}

// TestFaultLateTokensSourceKilled kills sluice's example user-defined source
// with SIGKILL 4.5 s into a run at 50 messages a second and starts it again
// 3 s later, from the first number the sink does not have. The read the
// vertex makes with the tokens of the second after the kill blocks until the
// source is back and returns its messages three seconds later: they must
// take the tokens of the second they come in, not add the old second's to
// it. The log sink, its lines stamped as they come, must never take more
// than 50 in a wall-clock second, and must have every number from 0 on.
func TestFaultLateTokensSourceKilled(t *testing.T) {
	t.Parallel()
	for run := range faultRounds(t) {
		t.Run(fmt.Sprintf("run%d", run), func(t *testing.T) { testLateTokensSourceKilled(t) })
	}
}

func testLateTokensSourceKilled(t *testing.T) {
	const endless = 1 << 30
	row := faultRow{Fault: "user-defined source killed 3 s", Policy: "-",
		Holds: fmt.Sprintf("the sink never takes more than max (%d) in a wall second; nothing lost", lateMax), Runs: 1}
	defer func() {
		if t.Failed() {
			row.Failed = 1
		}
		recordFault(row)
	}()
	dir := udsDir(t)
	src := udSource(t, dir, 0, endless)
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: late-source
spec:
  limits:
    readBatchSize: %d
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
  source:
    udsource:
`, lateMax, lateMax, lateMax)+udContainer("      ", "", nil)+`  sink:
    log: {}
`)
	p := start(t, "run", "-f", cfg, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
	stamps := stampLines(t, p)
	p.metricsAddr()
	p.waitFor(20*time.Second, "the first message at the sink", func() bool { return len(p.lines) > 0 })
	// Epochs are whole seconds of the wall clock (no store): killed half-way
	// through a second, the source is gone when the forwarder, waiting for
	// the next second's tokens, takes them and reads.
	base := stamps.firstStamp(t).Truncate(time.Second)
	sleepUntil(base.Add(4500 * time.Millisecond))
	if err := src.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-src.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the source is still running 10s after SIGKILL")
	}
	killed := time.Now()
	sleepUntil(killed.Add(3 * time.Second))
	seen := logNumbers(t, p.stdoutLines())
	_, _, largest := contiguous(seen)
	from := largest + 1
	src = udSource(t, dir, from, endless)
	restarted := time.Now()
	// Ten seconds of flow, and at least 3s after the source is back: a busy
	// machine can take seconds to start it again.
	end := base.Add(10 * time.Second)
	if back := restarted.Add(3 * time.Second); back.After(end) {
		end = back
	}
	sleepUntil(end)
	if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("the vertex exited %d; stderr:\n%s", code, p.stderrText())
	}
	if code, _ := src.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Errorf("the source exited %d; stderr:\n%s", code, src.stderrText())
	}

	lines := p.stdoutLines()
	times := stamps.times()
	if len(times) != len(lines) {
		t.Fatalf("%d lines stamped of %d", len(times), len(lines))
	}
	counts, first, worst, over := wallSeconds(times, lateMax)
	row.Epochs, row.OverMax, row.Worst = len(counts), over, fmt.Sprintf("%d/%d", worst, lateMax)
	seen = logNumbers(t, lines)
	lost, dup, largest := contiguous(seen)
	row.Lost, row.Duplicated = lost, dup
	t.Logf("sink per wall second from %d: %s; killed the source at +%v, started it again from %d at +%v",
		first, joinInts(counts), killed.Sub(base).Round(time.Millisecond), from, restarted.Sub(base).Round(time.Millisecond))
	t.Logf("grants by epoch: %s", epochGrants(t, p, first, len(counts)))
	checkLate(t, "sink", first, counts, lost, largest, 6*lateMax) // 7 s of flow
	if killed.Sub(base) < 4*time.Second || restarted.Sub(killed) < 3*time.Second {
		t.Errorf("the source was killed at +%v and started again %v later; want 4.5s and 3s",
			killed.Sub(base), restarted.Sub(killed))
	}
}

// epochGrants returns the vertex's grants (its debug log) for count epochs
// from first, as "g g g ...".
func epochGrants(t *testing.T, p *proc, first int64, count int) string {
	t.Helper()
	epochs := p.epochs(t)
	var out []int
	for e := first; e < first+int64(count); e++ {
		out = append(out, int(epochs[e].Granted))
	}
	return joinInts(out)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}

// stallingEndpoint takes batches of messages from the http sink (batch:
// true). The first batch that comes stallAfter or more after the first one
// is held for stall before the endpoint takes it: its messages count in the
// second it answers in, as those of an API that hangs and then stores them.
type stallingEndpoint struct {
	stallAfter, stall time.Duration

	mu       sync.Mutex
	first    time.Time
	stalled  time.Time // when the held batch came
	taken    []time.Time
	values   map[int]int
	badBody  string
	requests int
}

func (e *stallingEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	now := time.Now()
	e.mu.Lock()
	e.requests++
	if e.first.IsZero() {
		e.first = now
	}
	hold := e.stalled.IsZero() && now.Sub(e.first) >= e.stallAfter
	if hold {
		e.stalled = now
	}
	e.mu.Unlock()
	if hold {
		time.Sleep(e.stall) // the API hangs, the vertex's write with it
	}
	var batch []struct{ Value []byte }
	err := json.Unmarshal(body, &batch)
	taken := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		if e.badBody == "" {
			e.badBody = fmt.Sprintf("%v: %.200s", err, body)
		}
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, m := range batch {
		n, err := strconv.Atoi(string(m.Value))
		if err != nil {
			if e.badBody == "" {
				e.badBody = fmt.Sprintf("value %q is not a number of the source", m.Value)
			}
			continue
		}
		e.values[n]++
		e.taken = append(e.taken, taken)
	}
	w.WriteHeader(http.StatusNoContent)
}

// TestFaultLateTokensSinkStalled runs simplesource → http sink (a batch a
// request) at 50 messages a second against an endpoint that holds one batch,
// 2 s in, for 3 s before it takes it. The write returns three seconds after
// the tokens of its batch were granted; the batch is taken in that later
// second, and the next batch must not be granted that second's tokens on top
// of it. The endpoint never takes more than 50 in a wall-clock second, and
// gets every number from 0 on.
func TestFaultLateTokensSinkStalled(t *testing.T) {
	t.Parallel()
	for run := range faultRounds(t) {
		t.Run(fmt.Sprintf("run%d", run), func(t *testing.T) { testLateTokensSinkStalled(t) })
	}
}

func testLateTokensSinkStalled(t *testing.T) {
	row := faultRow{Fault: "sink stalled 3 s", Policy: "-",
		Holds: fmt.Sprintf("the sink never takes more than max (%d) in a wall second; nothing lost", lateMax), Runs: 1}
	defer func() {
		if t.Failed() {
			row.Failed = 1
		}
		recordFault(row)
	}()
	ep := &stallingEndpoint{stallAfter: 2 * time.Second, stall: 3 * time.Second, values: map[int]int{}}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: late-sink
spec:
  limits:
    readBatchSize: %d
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
  source:
    udsource:
`, lateMax, lateMax, lateMax)+udContainer("      ", example(t, "simplesource"), map[string]string{"SIMPLESOURCE_COUNT": "1000000000"})+`  sink:
    http:
      url: `+srv.URL+`/ingest
      batch: true
      timeout: 10s
`)
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
	p.metricsAddr()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ep.mu.Lock()
		stalled := ep.stalled
		ep.mu.Unlock()
		if !stalled.IsZero() && time.Since(stalled) > ep.stall+2500*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no batch held and 2.5s of flow after it within 30s; stderr:\n%s", p.stderrText())
		}
		time.Sleep(100 * time.Millisecond) // real time: the endpoint is real
	}
	if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("the vertex exited %d; stderr:\n%s", code, p.stderrText())
	}

	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.badBody != "" {
		t.Errorf("the endpoint got a body it cannot read: %s", ep.badBody)
	}
	counts, first, worst, over := wallSeconds(ep.taken, lateMax)
	row.Epochs, row.OverMax, row.Worst = len(counts), over, fmt.Sprintf("%d/%d", worst, lateMax)
	lost, dup, largest := contiguous(ep.values)
	row.Lost, row.Duplicated = lost, dup
	base := time.Unix(first, 0)
	t.Logf("endpoint took per wall second from %d: %s; held the batch that came at +%v for %v",
		first, joinInts(counts), ep.stalled.Sub(base).Round(time.Millisecond), ep.stall)
	t.Logf("grants by epoch: %s", epochGrants(t, p, first, len(counts)))
	checkLate(t, "endpoint", first, counts, lost, largest, 4*lateMax)
}

// checkLate fails t for every wall second from first in which who took more
// than lateMax messages, for the numbers 0..largest that never reached it, and
// when it got fewer than least in all.
func checkLate(t *testing.T, who string, first int64, counts []int, lost, largest, least int) {
	t.Helper()
	for i, c := range counts {
		if c > lateMax {
			t.Errorf("wall second %d (+%ds): the %s took %d messages; max is %d", first+int64(i), i, who, c, lateMax)
		}
	}
	if lost > 0 {
		t.Errorf("%d of the numbers 0..%d never reached the %s", lost, largest, who)
	}
	if largest < least {
		t.Errorf("the %s got 0..%d in all; at %d a second it should have at least %d", who, largest, lateMax, least)
	}
}
