package serve

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
)

// write runs b.Write of msgs in a goroutine and returns its errs when done.
func write(b *bridge, msgs ...string) <-chan []error {
	done := make(chan []error, 1)
	go func() {
		ms := make([]isb.Message, len(msgs))
		for i, m := range msgs {
			ms[i] = isb.Message{Value: []byte(m)}
		}
		errs := make([]error, len(ms))
		if err := b.Write(context.Background(), ms, errs); err != nil {
			errs = []error{err}
		}
		done <- errs
	}()
	return done
}

// read reads at most n messages from b, waiting up to 10s for the first.
func read(b *bridge, n uint64) []sourcer.Message { return readOn(context.Background(), b, n) }

// readOn is read on the stream of ctx.
func readOn(ctx context.Context, b *bridge, n uint64) []sourcer.Message {
	out := make(chan sourcer.Message, n)
	b.Read(ctx, sourcer.ReadRequest{Count: n, Timeout: 10 * time.Second}, out)
	close(out)
	var ms []sourcer.Message
	for m := range out {
		ms = append(ms, m)
	}
	return ms
}

func offsets(ms []sourcer.Message) []sourcer.Offset {
	os := make([]sourcer.Offset, len(ms))
	for i, m := range ms {
		os[i] = m.Offset
	}
	return os
}

// TestBridgeAckNack: a Write returns when the client has answered each of
// its messages: nil for an ack, isb.ErrNack for a nack; a Read returns no
// more than it was asked for.
func TestBridgeAckNack(t *testing.T) {
	b := newBridge(time.Minute, []int32{0})
	done := write(b, "a", "b", "c")
	first := read(b, 2)
	if len(first) != 2 || string(first[0].Value) != "a" {
		t.Fatalf("read %v; want a and b", first)
	}
	rest := read(b, 5)
	if len(rest) != 1 || string(rest[0].Value) != "c" {
		t.Fatalf("read %v; want c", rest)
	}
	b.Ack(context.Background(), offsets(first))
	select {
	case errs := <-done:
		t.Fatalf("Write returned %v before c was answered", errs)
	default:
	}
	b.Nack(context.Background(), offsets(rest))
	errs := <-done
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], isb.ErrNack) {
		t.Fatalf("errs %v; want nil, nil, ErrNack", errs)
	}
	// An answer to an offset already answered changes nothing.
	b.Ack(context.Background(), offsets(rest))
}

// TestBridgeStop: once the bridge stops, what was read and not acked is
// handed back after the drain time, and a message no client read is handed
// back as soon as a Read takes it.
func TestBridgeStop(t *testing.T) {
	b := newBridge(0, []int32{0})
	done := write(b, "a", "b")
	if got := read(b, 1); len(got) != 1 {
		t.Fatalf("read %v", got)
	}
	b.close()
	if got := read(b, 1); len(got) != 0 {
		t.Fatalf("read %v after stop; want nothing", got)
	}
	for i, err := range <-done {
		if !errors.Is(err, isb.ErrNack) {
			t.Fatalf("errs[%d] = %v; want ErrNack", i, err)
		}
	}
	if errs := <-write(b, "c"); !errors.Is(errs[0], isb.ErrNack) {
		t.Fatalf("a write after stop: %v; want ErrNack", errs)
	}
}

// TestBridgeStreamEnds: what a read stream took and did not ack is handed
// back when the stream ends; what it acked stays acked.
func TestBridgeStreamEnds(t *testing.T) {
	b := newBridge(time.Minute, []int32{0})
	done := write(b, "a", "b")
	ctx, cancel := context.WithCancel(context.Background())
	got := readOn(ctx, b, 2)
	if len(got) != 2 {
		t.Fatalf("read %v", got)
	}
	b.Ack(context.Background(), offsets(got[:1]))
	cancel()
	errs := <-done
	if errs[0] != nil || !errors.Is(errs[1], isb.ErrNack) {
		t.Fatalf("errs %v; want nil, ErrNack", errs)
	}
}

// TestBridgePending: Pending is the source's own count, the messages
// waiting for a client not added (the source counts them as not acked), and
// unknown when the source does not tell.
func TestBridgePending(t *testing.T) {
	b := newBridge(0, []int32{0})
	if got := b.Pending(context.Background()); got != sourcer.PendingUnknown {
		t.Fatalf("pending %d of a source that does not tell; want %d", got, sourcer.PendingUnknown)
	}
	b.pending = func(context.Context) int64 { return 7 }
	done := write(b, "a", "b", "c")
	if got := read(b, 1); len(got) != 1 {
		t.Fatalf("read %v", got)
	}
	if got := b.Pending(context.Background()); got != 7 {
		t.Fatalf("pending %d with two messages unread; want the source's 7", got)
	}
	b.close()
	<-done
}
