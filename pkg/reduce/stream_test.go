package reduce

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udstest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/sdk/reducestreamer"
	"github.com/sluiceflow/sluice/pkg/udf/reduceclient"
)

// byTwos is a reduce streamer that sends "2" each time its window and keys
// have had two more messages, at once, and "end:<the rest>" when the window
// ends.
func byTwos(_ context.Context, keys []string, in <-chan reducestreamer.Datum, out chan<- reducestreamer.Message, _ reducestreamer.Metadata) {
	n := 0
	for range in {
		if n++; n == 2 {
			out <- reducestreamer.NewMessage([]byte("2")).WithKeys(keys)
			n = 0
		}
	}
	out <- reducestreamer.NewMessage([]byte("end:" + strconv.Itoa(n))).WithKeys(keys)
}

// serveByTwos serves byTwos in dir until the returned stop, at the latest
// when the test ends.
func serveByTwos(t *testing.T, dir string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	srv := reducestreamer.NewServer(reducestreamer.ReduceStreamerFunc(byTwos), reducestreamer.WithSocketDir(dir),
		reducestreamer.WithShutdownTimeout(100*time.Millisecond))
	go func() { served <- srv.Start(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-served
		}
	}
	t.Cleanup(stop)
	return stop
}

// streamerClient returns a connected client of the reduce-stream server in
// dir, closed when the test ends.
func streamerClient(t *testing.T, dir string) *reduceclient.Client {
	t.Helper()
	c, err := reduceclient.New(dir, serverinfo.KindReduceStream, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), runtest.Timeout)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// newStreamer returns a Processor of keyed fixed 10 s windows whose
// function is the reduce streamer c serves, logged in log (nil: none).
func newStreamer(t *testing.T, c *reduceclient.Client, log *wal.Log) *Processor {
	t.Helper()
	rs := RemoteStream(c, nil)
	t.Cleanup(func() { rs.Close() })
	s, _ := window.Fixed(10 * time.Second)
	p, err := New(Config{Strategy: s, Keyed: true, Reducer: rs, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// withIDs is text with each result's ID.
func withIDs(res []isb.Message) string {
	var out []string
	for i, r := range res {
		out = append(out, text(res[i:i+1])+" "+r.ID)
	}
	return strings.Join(out, "; ")
}

// advanceUntil advances p to sec until it has returned n results in all,
// and returns them; it fails the test on more, or after runtest.Timeout.
func advanceUntil(t *testing.T, p *Processor, sec int64, n int) []isb.Message {
	t.Helper()
	var got []isb.Message
	runtest.WaitFor(t, strconv.Itoa(n)+" results", func() bool {
		got = append(got, advance(t, p, sec)...)
		return len(got) >= n
	})
	if len(got) != n {
		t.Fatalf("results %s; want %d", withIDs(got), n)
	}
	return got
}

// TestStreamerEarly sends each message to the reduce streamer as it is
// added: what the function sends comes out of Advance while the window is
// open, numbered in the order sent, and the rest when the watermark closes
// the window.
func TestStreamerEarly(t *testing.T) {
	dir := udstest.SocketDir(t, "rs")
	serveByTwos(t, dir)
	p := newStreamer(t, streamerClient(t, dir), nil)
	add(t, p, msg("1", "a", 101), msg("2", "b", 102), msg("3", "a", 103))
	if got := withIDs(advanceUntil(t, p, 105, 1)); got != "a=2@109.999 100000-110000-1:a-0" {
		t.Errorf("while open: %s", got)
	}
	add(t, p, msg("4", "a", 104), msg("5", "a", 105), msg("6", "b", 112))
	if got := withIDs(advanceUntil(t, p, 105, 1)); got != "a=2@109.999 100000-110000-1:a-1" {
		t.Errorf("while open, two more: %s", got)
	}
	if p.Open() != 2 {
		t.Errorf("%d windows open; want 2", p.Open())
	}
	if got := withIDs(advance(t, p, 110)); got != "a=end:0@109.999 100000-110000-1:a-2; b=end:1@109.999 100000-110000-1:b-0" {
		t.Errorf("at the close: %s", got)
	}
	if got := withIDs(advance(t, p, 120)); got != "b=end:1@119.999 110000-120000-1:b-0" {
		t.Errorf("the next window's close: %s", got)
	}
}

// TestStreamerSentAgain restarts the processor on its log, and, apart,
// the server mid-window: the open windows go to the server again, whose
// functions send their early results again, with the same IDs (at least
// once downstream), and the windows close with the results of a run
// without the restart.
func TestStreamerSentAgain(t *testing.T) {
	t.Run("restart", func(t *testing.T) {
		dir := udstest.SocketDir(t, "rs")
		serveByTwos(t, dir)
		c := streamerClient(t, dir)
		logDir := t.TempDir()
		l, err := wal.Open(logDir, wal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p := newStreamer(t, c, l)
		add(t, p, msg("1", "a", 101), msg("2", "a", 102), msg("3", "a", 103))
		if got := withIDs(advanceUntil(t, p, 105, 1)); got != "a=2@109.999 100000-110000-1:a-0" {
			t.Errorf("before the restart: %s", got)
		}
		l.Close()
		if l, err = wal.Open(logDir, wal.Options{}); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		p = newStreamer(t, c, l)
		if n, err := p.Recover(); err != nil || n != 3 {
			t.Fatalf("Recover: %d, %v; want the window's 3 messages", n, err)
		}
		if got := withIDs(advanceUntil(t, p, 105, 1)); got != "a=2@109.999 100000-110000-1:a-0" {
			t.Errorf("after the restart: %s", got)
		}
		add(t, p, msg("4", "a", 104))
		if got := withIDs(advanceUntil(t, p, 105, 1)); got != "a=2@109.999 100000-110000-1:a-1" {
			t.Errorf("after the restart, one more: %s", got)
		}
		if got := withIDs(advance(t, p, 110)); got != "a=end:0@109.999 100000-110000-1:a-2" {
			t.Errorf("at the close: %s", got)
		}
	})
	t.Run("server restarted", func(t *testing.T) {
		dir := udstest.SocketDir(t, "rs")
		stop := serveByTwos(t, dir)
		p := newStreamer(t, streamerClient(t, dir), nil)
		add(t, p, msg("1", "a", 101), msg("2", "a", 102), msg("3", "a", 103))
		if got := withIDs(advanceUntil(t, p, 105, 1)); got != "a=2@109.999 100000-110000-1:a-0" {
			t.Errorf("before the server's restart: %s", got)
		}
		stop()
		serveByTwos(t, dir)
		streamerClient(t, dir) // the new server is up
		add(t, p, msg("4", "a", 104))
		// The old stream's failure shows on a Send or at a Take; the
		// window goes again either way, its early result with it.
		got := advanceUntil(t, p, 105, 2)
		if withIDs(got) != "a=2@109.999 100000-110000-1:a-0; a=2@109.999 100000-110000-1:a-1" {
			t.Errorf("after the server's restart: %s", withIDs(got))
		}
		if got := withIDs(advance(t, p, 110)); got != "a=end:0@109.999 100000-110000-1:a-2" {
			t.Errorf("at the close: %s", got)
		}
	})
}

// TestLoopWritesStreamedResults runs a reader on the manual clock with a
// reduce streamer: what the function sends is written while its window is
// open, at the reader's next turn, and the rest when the watermark closes
// the window; the window's messages stay in the log until then.
func TestLoopWritesStreamedResults(t *testing.T) {
	dir := udstest.SocketDir(t, "rs")
	serveByTwos(t, dir)
	clk := clock.NewManual(time.Unix(1000, 0))
	in := memory.New("in", 100, 5*time.Millisecond, clk)
	out := memory.New("out", 100, 5*time.Millisecond, clk)
	l, err := wal.Open(t.TempDir(), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := newStreamer(t, streamerClient(t, dir), l)
	var wm watermark
	wm.set(100)
	loop := &Loop{Reader: in, Writer: out, Processor: p, Watermark: wm.get, Limiter: throttle.Noop{}, BatchSize: 10, Clock: clk}
	run := runtest.Start(t, loop)
	// turnsUntil lets the reader take turns, each a read that times out on
	// the clock, until out holds n results.
	ctx := context.Background()
	turnsUntil := func(n int) {
		t.Helper()
		deadline := time.Now().Add(runtest.Timeout)
		for len(out.Messages()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d results written; want %d", len(out.Messages()), n)
			}
			wctx, cancel := context.WithTimeout(ctx, runtest.Timeout)
			err := clk.BlockUntil(wctx, 1) // the reader waits in a read
			cancel()
			if err != nil {
				t.Fatal("the reader does not read")
			}
			clk.Advance(5 * time.Millisecond)
		}
	}
	msgs := []isb.Message{msg("1", "a", 101), msg("2", "a", 102), msg("3", "a", 103)}
	if err := in.Write(ctx, msgs, make([]error, len(msgs))); err != nil {
		t.Fatal(err)
	}
	turnsUntil(1)
	if got := withIDs(out.Messages()); got != "a=2@109.999 100000-110000-1:a-0" {
		t.Errorf("written while the window is open: %s", got)
	}
	bctx, cancel := context.WithTimeout(ctx, runtest.Timeout)
	defer cancel()
	if err := clk.BlockUntil(bctx, 1); err != nil {
		t.Fatal("the reader does not read")
	}
	if p.Open() != 1 || in.Stats().Pending != 0 {
		t.Errorf("%d windows open, %d messages pending; want the window open and every message read", p.Open(), in.Stats().Pending)
	}
	if segs := l.Segments(); len(segs) != 1 || segs[0].Last == 0 {
		t.Errorf("log segments %+v; want the window's", segs)
	}
	wm.set(110)
	turnsUntil(2)
	if got := withIDs(out.Messages()); got != "a=2@109.999 100000-110000-1:a-0; a=end:1@109.999 100000-110000-1:a-1" {
		t.Errorf("written by the close: %s", got)
	}
	if err := run.Stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if p.Open() != 0 {
		t.Errorf("%d windows open after the close", p.Open())
	}
	for _, s := range l.Segments() {
		if s.Last != 0 {
			t.Errorf("log segment %+v kept after the window's close", s)
		}
	}
}
