package reduce

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
	"github.com/sluiceflow/sluice/pkg/sdk/sessionreducer"
	"github.com/sluiceflow/sluice/pkg/udf/reduceclient"
	"github.com/sluiceflow/sluice/pkg/udf/sessionreduceclient"
)

// TestRemoteCount reduces keyed fixed windows with a counter served over a
// unix socket by sluice's SDK, and gets what the built-in count gets; a
// result the function tags to be dropped is left out.
func TestRemoteCount(t *testing.T) {
	dir, err := os.MkdirTemp("", "rd") // short, for the socket's path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	count := func(_ context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
		n := 0
		for range in {
			n++
		}
		if keys[0] == "drop" {
			return reducer.Messages{reducer.MessageToDrop()}
		}
		return reducer.Messages{reducer.NewMessage([]byte(strconv.Itoa(n))).WithKeys(keys)}
	}
	go func() { served <- reducer.NewServer(reducer.ReducerFunc(count), reducer.WithSocketDir(dir)).Start(ctx) }()
	t.Cleanup(func() { stop(); <-served })
	c, err := reduceclient.New(dir, serverinfo.KindReduce, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}

	s, _ := window.Fixed(10 * time.Second)
	remote, err := New(Config{Strategy: s, Keyed: true, Reducer: Remote(c, func() time.Time { return time.Unix(100, 0) })})
	if err != nil {
		t.Fatal(err)
	}
	local := newCounter(t, nil)
	msgs := []isb.Message{msg("1", "a", 101), msg("2", "b", 102), msg("3", "a", 109), msg("4", "drop", 103), msg("5", "a", 111)}
	for _, p := range []*Processor{remote, local} {
		if _, err := p.Add(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	got, err := remote.Advance(ctx, time.Unix(120, 0))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := local.Advance(ctx, time.Unix(120, 0))
	want = slicesDeleteKey(want, "drop")
	if text(got) != text(want) {
		t.Errorf("remote %q; built-in %q", text(got), text(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID {
			t.Errorf("result %d: ID %q, built-in %q", i, got[i].ID, want[i].ID)
		}
	}
}

func slicesDeleteKey(msgs []isb.Message, key string) []isb.Message {
	out := msgs[:0]
	for _, m := range msgs {
		if len(m.Keys) == 0 || m.Keys[0] != key {
			out = append(out, m)
		}
	}
	return out
}

// sessionCount counts a session's messages; a session of the key "drop"
// gives a result to be dropped.
type sessionCount struct{ n atomic.Int64 }

func (c *sessionCount) SessionReduce(_ context.Context, keys []string, in <-chan sessionreducer.Datum) sessionreducer.Messages {
	for range in {
		c.n.Add(1)
	}
	if keys[0] == "drop" {
		return sessionreducer.Messages{sessionreducer.MessageToDrop()}
	}
	return sessionreducer.Messages{sessionreducer.NewMessage([]byte(strconv.FormatInt(c.n.Load(), 10))).WithKeys(keys)}
}

// Accumulator and MergeAccumulator carry a merged session's count into the
// session it merges into.
func (c *sessionCount) Accumulator(context.Context) []byte {
	return strconv.AppendInt(nil, c.n.Load(), 10)
}

func (c *sessionCount) MergeAccumulator(_ context.Context, acc []byte) {
	n, _ := strconv.ParseInt(string(acc), 10, 64)
	c.n.Add(n)
}

// TestRemoteSessionCount reduces keyed sessions with a session counter
// served by sluice's SDK, and gets what the built-in count gets.
func TestRemoteSessionCount(t *testing.T) {
	dir, err := os.MkdirTemp("", "rs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	srv := sessionreducer.NewServer(sessionreducer.CreatorFunc(func() sessionreducer.SessionReducer { return &sessionCount{} }),
		sessionreducer.WithSocketDir(dir), sessionreducer.WithShutdownTimeout(100*time.Millisecond))
	go func() { served <- srv.Start(ctx) }()
	t.Cleanup(func() { stop(); <-served })
	c := sessionreduceclient.New(dir, nil)
	t.Cleanup(func() { c.Close() })
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ := window.Session(5 * time.Second)
	remote, err := New(Config{Strategy: s, Keyed: true, Reducer: RemoteSession(c, nil)})
	if err != nil {
		t.Fatal(err)
	}
	local := newSessionCounter(t, nil)
	msgs := []isb.Message{msg("1", "a", 100), msg("2", "b", 100), msg("3", "a", 109), msg("4", "drop", 103),
		msg("5", "a", 104), msg("6", "b", 107), msg("7", "a", 120)}
	for _, p := range []*Processor{remote, local} {
		if _, err := p.Add(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	got, err := remote.Advance(ctx, time.Unix(130, 0))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := local.Advance(ctx, time.Unix(130, 0))
	want = slicesDeleteKey(want, "drop")
	if text(got) != text(want) || text(got) != "b=1@104.999 b=1@111.999 a=3@113.999 a=1@124.999" {
		t.Errorf("remote %q; built-in %q", text(got), text(want))
	}
}
