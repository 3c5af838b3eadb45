package source_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// The server restarts mid-run: reads fail at once during the outage (never
// hanging past the read timeout), then go on with the same source once it is
// back; messages read before the restart can still be acked, and no message
// is lost (some may be read twice: at least once). After a clean stop,
// nothing acked before it is read again; a killed server may have lost acks
// it had not yet written out.
func TestJetStreamServerRestart(t *testing.T) {
	t.Parallel()
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "stop", true: "kill"}[kill], func(t *testing.T) {
			t.Parallel()
			testJetStreamServerRestart(t, kill)
		})
	}
}

func testJetStreamServerRestart(t *testing.T, kill bool) {
	const timeout = 200 * time.Millisecond
	s, _, js := jsServer(t, natstest.Options{})
	publishJS(t, js, "s.a", "a", 50)
	src := newJS(t, s, source.JetStreamConfig{ReadTimeout: timeout, AckWait: 2 * time.Second})
	seen := map[string]int{}
	first := readN(t, src, 20, 20)
	for _, m := range first {
		seen[string(m.Value)]++
	}
	ack(t, src, first[:10])
	held := first[10:] // read before the restart, acked after it

	if kill {
		s.Kill()
	} else {
		s.Stop()
	}
	buf := make([]isb.ReadMessage, 10)
	var err error
	runtest.WaitFor(t, "a read failing during the outage", func() bool {
		start := time.Now()
		var n int
		n, err = src.Read(natsCtx(t), buf)
		if d := time.Since(start); d > timeout+time.Second {
			t.Fatalf("a Read during the outage took %v", d)
		}
		if n > 0 {
			t.Fatalf("read %d during the outage", n)
		}
		return err != nil
	})
	if !errors.Is(err, source.ErrNATSNotConnected) {
		t.Fatalf("Read during the outage: %v, want ErrNATSNotConnected", err)
	}
	if _, err := src.Pending(natsCtx(t)); err == nil {
		t.Fatal("Pending during the outage did not fail")
	}

	s.Restart(t)
	runtest.WaitFor(t, "the acks of the messages held across the restart", func() bool {
		return src.Ack(natsCtx(t), held) == nil
	})
	runtest.WaitFor(t, "publishing after the restart", func() bool {
		_, err := js.Publish(natsCtx(t), "s.a", []byte("b0"))
		return err == nil
	})
	publishJS(t, js, "s.a", "c", 9)

	want := append(names("a", 50), "b0")
	want = append(want, names("c", 9)...)
	missing := func() int {
		n := 0
		for _, v := range want {
			if seen[v] == 0 {
				n++
			}
		}
		return n
	}
	runtest.WaitFor(t, "every message read after the restart", func() bool {
		got := readBatch(t, src, 10)
		for _, m := range got {
			seen[string(m.Value)]++
		}
		ack(t, src, got)
		return missing() == 0
	})
	// After a kill, messages whose acks the server lost come back after
	// AckWait: read and ack them too.
	runtest.WaitFor(t, "nothing pending", func() bool {
		got := readBatch(t, src, 10)
		for _, m := range got {
			seen[string(m.Value)]++
		}
		ack(t, src, got)
		n, err := src.Pending(natsCtx(t))
		return err == nil && n == 0
	})
	if len(seen) != len(want) {
		t.Fatalf("read %d distinct messages, want %d: %v", len(seen), len(want), seen)
	}
	for _, v := range names("a", 10) {
		if !kill && seen[v] != 1 {
			t.Errorf("%s, acked before the restart, read %d times", v, seen[v])
		}
	}
	t.Logf("read again (at least once): %v", twice(seen))
}

// twice returns the values seen more than once.
func twice(seen map[string]int) []string {
	var out []string
	for v, n := range seen {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s×%d", v, n))
		}
	}
	return out
}
