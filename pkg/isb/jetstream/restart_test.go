package jetstream

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// The server restarts mid-stream: calls during the outage fail without
// hanging (a Read first returns what it fetched ahead before); afterwards the same Conn, Writer and Reader work again, messages
// written before the restart are read, messages read before it can still be
// acked, and nothing acked is lost.
//
// After a clean stop, acks the consumer applied before it hold: nothing
// acked is read again.
// After a kill, the server may have lost the state it had not yet written
// out (acks received, messages delivered), so messages read before the kill
// may be read again (at least once); none is lost.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	for _, kill := range []bool{false, true} {
		name := "stop"
		if kill {
			name = "kill"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testServerRestart(t, kill)
		})
	}
}

func testServerRestart(t *testing.T, kill bool) {
	sp := spec("restart-0", 1000)
	s, c := setup(t, sp, func(cfg *Config) { cfg.AckWait = 2 * time.Second })
	w := newWriter(t, c, sp, "up")
	r := newReader(t, c, sp.Name, 200*time.Millisecond)
	write(t, w, messages("a", 50))
	first := readN(t, r, 20, 20)
	ack(t, r, first[:10])
	held := first[10:] // read before the restart, acked after it
	// The server applies an ack shortly after it receives it; a stop
	// before that loses the ack.
	runtest.WaitFor(t, "the consumer to apply the first 10 acks", func() bool {
		floor, err := r.AckFloor(testCtx(t))
		return err == nil && floor >= r.Offset(&first[9])
	})

	if kill {
		s.Kill()
	} else {
		s.Stop()
	}
	runtest.WaitFor(t, "the client to notice the outage", func() bool { return !c.Connected() })
	errs := make([]error, 2)
	if err := w.Write(testCtx(t), messages("x", 2), errs); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], ErrNotConnected) || !errors.Is(errs[1], ErrNotConnected) {
		t.Fatalf("Write during the outage: %v", errs)
	}
	// The batch fetched ahead before the outage may still be read; then
	// Read fails.
	var ahead []isb.ReadMessage
	for buf := make([]isb.ReadMessage, 5); ; {
		n, err := r.Read(testCtx(t), buf)
		ahead = append(ahead, buf[:n]...)
		if err != nil {
			if !errors.Is(err, ErrNotConnected) {
				t.Fatalf("Read during the outage: %v", err)
			}
			break
		}
		if n == 0 || len(ahead) > 20 {
			t.Fatalf("Read during the outage: %d messages, no error; %d in all", n, len(ahead))
		}
	}
	if err := r.Ack(testCtx(t), held[:1]); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Ack during the outage: %v", err)
	}

	s.Restart(t)
	runtest.WaitFor(t, "the client to reconnect", c.Connected)
	// The server loads its streams and consumers after it takes connections;
	// an ack that comes before the consumer is back is lost.
	runtest.WaitFor(t, "the buffer's consumer to be back", func() bool {
		_, err := c.BufferInfo(testCtx(t), sp.Name)
		return err == nil
	})
	ack(t, r, held)
	ack(t, r, ahead)
	write(t, w, messages("b", 10))

	var want []string
	for i := 20; i < 50; i++ {
		if id := fmt.Sprintf("a%d", i); !slices.Contains(ids(ahead), id) {
			want = append(want, id)
		}
	}
	for i := range 10 {
		want = append(want, fmt.Sprintf("b%d", i))
	}
	if !kill {
		rest := readN(t, r, len(want), 50)
		got := ids(rest)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("read after the restart %v, want %v", got, want)
		}
		ack(t, r, rest)
		waitEmpty(t, c, sp.Name)
		// Past AckWait nothing comes back.
		late := newReader(t, c, sp.Name, 2500*time.Millisecond)
		if n, err := late.Read(testCtx(t), make([]isb.ReadMessage, 10)); n != 0 || err != nil {
			t.Fatalf("read %d messages (%v) after everything was acked", n, err)
		}
		return
	}

	// Kill: read until the buffer is empty (messages whose ack or delivery
	// the server lost come back).
	seen := ackAll(t, r, c, sp.Name)
	for _, id := range want {
		if seen[id] != 1 {
			t.Fatalf("%s read %d times after the restart, want once", id, seen[id])
		}
	}
	var again []string
	for id := range seen {
		if slices.Contains(want, id) {
			continue
		}
		if !slices.ContainsFunc(append(first, ahead...), func(m isb.ReadMessage) bool { return m.ID == id }) {
			t.Fatalf("%s read after the restart: it is no message written", id)
		}
		again = append(again, id)
	}
	slices.Sort(again)
	t.Logf("after the kill, read again: %v", again)
}

// ackAll reads and acks until the buffer is empty (bounded, 15 s) and
// returns how often each id was read.
func ackAll(t *testing.T, r *Reader, c *Conn, name string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	buf := make([]isb.ReadMessage, 50)
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := r.Read(testCtx(t), buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range buf[:n] {
			seen[m.ID]++
		}
		ack(t, r, buf[:n])
		if n == 0 && info(t, c, name).Empty() {
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("buffer %s not empty after 15s: %+v", name, info(t, c, name))
		}
	}
}
