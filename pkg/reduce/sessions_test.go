package reduce

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/sdk/sessionreducer"
	"github.com/sluiceflow/sluice/pkg/udf/sessionreduceclient"
)

// recorder is a SessionReducer that notes each call, then makes it.
type recorder struct {
	SessionReducer
	ops []string
}

func secs(w window.Window) string { return fmt.Sprintf("[%d,%d)", w.Start.Unix(), w.End.Unix()) }

func (r *recorder) note(op string, keys []string, ws []window.Window, m *isb.Message) {
	s := op + " " + strings.Join(keys, ",")
	for _, w := range ws {
		s += " " + secs(w)
	}
	if m != nil {
		s += " #" + m.ID
	}
	r.ops = append(r.ops, s)
}

func (r *recorder) Open(ctx context.Context, keys []string, w window.Window, m isb.Message) error {
	r.note("open", keys, []window.Window{w}, &m)
	return r.SessionReducer.Open(ctx, keys, w, m)
}

func (r *recorder) Append(ctx context.Context, keys []string, w window.Window, m isb.Message) error {
	r.note("append", keys, []window.Window{w}, &m)
	return r.SessionReducer.Append(ctx, keys, w, m)
}

func (r *recorder) Expand(ctx context.Context, keys []string, old, to window.Window, m isb.Message) error {
	r.note("expand", keys, []window.Window{old, to}, &m)
	return r.SessionReducer.Expand(ctx, keys, old, to, m)
}

func (r *recorder) Merge(ctx context.Context, keys []string, ws []window.Window) error {
	r.note("merge", keys, ws, nil)
	return r.SessionReducer.Merge(ctx, keys, ws)
}

func (r *recorder) Reduce(ctx context.Context, w window.Window, keys []string, msgs []isb.Message) ([]isb.Message, error) {
	r.note("close", keys, []window.Window{w}, nil)
	return r.SessionReducer.Reduce(ctx, w, keys, msgs)
}

// serveSessionCount serves sessionCount in dir until the returned stop.
func serveSessionCount(t *testing.T, dir string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	srv := sessionreducer.NewServer(sessionreducer.CreatorFunc(func() sessionreducer.SessionReducer { return &sessionCount{} }),
		sessionreducer.WithSocketDir(dir), sessionreducer.WithShutdownTimeout(100*time.Millisecond))
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

// sessionClient serves sessionCount in a new directory and returns it, and
// a connected client of it.
func sessionClient(t *testing.T) (dir string, c *sessionreduceclient.Client, stop func()) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ls") // short, for the socket's path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	stop = serveSessionCount(t, dir)
	return dir, connect(t, dir), stop
}

func connect(t *testing.T, dir string) *sessionreduceclient.Client {
	t.Helper()
	c := sessionreduceclient.New(dir, nil)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func newRemoteSessionCounter(t *testing.T, c *sessionreduceclient.Client, log *wal.Log) (*Processor, *recorder) {
	t.Helper()
	s, _ := window.Session(5 * time.Second)
	r := &recorder{SessionReducer: RemoteSession(c, nil)}
	p, err := New(Config{Strategy: s, Keyed: true, Reducer: r, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return p, r
}

// sessionInput opens, appends to, expands and merges sessions of a, and opens
// one of b.
var sessionInput = []isb.Message{
	msg("1", "a", 100), // open [100,105)
	msg("2", "a", 102), // expand to [100,107)
	msg("3", "a", 101), // append
	msg("4", "a", 112), // open [112,117)
	msg("5", "b", 103), // open b's [103,108)
	msg("6", "a", 107), // merge [100,107) and [112,117), append
	msg("7", "a", 111), // append
}

// TestRemoteSessionOperations sends each session's operations to a session
// counter served by sluice's SDK as messages are added, closes the
// sessions as the watermark passes them, and gets what the built-in count
// gets.
func TestRemoteSessionOperations(t *testing.T) {
	_, c, _ := sessionClient(t)
	p, r := newRemoteSessionCounter(t, c, nil)
	local := newSessionCounter(t, nil)
	add(t, p, sessionInput...)
	add(t, local, sessionInput...)
	want := []string{
		"open a [100,105) #1",
		"expand a [100,105) [100,107) #2",
		"append a [100,107) #3",
		"open a [112,117) #4",
		"open b [103,108) #5",
		"merge a [100,107) [112,117)",
		"append a [100,117) #6",
		"append a [100,117) #7",
	}
	if got := strings.Join(r.ops, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("operations\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	r.ops = nil
	got, want2 := text(advance(t, p, 130)), text(advance(t, local, 130))
	if got != want2 || got != "b=1@107.999 a=6@116.999" {
		t.Errorf("remote %q; built-in %q", got, want2)
	}
	if ops := strings.Join(r.ops, "; "); ops != "close b [103,108); close a [100,117)" {
		t.Errorf("operations at the watermark: %s", ops)
	}
}

// TestRemoteSessionResent restarts the processor on its log, and,
// separately, the server mid-run: the sessions still open are sent again,
// each opened with its first message and its others appended, before the
// next message's operations, and the results are the built-in count's.
func TestRemoteSessionResent(t *testing.T) {
	resent := []string{ // after sessionInput[:5], sorted
		"append a [100,107) #2",
		"append a [100,107) #3",
		"open a [100,107) #1",
		"open a [112,117) #4",
		"open b [103,108) #5",
	}
	check := func(t *testing.T, r *recorder, p *Processor) {
		t.Helper()
		if len(r.ops) < len(resent)+2 {
			t.Fatalf("operations %q", r.ops)
		}
		got := append([]string(nil), r.ops[:len(resent)]...)
		slices.Sort(got)
		if strings.Join(got, "\n") != strings.Join(resent, "\n") {
			t.Errorf("sent again\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(resent, "\n"))
		}
		if rest := strings.Join(r.ops[len(resent):], "; "); rest != "merge a [100,107) [112,117); append a [100,117) #6; append a [100,117) #7" {
			t.Errorf("then %s", rest)
		}
		if got := text(advance(t, p, 130)); got != "b=1@107.999 a=6@116.999" {
			t.Errorf("results %q", got)
		}
	}
	t.Run("restart", func(t *testing.T) {
		dir, c, _ := sessionClient(t)
		logDir := t.TempDir()
		l, err := wal.Open(logDir, wal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := newRemoteSessionCounter(t, c, l)
		add(t, p, sessionInput[:5]...)
		l.Close()
		if l, err = wal.Open(logDir, wal.Options{}); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		p, r := newRemoteSessionCounter(t, connect(t, dir), l) // a new stream: the server has none of the sessions
		if n, err := p.Recover(); err != nil || n != 5 {
			t.Fatalf("Recover: %d, %v", n, err)
		}
		add(t, p, sessionInput[5:]...)
		check(t, r, p)
	})
	t.Run("server restarted", func(t *testing.T) {
		dir, c, stop := sessionClient(t)
		p, r := newRemoteSessionCounter(t, c, nil)
		add(t, p, sessionInput[:5]...)
		stop()
		serveSessionCount(t, dir)
		connect(t, dir) // the new server is up
		r.ops = nil
		add(t, p, sessionInput[5:]...)
		// The old stream's failure shows on a call now or at the close; the
		// open sessions go again either way, a's merged.
		if got := text(advance(t, p, 130)); got != "b=1@107.999 a=6@116.999" {
			t.Errorf("results %q", got)
		}
		if !slices.Contains(r.ops, "open a [100,117) #1") || !slices.Contains(r.ops, "open b [103,108) #5") {
			t.Errorf("operations %q; want the open sessions sent again", r.ops)
		}
	})
}
