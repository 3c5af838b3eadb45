package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf/mapclient"
)

// The served roles under each kind of limit a rateLimit block sets beside
// max: a limit per key, bytes a second, a cost per message, and a group
// shared through a redis-server with another served vertex. What no epoch
// may exceed is read from the served vertex's own epoch logs (--log-level
// debug) and asserted of every epoch, exactly; what the client sees (each
// request answered once, with its own keys and payload, and no sooner than
// the limit lets them all through) from sluice's map client, which drives
// the map role as Numaflow's runtime does.

// serveLimitsConfig is a MonoVertex whose udf the map role serves, reading
// batch messages at a time, under the rate limit whose fields are rl
// (indented to sit under spec.limits.rateLimit).
func serveLimitsConfig(name string, batch int, rl string) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: %s
spec:
  source:
    generator: {}
  udf:
    container:
      image: user-map
  sink:
    log: {}
  limits:
    readBatchSize: %d
    readTimeout: 100ms
    rateLimit:
%s`, name, batch, rl)
}

// mapStream sends msgs to the map server in dir over one stream of
// sluice's map client, batch at a time, each batch once the one before is
// answered and, with every > 0, no sooner than every after the one before
// was sent, until all are sent or stop is closed. It checks that each
// request is answered once, with its own keys and payload, and returns when
// each was sent and answered (the zero time for those not sent).
func mapStream(ctx context.Context, dir string, msgs []isb.Message, batch int, every time.Duration, stop <-chan struct{}) (sent, answered []time.Time, err error) {
	c := mapclient.New(dir, zap.NewNop())
	defer c.Close()
	if err := c.Connect(ctx); err != nil {
		return nil, nil, fmt.Errorf("connecting to the served map: %w", err)
	}
	sent, at := make([]time.Time, len(msgs)), make([]time.Time, len(msgs))
	var out []isb.Message
	var next time.Time
	for i := 0; i < len(msgs); i += batch {
		wait := time.NewTimer(time.Until(next))
		select {
		case <-stop:
			wait.Stop()
			return sent, at, nil
		case <-wait.C:
		}
		in := msgs[i:min(len(msgs), i+batch)]
		began := time.Now()
		next = began.Add(every)
		if out, _, err = c.Map(ctx, in, out[:0]); err != nil {
			return sent, at, fmt.Errorf("map of messages %s..: %w", in[0].ID, err)
		}
		now := time.Now()
		if len(out) != len(in) {
			return sent, at, fmt.Errorf("map of %d messages from %s gave %d answers", len(in), in[0].ID, len(out))
		}
		for j := range in {
			if out[j].ID != in[j].ID || !bytes.Equal(out[j].Value, in[j].Value) || !slices.Equal(out[j].Keys, in[j].Keys) {
				return sent, at, fmt.Errorf("message %s came back as %s %q keys %v; want %q keys %v", in[j].ID, out[j].ID,
					out[j].Value, out[j].Keys, in[j].Value, in[j].Keys)
			}
			sent[i+j], at[i+j] = began, now
		}
	}
	return sent, at, nil
}

// stream is one client stream of a test: its messages, batch size and,
// when not 0, the time from one batch's send to the next's.
type stream struct {
	name  string
	msgs  []isb.Message
	batch int
	every time.Duration
}

// mapStreams runs the streams at once against the map server in dir, each
// on a stream of its own, and returns when each message was sent and
// answered, by stream. A stream that fails fails the test.
func mapStreams(t *testing.T, dir string, streams []stream) (sent, answered [][]time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent, answered = make([][]time.Time, len(streams)), make([][]time.Time, len(streams))
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent[i], answered[i], errs[i] = mapStream(ctx, dir, s.msgs, s.batch, s.every, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("stream %s: %v", streams[i].name, err)
		}
	}
	return sent, answered
}

// limitEpochs returns, by epoch, what the limits of procs that the logger
// names granted, added up over procs: "" is each vertex's own limit (the
// debug log "epoch" of no named logger), "ratelimit.bytes" its byte limit
// and "ratelimit.group.NAME" its share of group NAME ("group epoch"). Each
// process's own grants by epoch come back too, in the order of procs.
func limitEpochs(t *testing.T, procs []*proc, logger string) (sum map[int64]int64, each []map[int64]epochLog) {
	t.Helper()
	msg := "epoch"
	if strings.HasPrefix(logger, "ratelimit.group.") {
		msg = "group epoch"
	}
	sum = map[int64]int64{}
	for _, p := range procs {
		mine := map[int64]epochLog{}
		for _, line := range strings.Split(p.stderrText(), "\n") {
			if !strings.Contains(line, `"msg":"`+msg+`"`) {
				continue
			}
			var l struct {
				epochLog
				Logger string
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("epoch log %q: %v", line, err)
			}
			if l.Logger != logger {
				continue
			}
			mine[l.Epoch] = l.epochLog
			sum[l.Epoch] += l.Granted
		}
		each = append(each, mine)
	}
	return sum, each
}

// checkPerEpoch checks that no epoch of granted is over max, and returns
// the grants in order of epoch for the log, and the epochs that granted
// anything.
func checkPerEpoch(t *testing.T, what string, granted map[int64]int64, max int64) (figures string, busy []int64) {
	t.Helper()
	if len(granted) == 0 {
		t.Fatalf("%s: no epoch in the debug log", what)
	}
	var f []string
	for _, e := range slices.Sorted(maps.Keys(granted)) {
		g := granted[e]
		if g > max {
			t.Errorf("%s: epoch %d granted %d; max %d", what, e, g, max)
		}
		if g > 0 {
			busy = append(busy, e)
		}
		f = append(f, strconv.FormatInt(g, 10))
	}
	return strings.Join(f, " "), busy
}

// inner is epochs less the first and the last, whose seconds the run began
// or ended in.
func inner(epochs []int64) []int64 {
	if len(epochs) < 3 {
		return nil
	}
	return epochs[1 : len(epochs)-1]
}

// last is the latest of times.
func last(times []time.Time) time.Time {
	var l time.Time
	for _, at := range times {
		if at.After(l) {
			l = at
		}
	}
	return l
}

// mapModes runs f as a parallel subtest for each mode the map role
// serves, unary map and batch map (SLUICE_MAP_MODE=batch-map), with serve
// starting `vertex serve --role map` of the MonoVertex cfg in that mode at
// debug level, returning it and its socket directory.
func mapModes(t *testing.T, f func(t *testing.T, serve func(cfg string) (*proc, string))) {
	for _, mode := range []string{"unary-map", "batch-map"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			f(t, func(cfg string) (*proc, string) {
				dir := udsDir(t)
				cmd := exec.Command(vertexBin, "serve", "--role", "map", "-f", writeConfig(t, cfg), "--uds-dir", dir,
					"--addr", "127.0.0.1:0", "--log-level", "debug")
				cmd.Env = append(os.Environ(), "SLUICE_MAP_MODE="+mode)
				return startCmd(t, cmd), dir
			})
		})
	}
}

// stopServed stops each of procs with SIGTERM and fails the test unless it
// exits 0.
func stopServed(t *testing.T, procs ...*proc) {
	t.Helper()
	for _, p := range procs {
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
	}
}

// TestServeLimitsPerKey serves a map, unary and batch, at most 20 messages
// a second per key (perKey.max) under a vertex limit of 1000 it never
// reaches, and maps through it at once, each key on a stream of its own,
// 160 messages of a hot key, 80 at a time, and 60 of each of four cold
// keys, 5 every half second (10 a second, half their limit): every request comes back once,
// with its own payload; no key is granted more than 20 in any epoch; the
// hot key's 160 take more than 6 seconds (8 epochs); and the cold keys are
// not starved by the hot key's backlog: no batch of theirs waits 2 seconds
// for its answer, and each key's 60 are granted within 8 epochs of the 6
// seconds they are sent over.
func TestServeLimitsPerKey(t *testing.T) {
	t.Parallel()
	mapModes(t, testServeLimitsPerKey)
}

func testServeLimitsPerKey(t *testing.T, serve func(cfg string) (*proc, string)) {
	const perKey, hot, cold, colds = 20, 160, 60, 4
	p, dir := serve(serveLimitsConfig("serve-limits-perkey", 10, `      max: 1000
      min: 1000
      rampUpDuration: 0s
      perKey:
        max: 20
`))
	keyed := func(key string, n int) []isb.Message {
		out := make([]isb.Message, n)
		for i := range out {
			id := key + "-" + strconv.Itoa(i)
			out[i] = isb.Message{ID: id, Keys: []string{key}, Value: []byte("payload of " + id), EventTime: time.UnixMilli(int64(1000 + i))}
		}
		return out
	}
	streams := []stream{{"hot", keyed("hot", hot), hot / 2, 0}}
	for i := 1; i <= colds; i++ {
		k := "cold-" + strconv.Itoa(i)
		streams = append(streams, stream{k, keyed(k, cold), 5, 500 * time.Millisecond})
	}
	began := time.Now()
	sent, answered := mapStreams(t, dir, streams)
	hotTook := last(answered[0]).Sub(began)
	stopServed(t, p)

	byKey := keyEpochs(t, []*proc{p})
	span := map[string][]int64{} // the epochs that granted each key
	for _, e := range slices.Sorted(maps.Keys(byKey)) {
		var row []string
		for _, k := range slices.Sorted(maps.Keys(byKey[e])) {
			n := byKey[e][k]
			if n > perKey {
				t.Errorf("epoch %d: key %s granted %d; perKey.max %d", e, k, n, perKey)
			}
			if n > 0 {
				span[k] = append(span[k], e)
			}
			row = append(row, fmt.Sprintf("%s=%d", k, n))
		}
		t.Logf("epoch %d: %s", e, strings.Join(row, " "))
	}
	granted := func(k string) (n int64) {
		for _, e := range span[k] {
			n += byKey[e][k]
		}
		return n
	}
	if g := granted("hot"); g < hot {
		t.Errorf("the hot key was granted %d over the run; it sent %d", g, hot)
	}
	// At most 20 an epoch, 160 take 8 epochs: the last begins more than
	// 6 seconds after the first request.
	if want := time.Duration(hot/perKey-2) * time.Second; hotTook < want {
		t.Errorf("the hot key's %d messages at %d a second were answered in %v; want more than %v", hot, perKey, hotTook, want)
	}
	t.Logf("the hot key: %d messages answered in %v, granted in %d epochs", hot, hotTook.Round(time.Millisecond), len(span["hot"]))
	for i, s := range streams[1:] {
		k := s.name
		var waits []time.Duration
		for j := 0; j < len(s.msgs); j += s.batch {
			waits = append(waits, answered[i+1][j].Sub(sent[i+1][j]))
		}
		slices.Sort(waits)
		worst := waits[len(waits)-1]
		t.Logf("key %s beside the hot key: a batch's answer in %v (median), %v at worst; granted in %d epochs",
			k, waits[len(waits)/2].Round(time.Millisecond), worst.Round(time.Millisecond), len(span[k]))
		if worst >= 2*time.Second {
			t.Errorf("key %s, under its limit, waited %v for a batch's answer beside the hot key; want under 2s (waits %v)", k, worst, waits)
		}
		if g := granted(k); g < cold {
			t.Errorf("key %s was granted %d over the run; it sent %d", k, g, cold)
		}
		if e := span[k]; len(e) == 0 || e[len(e)-1]-e[0]+1 > 8 {
			t.Errorf("key %s, sent over 6 seconds beside the hot key, was granted in epochs %v; want within 8", k, e)
		}
	}
	mostReach(t, "the hot key at its limit", inner(span["hot"]), perKey, 3, func(e int64) int64 { return byKey[e]["hot"] })
}

// TestServeLimitsBytes serves a map, unary and batch, at most 4000 payload
// bytes a second (bytes.max) under a message limit of 1000 it never
// reaches, and maps 100 messages of 100, 200 and 300 bytes in turn (19,900
// bytes) through it:
// every request comes back once, with its own payload; no epoch grants
// more than 4000 bytes; the byte limit was paid for every message; the 100
// take more than 3 seconds (5 epochs' bytes); and most epochs between the
// first and the last grant at least 2500 bytes (4000 less up to one read
// batch's 1500 that did not fit).
func TestServeLimitsBytes(t *testing.T) {
	t.Parallel()
	mapModes(t, testServeLimitsBytes)
}

func testServeLimitsBytes(t *testing.T, serve func(cfg string) (*proc, string)) {
	const n, maxBytes, batch = 100, 4000, 5
	p, dir := serve(serveLimitsConfig("serve-limits-bytes", batch, fmt.Sprintf(`      max: 1000
      min: 1000
      rampUpDuration: 0s
      bytes:
        max: %d
        min: %d
`, maxBytes, maxBytes)))
	msgs := make([]isb.Message, n)
	total := 0
	for i := range msgs {
		size := 100 * (1 + i%3)
		v := bytes.Repeat([]byte{'a' + byte(i%26)}, size)
		copy(v, strconv.Itoa(i)+":")
		msgs[i] = isb.Message{ID: "b" + strconv.Itoa(i), Keys: []string{"k"}, Value: v, EventTime: time.UnixMilli(int64(1000 + i))}
		total += size
	}
	began := time.Now()
	_, at := mapStreams(t, dir, []stream{{"bytes", msgs, 20, 0}})
	took := last(at[0]).Sub(began)
	stopServed(t, p)

	granted, _ := limitEpochs(t, []*proc{p}, "ratelimit.bytes")
	figures, busy := checkPerEpoch(t, "the byte limit", granted, maxBytes)
	t.Logf("bytes granted a second: %s; %d messages of %d bytes answered in %v", figures, n, total, took.Round(time.Millisecond))
	var sum int64
	for _, g := range granted {
		sum += g
	}
	if sum < int64(total) {
		t.Errorf("the byte limit granted %d bytes over the run; the messages carry %d", sum, total)
	}
	epochsNeeded := (total + maxBytes - 1) / maxBytes
	if want := time.Duration(epochsNeeded-2) * time.Second; took < want {
		t.Errorf("%d bytes at %d a second were answered in %v; want more than %v", total, maxBytes, took, want)
	}
	mostReach(t, "the byte limit at 4000 less a batch", inner(busy), maxBytes-batch*300, 2, func(e int64) int64 { return granted[e] })
}

// TestServeLimitsCost serves a map, unary and batch, whose messages each
// cost what an expression says, at most 60 cost units a second: a cost
// from a header ("weight", 1 to 5) and one from the payload (a unit a
// started 100 bytes, payloads of 100 to 500 bytes). 100 messages of 3 units on average (300
// units) go through each: every request comes back once, with its own
// payload; no epoch grants more than 60 units; the limit was paid the
// messages' 300; they take more than 3 seconds (5 epochs' units); and most
// epochs between the first and the last grant at least 35 units (60 less up
// to one read batch's 25 that did not fit).
func TestServeLimitsCost(t *testing.T) {
	t.Parallel()
	const n, max, batch = 100, 60, 5
	for _, tc := range []struct {
		name, cost string
		msg        func(i int) isb.Message // of cost 1 + i%5
	}{
		{"header", `'"weight" in headers ? int(headers["weight"]) : 1'`, func(i int) isb.Message {
			return isb.Message{Value: []byte("weighed " + strconv.Itoa(i)), Headers: map[string]string{"weight": strconv.Itoa(1 + i%5)}}
		}},
		{"payload", `"len(payload) / 100"`, func(i int) isb.Message {
			v := bytes.Repeat([]byte{'p'}, 100*(1+i%5))
			copy(v, strconv.Itoa(i)+":")
			return isb.Message{Value: v}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mapModes(t, func(t *testing.T, serve func(cfg string) (*proc, string)) {
				p, dir := serve(serveLimitsConfig("serve-limits-cost-"+tc.name, batch, fmt.Sprintf(`      max: %d
      min: %d
      rampUpDuration: 0s
      cost: %s
`, max, max, tc.cost)))
				msgs := make([]isb.Message, n)
				units := 0
				for i := range msgs {
					msgs[i] = tc.msg(i)
					msgs[i].ID, msgs[i].Keys, msgs[i].EventTime = "c"+strconv.Itoa(i), []string{"k"}, time.UnixMilli(int64(1000+i))
					units += 1 + i%5
				}
				began := time.Now()
				_, at := mapStreams(t, dir, []stream{{tc.name, msgs, 20, 0}})
				took := last(at[0]).Sub(began)
				stopServed(t, p)

				granted, _ := limitEpochs(t, []*proc{p}, "")
				figures, busy := checkPerEpoch(t, "the cost limit", granted, max)
				t.Logf("cost units granted a second: %s; %d messages of %d units answered in %v", figures, n, units, took.Round(time.Millisecond))
				var sum int64
				for _, g := range granted {
					sum += g
				}
				if sum < int64(units) {
					t.Errorf("the limit granted %d units over the run; the messages cost %d", sum, units)
				}
				epochsNeeded := (units + max - 1) / max
				if want := time.Duration(epochsNeeded-2) * time.Second; took < want {
					t.Errorf("%d units at %d a second were answered in %v; want more than %v", units, max, took, want)
				}
				mostReach(t, "the cost limit at 60 less a batch", inner(busy), max-batch*5, 2, func(e int64) int64 { return granted[e] })
			})
		})
	}
}

// TestServeLimitsGroup serves a map and a sink of two vertices, each
// limited to 40 a second of its own, in one group of 40 a second shared
// through a real redis-server: the map driven by sluice's map client, the
// sink the udsink of a `vertex run` MonoVertex whose generator makes more
// than it may take, both always with more to send. The group never grants
// more than 40 in an epoch over both; in the epochs with both in the group
// it grants 36 or more in most; and each of the two takes at least a
// quarter of what the group granted there: both make progress. Every map
// request comes back once, with its own payload.
func TestServeLimitsGroup(t *testing.T) {
	t.Parallel()
	const groupMax = 40
	g := serveGroup(t, groupMax, 10, 2000)
	figures, _ := checkPerEpoch(t, "the group over the map and the sink", g.sum, groupMax)
	mapTook, sinkTook, rows := g.split()
	t.Logf("the group a second, over both: %s; in the %d epochs with both in it, map+sink: %s; %d map requests answered",
		figures, len(g.epochs), rows, g.answered)
	if len(g.epochs) < 5 {
		t.Fatalf("%d epochs with both servers in the group; want at least 5", len(g.epochs))
	}
	mostReach(t, "the group with both in it, at 90% of 40", inner(g.epochs), groupMax*9/10, 3, func(e int64) int64 { return g.sum[e] })
	if total := mapTook + sinkTook; mapTook*4 < total || sinkTook*4 < total {
		t.Errorf("of the group's %d with both in it the map took %d and the sink %d; want each at least a quarter", total, mapTook, sinkTook)
	}
	if g.answered == 0 {
		t.Error("no map request answered")
	}
}

// TestServeLimitsGroupIdleLends serves the map and the sink of
// TestServeLimitsGroup, the map reading 50 at a time (more than its share
// of 20) and sent nothing: the idle map lends its share, less its reserve
// (10%) and the token its waiting read holds, so the busy sink gets 36 or
// more of the group's 40 in most epochs with both in it, and the group
// never grants more than 40.
func TestServeLimitsGroupIdleLends(t *testing.T) {
	t.Parallel()
	const groupMax = 40
	g := serveGroup(t, groupMax, 50, 0)
	figures, _ := checkPerEpoch(t, "the group over the map and the sink", g.sum, groupMax)
	_, _, rows := g.split()
	t.Logf("the group a second, over both: %s; in the %d epochs with both in it, map+sink: %s", figures, len(g.epochs), rows)
	if len(g.epochs) < 5 {
		t.Fatalf("%d epochs with both servers in the group; want at least 5", len(g.epochs))
	}
	mostReach(t, "the busy sink beside the idle map, at 90% of the group's 40", inner(g.epochs), groupMax*9/10, 3,
		func(e int64) int64 { return g.each[1][e].Granted })
}

// servedGroup is what a run of serveGroup logged: the epochs with both the
// map and the sink in the group, what the group granted by epoch over both
// and each one's epochs (the map's, then the sink's), and how many map
// requests were answered.
type servedGroup struct {
	epochs   []int64
	sum      map[int64]int64
	each     []map[int64]epochLog
	answered int
}

// split returns what the map and the sink took of the group in g.epochs,
// and their grants side by side.
func (g servedGroup) split() (mapTook, sinkTook int64, rows string) {
	var r []string
	for _, e := range g.epochs {
		m, s := g.each[0][e].Granted, g.each[1][e].Granted
		mapTook, sinkTook = mapTook+m, sinkTook+s
		r = append(r, fmt.Sprintf("%d+%d", m, s))
	}
	return mapTook, sinkTook, strings.Join(r, " ")
}

// serveGroup serves a map reading mapBatch at a time and a sink, each of
// its own vertex at most groupMax a second and both in one group of
// groupMax through a redis-server; a `vertex run` MonoVertex sends the sink
// more than it may take, and sluice's map client sends the map n messages,
// 10 at a time, until 7 epochs with both in the group are logged. It stops
// them all (exit 0) and returns what they logged.
func serveGroup(t *testing.T, groupMax, mapBatch, n int) servedGroup {
	t.Helper()
	rs := redistest.Start(t, redistest.Options{})
	limit := fmt.Sprintf(`      max: %d
      min: %d
      rampUpDuration: 0s
      groups:
        - {name: serve-limits-shared, max: %d, min: %d, rampUpDuration: 0s}
      store:
        redisStore:
          mode: single
          url: redis://%s
`, groupMax, groupMax, groupMax, groupMax, rs.Addr)
	mapProc, mapDir := startServeMap(t, serveLimitsConfig("serve-limits-group-map", mapBatch, limit))
	sinkDir := udsDir(t)
	sinkProc := start(t, "serve", "--role", "sink", "-f", writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: serve-limits-group-sink
spec:
  limits:
    readTimeout: 100ms
    rateLimit:
`+limit+`  source:
    generator: {}
  sink:
    blackhole: {}
`), "--uds-dir", sinkDir, "--addr", "127.0.0.1:0", "--log-level", "debug")
	sinkProc.metricsAddr()
	run := start(t, "run", "-f", writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: serve-limits-group-run
spec:
  limits:
    readBatchSize: 10
    readTimeout: 100ms
  source:
    generator:
      rpu: 200
  sink:
    udsink:
`+udContainer("      ", "", nil)), "--uds-dir", sinkDir, "--metrics-addr", "127.0.0.1:0")
	run.metricsAddr()

	procs := []*proc{mapProc, sinkProc}
	read := func() servedGroup {
		sum, each := limitEpochs(t, procs, "ratelimit.group.serve-limits-shared")
		g := servedGroup{sum: sum, each: each}
		for e := range sum {
			m, s := each[0][e], each[1][e]
			if m.Eligible && s.Eligible && m.Replicas == 2 && s.Replicas == 2 {
				g.epochs = append(g.epochs, e)
			}
		}
		slices.Sort(g.epochs)
		return g
	}
	msgs := make([]isb.Message, n)
	for i := range msgs {
		msgs[i] = isb.Message{ID: "g" + strconv.Itoa(i), Keys: []string{"k"}, Value: []byte("grouped " + strconv.Itoa(i)),
			EventTime: time.UnixMilli(int64(1000 + i))}
	}
	stop := make(chan struct{})
	var at []time.Time
	var mapErr error
	mapped := make(chan struct{})
	go func() {
		defer close(mapped)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		_, at, mapErr = mapStream(ctx, mapDir, msgs, 10, 0, stop)
	}()
	runtest.WaitFor(t, "7 epochs with the map and the sink in the group", func() bool { return len(read().epochs) >= 7 }, untilEpochs...)
	close(stop)
	<-mapped
	if mapErr != nil {
		t.Fatalf("the map's stream: %v", mapErr)
	}
	stopServed(t, run, sinkProc, mapProc)
	g := read()
	for _, a := range at {
		if !a.IsZero() {
			g.answered++
		}
	}
	return g
}

// TestServeLimitsSinkPerKey serves a sink at most 20 messages a second per
// key, the udsink of a `vertex run` MonoVertex whose generator makes 80 a
// second of a hot key and 20 of each of two cold keys, read 12 at a time:
// no key is granted more than 20 in any epoch, the hot key gets its 20 in
// most, the cold keys go on in most, and every message the sink wrote is a
// generator value once. A batch of the sink protocol is answered once all
// its messages are written, and the runtime sends the next batch then, so
// the hot key's messages held in a batch hold up the cold ones read with
// them: the cold keys get what comes beside the hot key's 20 (4 to 6 a
// second here, of the 20 the generator makes).
func TestServeLimitsSinkPerKey(t *testing.T) {
	t.Parallel()
	const perKey = 20
	dir := udsDir(t)
	sink := start(t, "serve", "--role", "sink", "-f", writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: serve-limits-sink-perkey
spec:
  limits:
    readTimeout: 100ms
    rateLimit:
      max: 1000
      min: 1000
      rampUpDuration: 0s
      perKey:
        max: 20
  source:
    generator: {}
  sink:
    log: {}
`), "--uds-dir", dir, "--addr", "127.0.0.1:0", "--log-level", "debug")
	sink.metricsAddr()
	run := start(t, "run", "-f", writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: serve-limits-sink-run
spec:
  limits:
    readBatchSize: 12
    readTimeout: 100ms
  source:
    generator:
      rpu: 120
      duration: 1s
      keys: [hot, hot, hot, hot, cold-1, cold-2]
  sink:
    udsink:
`+udContainer("      ", "", nil)), "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0")
	run.metricsAddr()
	runtest.WaitFor(t, "8 seconds of per-key epochs", func() bool { return len(keyEpochs(t, []*proc{sink})) >= 8 }, untilEpochs...)
	stopServed(t, run, sink)

	byKey := keyEpochs(t, []*proc{sink})
	epochs := slices.Sorted(maps.Keys(byKey))
	for _, e := range epochs {
		var row []string
		for _, k := range slices.Sorted(maps.Keys(byKey[e])) {
			if n := byKey[e][k]; n > perKey {
				t.Errorf("epoch %d: key %s granted %d; perKey.max %d", e, k, n, perKey)
			}
			row = append(row, fmt.Sprintf("%s=%d", k, byKey[e][k]))
		}
		t.Logf("epoch %d: %s", e, strings.Join(row, " "))
	}
	written := generatorValues(t, sink)
	t.Logf("%d messages written by the served sink", written)
	mostReach(t, "the hot key at its limit", inner(epochs), perKey, 3, func(e int64) int64 { return byKey[e]["hot"] })
	for _, k := range []string{"cold-1", "cold-2"} {
		mostReach(t, k+" going on beside the hot key", inner(epochs), 1, 3, func(e int64) int64 { return byKey[e][k] })
	}
}
