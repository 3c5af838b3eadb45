package jsconsumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// setup starts a server with the stream S on s.> and its durable pull
// consumer C (ack wait ackWait), and returns a connection and the
// JetStream context of another.
func setup(t *testing.T, ackWait time.Duration) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := natstest.Start(t, natstest.Options{})
	js, err := jetstream.New(s.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(testCtx(t), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	_, err = js.CreateConsumer(testCtx(t), "S", jetstream.ConsumerConfig{Durable: "C",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxAckPending: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s.Connect(t), js
}

// words is a DecodeFunc of frames: a message per comma-separated word; a
// body "bad" does not decode.
func words(msg *nats.Msg, out []isb.Message, _ *jsconsumer.Keys) ([]isb.Message, error) {
	if string(msg.Data) == "bad" {
		return out, errors.New("a bad body")
	}
	for w := range strings.SplitSeq(string(msg.Data), ",") {
		out = append(out, isb.Message{ID: w, Value: []byte(w)})
	}
	return out, nil
}

func newConsumer(t *testing.T, nc *nats.Conn, opts jsconsumer.Options) *jsconsumer.Consumer {
	t.Helper()
	if opts.Decode == nil {
		opts.Decode = words
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = 200 * time.Millisecond
	}
	opts.Logger = zaptest.NewLogger(t)
	c, err := jsconsumer.New(nc, "S", "C", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func publish(t *testing.T, js jetstream.JetStream, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := js.Publish(testCtx(t), "s.a", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
}

func info(t *testing.T, js jetstream.JetStream) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := js.Consumer(testCtx(t), "S", "C")
	if err != nil {
		t.Fatal(err)
	}
	return c.CachedInfo()
}

// pullRequests watches, from spy, the pull requests made to consumer C of
// stream S, and returns a func that gives the batch of each one sent so far
// on from, in order.
func pullRequests(t *testing.T, spy, from *nats.Conn) func() []int {
	t.Helper()
	sub, err := spy.SubscribeSync("$JS.API.CONSUMER.MSG.NEXT.S.C")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	var batches []int
	return func() []int {
		t.Helper()
		// The server has routed what from sent before its answer to
		// from's flush, and spy's flush answers after that.
		if err := from.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := spy.Flush(); err != nil {
			t.Fatal(err)
		}
		n, _, err := sub.Pending()
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			msg, err := sub.NextMsg(time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var req struct{ Batch int }
			if err := json.Unmarshal(msg.Data, &req); err != nil {
				t.Fatalf("pull request %q: %v", msg.Data, err)
			}
			batches = append(batches, req.Batch)
		}
		return slices.Clone(batches)
	}
}

func read(t *testing.T, c *jsconsumer.Consumer, n int) []isb.ReadMessage {
	t.Helper()
	buf := make([]isb.ReadMessage, n)
	k, err := c.Read(testCtx(t), buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:k]
}

func ids(msgs []isb.ReadMessage) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}

func numbered(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprint("m", i))
	}
	return out
}

// Without FetchAhead a Consumer asks for no more than a Read has room for;
// with it, a Read that fills its buf asks for one more batch.
func TestFetchAhead(t *testing.T) {
	t.Parallel()
	for _, ahead := range []bool{false, true} {
		t.Run(fmt.Sprint("fetchAhead=", ahead), func(t *testing.T) {
			t.Parallel()
			nc, js := setup(t, time.Minute)
			publish(t, js, numbered(30)...)
			asked := pullRequests(t, js.Conn(), nc)
			c := newConsumer(t, nc, jsconsumer.Options{FetchAhead: ahead})
			if got := ids(read(t, c, 10)); !slices.Equal(got, numbered(10)) {
				t.Fatalf("read %v", got)
			}
			want := []int{10}
			if ahead {
				want = []int{10, 10}
			}
			// Every pull the Read made is sent when it returns: the server
			// can deliver no more than these ask for.
			if got := asked(); !slices.Equal(got, want) {
				t.Fatalf("pulls asked for %v messages, want %v", got, want)
			}
			delivered := 10 * len(want)
			runtest.WaitFor(t, fmt.Sprint(delivered, " delivered"), func() bool { return info(t, js).NumAckPending == delivered })
			if got := ids(read(t, c, 10)); !slices.Equal(got, numbered(20)[10:]) {
				t.Fatalf("second read %v", got)
			}
		})
	}
}

// A frame's messages are returned one by one, never more than asked for;
// the frame is acked once all of them are, and delivered again whole when
// one is nacked.
func TestFrames(t *testing.T) {
	t.Parallel()
	nc, js := setup(t, time.Minute)
	publish(t, js, "a,b,c", "d")
	c := newConsumer(t, nc, jsconsumer.Options{FrameSize: 3})
	first := read(t, c, 2)
	second := read(t, c, 2)
	if got := ids(slices.Concat(first, second)); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("read %v", got)
	}
	if err := c.Ack(testCtx(t), slices.Concat(first, second[1:])); err != nil { // a, b, d
		t.Fatal(err)
	}
	runtest.WaitFor(t, "d acked", func() bool { return info(t, js).NumAckPending == 1 })
	if err := c.Nack(testCtx(t), second[:1], 0); err != nil { // c: the frame comes back
		t.Fatal(err)
	}
	again := read(t, c, 10)
	if got := ids(again); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("read again %v", got)
	}
	if err := c.Ack(testCtx(t), again); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "everything acked", func() bool { return info(t, js).NumAckPending == 0 })
}

// With ConfirmAcks, the server has applied the acks when Ack returns.
func TestConfirmAcks(t *testing.T) {
	t.Parallel()
	nc, js := setup(t, time.Minute)
	publish(t, js, numbered(5)...)
	c := newConsumer(t, nc, jsconsumer.Options{ConfirmAcks: true})
	got := read(t, c, 10)
	if err := c.Ack(testCtx(t), got); err != nil {
		t.Fatal(err)
	}
	if i := info(t, js); i.AckFloor.Stream != 5 || i.NumAckPending != 0 {
		t.Fatalf("ack floor %d, ack pending %d", i.AckFloor.Stream, i.NumAckPending)
	}
	if err := c.Ack(testCtx(t), got); err != nil { // again: harmless
		t.Fatal(err)
	}
}

// A message that cannot be decoded is terminated and reported; the others
// are read.
func TestDecodeError(t *testing.T) {
	t.Parallel()
	nc, js := setup(t, time.Minute)
	publish(t, js, "a", "bad", "b")
	c := newConsumer(t, nc, jsconsumer.Options{})
	buf := make([]isb.ReadMessage, 10)
	n, err := c.Read(testCtx(t), buf)
	if n != 2 || !errors.Is(err, jsconsumer.ErrDecode) || !strings.Contains(err.Error(), "stream sequence 2") {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if err := c.Ack(testCtx(t), buf[:n]); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "everything settled", func() bool { i := info(t, js); return i.NumAckPending == 0 && i.NumPending == 0 })
}

// Messages held past the ack wait are kept in progress; Close hands them
// back at once, and calls after it fail with ErrClosed.
func TestHeldAndClosed(t *testing.T) {
	t.Parallel()
	nc, js := setup(t, 300*time.Millisecond)
	publish(t, js, numbered(3)...)
	c := newConsumer(t, nc, jsconsumer.Options{AckWait: 300 * time.Millisecond})
	held := read(t, c, 10)
	other := newConsumer(t, nc, jsconsumer.Options{ReadTimeout: time.Second})
	if got := read(t, other, 10); len(got) != 0 {
		t.Fatalf("another consumer got %v, held in progress by the first", ids(got))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(testCtx(t), make([]isb.ReadMessage, 1)); !errors.Is(err, jsconsumer.ErrClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	start := time.Now()
	var again []isb.ReadMessage
	for len(again) < len(held) && time.Since(start) < 5*time.Second {
		again = append(again, read(t, other, 10)...)
	}
	if got := ids(again); !slices.Equal(slices.Sorted(slices.Values(got)), ids(held)) {
		t.Fatalf("read again %v, want %v", got, ids(held))
	}
}

func TestConnErr(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		err  error
		down bool
	}{
		{"disconnected", nats.ErrDisconnected, true},
		{"reconnecting", fmt.Errorf("publish: %w", nats.ErrConnectionReconnecting), true},
		{"no reconnect buffer", nats.ErrReconnectBufExceeded, true},
		{"marked", fmt.Errorf("%w: x", jsconsumer.ErrNotConnected), true},
		{"timeout", nats.ErrTimeout, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := jsconsumer.ConnErr(tt.err)
			if errors.Is(err, jsconsumer.ErrNotConnected) != tt.down || !errors.Is(err, tt.err) {
				t.Fatalf("ConnErr(%v) = %v", tt.err, err)
			}
			if strings.Count(err.Error(), jsconsumer.ErrNotConnected.Error()) > 1 {
				t.Fatalf("marked twice: %v", err)
			}
		})
	}
	if jsconsumer.ConnErr(nil) != nil {
		t.Fatal("ConnErr(nil) is not nil")
	}
}
