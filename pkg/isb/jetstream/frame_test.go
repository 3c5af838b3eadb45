package jetstream

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
)

func frames(size int) func(*Config) { return func(cfg *Config) { cfg.FrameSize = size } }

func TestFrameEncoding(t *testing.T) {
	msgs := messages("m", 3)
	msgs[1].Headers = map[string]string{"a": "1"}
	msgs[2].Value = nil
	got, err := decodeFrame(appendFrame(nil, msgs, nil), 3, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(msgs) {
		t.Fatalf("decoded %v, want %v", got, msgs)
	}
	body := appendFrame(nil, msgs, nil)
	for _, tt := range []struct {
		name  string
		body  []byte
		count int
	}{{"short", body[:len(body)-1], 3}, {"count too big", body, 4}, {"bytes left", body, 2}} {
		if _, err := decodeFrame(tt.body, tt.count, nil, nil); err == nil {
			t.Errorf("%s: decoded", tt.name)
		}
	}
	a, _ := frameID(msgs)
	b, _ := frameID(slices.Clone(msgs))
	c, _ := frameID(msgs[:2])
	if a != b || a == c {
		t.Fatalf("frame ids %q %q %q: want equal for equal messages, else different", a, b, c)
	}
	if _, ok := frameID([]isb.Message{{}}); ok {
		t.Fatal("a frame with a message without id has an id")
	}
}

// Messages written in frames of 4 are read one by one in order, at most
// len(buf) at a time; a frame is acked once all of its messages are.
func TestFramesRoundTrip(t *testing.T) {
	t.Parallel()
	sp := spec("frames-0", 100)
	s, c := setup(t, sp, frames(4))
	w := newWriter(t, c, sp, "up")
	r := newReader(t, c, sp.Name, time.Second)
	want := messages("m", 10)
	write(t, w, want)
	if bi := info(t, c, sp.Name); bi.Messages != 3 {
		t.Fatalf("stream holds %d JetStream messages; want 3 frames (4, 4, 2)", bi.Messages)
	}
	var got []isb.ReadMessage
	buf := make([]isb.ReadMessage, 3)
	for len(got) < 10 {
		n, err := r.Read(testCtx(t), buf)
		if err != nil || n == 0 || n > 3 {
			t.Fatalf("Read(3) = %d, %v", n, err)
		}
		got = append(got, buf[:n]...)
	}
	for i := range want {
		if got[i].ID != want[i].ID || string(got[i].Value) != string(want[i].Value) || !got[i].EventTime.Equal(want[i].EventTime) {
			t.Fatalf("message %d: %+v, want %+v", i, got[i].Message, want[i])
		}
	}
	acks := watchAcks(t, s.Connect(t))
	ack(t, r, got[:3]) // three of the first frame's four
	// Ack returns once the server has what it sent.
	if n := acks(); n != 0 {
		t.Fatalf("after acking 3 of the first frame's 4 messages, %d acks sent; want none", n)
	}
	if bi := info(t, c, sp.Name); bi.Messages != 3 {
		t.Fatalf("after acking 3 of 4: %+v; want the first frame still held", bi)
	}
	ack(t, r, got[3:])
	if n := acks(); n != 3 {
		t.Fatalf("after acking the rest, %d acks sent; want 3, one a frame", n)
	}
	waitEmpty(t, c, sp.Name)
}

// A Reader of frames fetches ahead too: a Read of 8 takes 2 frames of 4,
// and once the server has given both, it asks for the next 2.
func TestFramesFetchedAhead(t *testing.T) {
	t.Parallel()
	sp := spec("framesahead-0", 100)
	_, c := setup(t, sp, frames(4))
	write(t, newWriter(t, c, sp, "up"), messages("m", 40))
	r := newReader(t, c, sp.Name, time.Second)
	buf := make([]isb.ReadMessage, 8)
	n, err := r.Read(testCtx(t), buf)
	if err != nil || n != 8 {
		t.Fatalf("Read(8) = %d, %v", n, err)
	}
	runtest.WaitFor(t, "2 frames fetched ahead", func() bool { return info(t, c, sp.Name).AckPending == 4 })
	got := append([]isb.ReadMessage(nil), buf[:n]...)
	got = append(got, readN(t, r, 32, 8)...)
	for i := range got {
		if want := fmt.Sprintf("m%d", i); got[i].ID != want {
			t.Fatalf("message %d: %s, want %s", i, got[i].ID, want)
		}
	}
	ack(t, r, got)
	waitEmpty(t, c, sp.Name)
}

// A frame with a message nacked is delivered again whole, once its other
// messages are acked.
func TestFrameNack(t *testing.T) {
	t.Parallel()
	sp := spec("framenack-0", 100)
	_, c := setup(t, sp, frames(4))
	w := newWriter(t, c, sp, "up")
	r := newReader(t, c, sp.Name, time.Second)
	write(t, w, messages("m", 4))
	got := readN(t, r, 4, 4)
	if err := r.Nack(testCtx(t), got[1:2], 0); err != nil {
		t.Fatal(err)
	}
	ack(t, r, got[:1])
	ack(t, r, got[2:])
	again := readN(t, r, 4, 4)
	if fmt.Sprint(ids(again)) != "[m0 m1 m2 m3]" {
		t.Fatalf("read again %v; want the whole frame", ids(again))
	}
	ack(t, r, again)
	waitEmpty(t, c, sp.Name)
}

// The same messages in the same frame are stored once within the duplicate
// window; grouped differently, they are stored again.
func TestFrameDedup(t *testing.T) {
	t.Parallel()
	sp := spec("framedup-0", 100)
	_, c := setup(t, sp, frames(4))
	w := newWriter(t, c, sp, "up")
	msgs := messages("m", 4)
	write(t, w, msgs)
	write(t, w, msgs)
	if bi := info(t, c, sp.Name); bi.Messages != 1 {
		t.Fatalf("stream holds %d frames; want 1", bi.Messages)
	}
	write(t, w, msgs[1:])
	if bi := info(t, c, sp.Name); bi.Messages != 2 {
		t.Fatalf("stream holds %d frames; want 2 (another grouping is not a duplicate)", bi.Messages)
	}
}

// The soft full check counts messages, not frames.
func TestFramesFull(t *testing.T) {
	t.Parallel()
	sp := BufferSpec{Name: "framefull-0", MaxLength: 20, UsageLimit: 50} // full at 10 messages
	_, c := setup(t, sp, frames(4))
	w := newWriter(t, c, sp, "up")
	write(t, w, messages("a", 8))
	write(t, w, messages("b", 4))
	errs := make([]error, 1)
	if err := w.Write(testCtx(t), messages("c", 1), errs); err != nil || !errors.Is(errs[0], isb.ErrBufferFull) {
		t.Fatalf("write at 12 of a 10-message limit: %v, %v; want ErrBufferFull", err, errs[0])
	}
}

// Closing a reader hands back the frames whose messages it had not all
// returned, so that another reader gets them at once.
func TestCloseHandsBackFrames(t *testing.T) {
	t.Parallel()
	sp := spec("frameclose-0", 100)
	_, c := setup(t, sp, func(cfg *Config) { cfg.FrameSize = 4; cfg.AckWait = 30 * time.Second })
	w := newWriter(t, c, sp, "up")
	write(t, w, messages("m", 4))
	r1, err := c.Reader(sp.Name, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	readN(t, r1, 1, 1)
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := newReader(t, c, sp.Name, time.Second)
	start := time.Now()
	got := readN(t, r2, 4, 4)
	if since := time.Since(start); since > 5*time.Second {
		t.Fatalf("read again after %v; want at once", since)
	}
	ack(t, r2, got)
	waitEmpty(t, c, sp.Name)
}

// watchAcks watches, from spy, the acks of JetStream messages, and returns a
// func that counts those the server has received so far.
func watchAcks(t *testing.T, spy *nats.Conn) func() int {
	t.Helper()
	sub, err := spy.SubscribeSync("$JS.ACK.>")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() int {
		t.Helper()
		// The server answers spy's flush after what it routed to spy before.
		if err := spy.Flush(); err != nil {
			t.Fatal(err)
		}
		n, _, err := sub.Pending()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}
