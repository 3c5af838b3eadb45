package jsconsumer_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// Every message read has the stream sequence the server stored its
// JetStream message at: a frame's messages share it, and a message
// delivered again keeps it.
func TestSequence(t *testing.T) {
	t.Parallel()
	nc, js := setup(t, time.Minute)
	var seqs []uint64
	for _, body := range []string{"a,b,c", "d", "e"} {
		ack, err := js.Publish(testCtx(t), "s.a", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	want := []uint64{seqs[0], seqs[0], seqs[0], seqs[1], seqs[2]}
	c := newConsumer(t, nc, jsconsumer.Options{FrameSize: 3})
	var got []isb.ReadMessage
	for len(got) < len(want) {
		got = append(got, read(t, c, len(want)-len(got))...)
	}
	sequences := func(msgs []isb.ReadMessage) []uint64 {
		var out []uint64
		for i := range msgs {
			out = append(out, c.Sequence(&msgs[i]))
		}
		return out
	}
	if s := sequences(got); !slices.Equal(s, want) {
		t.Fatalf("messages %v have sequences %v, want %v", ids(got), s, want)
	}
	if err := c.Nack(testCtx(t), got[3:4], 0); err != nil { // d
		t.Fatal(err)
	}
	again := read(t, c, 1)
	if len(again) != 1 || again[0].ID != "d" || c.Sequence(&again[0]) != seqs[1] {
		t.Fatalf("read again %v with sequences %v, want d at %d", ids(again), sequences(again), seqs[1])
	}
	if s := c.Sequence(&isb.ReadMessage{Handle: "other"}); s != 0 {
		t.Fatalf("Sequence of a message not read by the Consumer = %d, want 0", s)
	}
}
