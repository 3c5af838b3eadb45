package sink_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/isb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// et is an event time of 1700000000123 ms.
var et = time.UnixMilli(1700000000123)

var errUnset = errors.New("not set")

// unset returns n errors that Write must overwrite.
func unset(n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = errUnset
	}
	return errs
}

func TestLogFormat(t *testing.T) {
	tests := []struct {
		name string
		msg  isb.Message
		want string
	}{
		{"everything", isb.Message{
			ID: "in-0-7", Value: []byte(`{"Data":{"value":7}}`), Keys: []string{"k1", "k2"}, EventTime: et,
			Headers: map[string]string{"b": "2", "a": "1"},
		}, `Payload - {"Data":{"value":7}} Keys - k1,k2 EventTime - 1700000000123 Headers - a: 1, b: 2,  ID - in-0-7`},
		{"one key one header", isb.Message{
			ID: "x", Value: []byte("hello"), Keys: []string{"key-0-1"}, EventTime: et, Headers: map[string]string{"X-A": "1"},
		}, `Payload - hello Keys - key-0-1 EventTime - 1700000000123 Headers - X-A: 1,  ID - x`},
		{"headers sorted by name", isb.Message{
			ID: "x", Value: []byte("p"), EventTime: et,
			Headers: map[string]string{"zeta": "z", "Alpha": "A", "beta": "b", "alpha": "a"},
		}, `Payload - p Keys -  EventTime - 1700000000123 Headers - Alpha: A, alpha: a, beta: b, zeta: z,  ID - x`},
		{"no keys, headers or id", isb.Message{Value: []byte("p"), EventTime: et},
			`Payload - p Keys -  EventTime - 1700000000123 Headers -  ID - `},
		{"empty header map", isb.Message{Value: []byte("p"), EventTime: et, Headers: map[string]string{}},
			`Payload - p Keys -  EventTime - 1700000000123 Headers -  ID - `},
		{"empty payload", isb.Message{ID: "e", EventTime: et}, `Payload -  Keys -  EventTime - 1700000000123 Headers -  ID - e`},
		{"event time before 1970", isb.Message{ID: "o", Value: []byte("p"), EventTime: time.UnixMilli(-1500)},
			`Payload - p Keys -  EventTime - -1500 Headers -  ID - o`},
		{"event time in another zone", isb.Message{ID: "z", Value: []byte("p"), EventTime: et.In(time.FixedZone("X", 7200))},
			`Payload - p Keys -  EventTime - 1700000000123 Headers -  ID - z`},
		{"sub-millisecond time is truncated", isb.Message{ID: "s", Value: []byte("p"), EventTime: et.Add(999 * time.Microsecond)},
			`Payload - p Keys -  EventTime - 1700000000123 Headers -  ID - s`},
		{"empty key", isb.Message{ID: "k", Value: []byte("p"), Keys: []string{"", "b"}, EventTime: et},
			`Payload - p Keys - ,b EventTime - 1700000000123 Headers -  ID - k`},
		{"newline in the payload", isb.Message{ID: "n", Value: []byte("line1\nline2"), EventTime: et},
			`Payload - line1\nline2 Keys -  EventTime - 1700000000123 Headers -  ID - n`},
		{"newlines at both ends and twice", isb.Message{ID: "n", Value: []byte("\na\n\nb\n"), EventTime: et},
			`Payload - \na\n\nb\n Keys -  EventTime - 1700000000123 Headers -  ID - n`},
		{"only a newline", isb.Message{ID: "n", Value: []byte("\n"), EventTime: et},
			`Payload - \n Keys -  EventTime - 1700000000123 Headers -  ID - n`},
		{"binary payload as it is", isb.Message{ID: "b", Value: []byte{0, 0xff, '\t', 'x'}, EventTime: et},
			"Payload - \x00\xff\tx Keys -  EventTime - 1700000000123 Headers -  ID - b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			l := sink.NewLog(&out)
			errs := unset(1)
			if err := l.Write(context.Background(), []isb.Message{tt.msg}, errs); err != nil {
				t.Fatalf("Write = %v", err)
			}
			if errs[0] != nil {
				t.Errorf("errs[0] = %v, want nil", errs[0])
			}
			if got, want := out.String(), tt.want+"\n"; got != want {
				t.Fatalf("wrote\n%q\nwant\n%q", got, want)
			}
		})
	}
}

func TestLogNewlineOutsidePayload(t *testing.T) {
	var out bytes.Buffer
	l := sink.NewLog(&out)
	msgs := []isb.Message{
		{ID: "a\nb", Value: []byte("p"), EventTime: et},
		{ID: "c", Value: []byte("p"), Keys: []string{"k\n1"}, EventTime: et},
		{ID: "d", Value: []byte("p"), Headers: map[string]string{"h": "v\nw"}, EventTime: et},
	}
	if err := l.Write(context.Background(), msgs, unset(len(msgs))); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != len(msgs) {
		t.Fatalf("wrote %d lines for %d messages:\n%s", n, len(msgs), out.String())
	}
}

func TestLogBatch(t *testing.T) {
	tests := []struct {
		name string
		n    int
	}{
		{"empty", 0},
		{"one", 1},
		{"several", 5},
		{"more than the write buffer holds", 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			l := sink.NewLog(&out)
			msgs := make([]isb.Message, tt.n)
			var want strings.Builder
			for i := range msgs {
				msgs[i] = isb.Message{ID: strconv.Itoa(i), Value: []byte("v\n" + strconv.Itoa(i)), EventTime: et, Keys: []string{"k"}}
				fmt.Fprintf(&want, "Payload - v\\n%d Keys - k EventTime - 1700000000123 Headers -  ID - %d\n", i, i)
			}
			errs := unset(tt.n)
			if err := l.Write(context.Background(), msgs, errs); err != nil {
				t.Fatalf("Write = %v", err)
			}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("errs[%d] = %v, want nil", i, err)
				}
			}
			// The batch is flushed when Write returns.
			if out.String() != want.String() {
				t.Fatalf("wrote %d bytes, want %d:\n%.500s", out.Len(), want.Len(), out.String())
			}
			if got := strings.Count(out.String(), "\n"); got != tt.n {
				t.Fatalf("wrote %d lines, want %d", got, tt.n)
			}
		})
	}
}

func TestLogDoesNotChangeMessages(t *testing.T) {
	var out bytes.Buffer
	l := sink.NewLog(&out)
	payload := []byte("a\nb")
	msgs := []isb.Message{{ID: "x", Value: payload, Keys: []string{"k"}, Headers: map[string]string{"h": "v"}, EventTime: et}}
	if err := l.Write(context.Background(), msgs, unset(1)); err != nil {
		t.Fatal(err)
	}
	if string(payload) != "a\nb" || msgs[0].Keys[0] != "k" || msgs[0].Headers["h"] != "v" {
		t.Fatalf("message changed: %+v", msgs[0])
	}
	// Write keeps nothing of the batch: changing the payload afterwards changes
	// nothing written.
	before := out.String()
	copy(payload, "xyz")
	if out.String() != before {
		t.Fatal("output changed with the payload")
	}
}

// lockedBuffer is a bytes.Buffer that reports writes made while another write is
// under way, which would mean the sink let two writers in at once.
type lockedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	writing bool
	overlap bool
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.writing {
		b.overlap = true
	}
	b.writing = true
	b.mu.Unlock()
	n, err := b.buf.Write(p)
	b.mu.Lock()
	b.writing = false
	b.mu.Unlock()
	return n, err
}

func TestLogConcurrentWriters(t *testing.T) {
	const (
		writers  = 8
		batches  = 40
		perBatch = 6
	)
	// The buffer is guarded by the sink alone: a data race on it fails the test
	// under -race.
	var raw bytes.Buffer
	l := sink.NewLog(&raw)
	want := map[string]bool{}
	line := func(w, b, i int) (isb.Message, string) {
		id := fmt.Sprintf("w%d-b%d-m%d", w, b, i)
		// Some payloads are larger than the sink's write buffer, so that a batch
		// goes out in several writes.
		size := 10 + (w*b*i)%50
		if i == 0 && b%10 == 0 {
			size = 70 << 10
		}
		payload := strings.Repeat(string(rune('a'+w)), size) + "\n" + id
		m := isb.Message{ID: id, Value: []byte(payload), Keys: []string{"k" + strconv.Itoa(w)}, EventTime: et,
			Headers: map[string]string{"w": strconv.Itoa(w)}}
		return m, strings.ReplaceAll(payload, "\n", `\n`)
	}
	for w := range writers {
		for b := range batches {
			for i := range perBatch {
				m, p := line(w, b, i)
				want[fmt.Sprintf("Payload - %s Keys - k%d EventTime - 1700000000123 Headers - w: %d,  ID - %s", p, w, w, m.ID)] = true
			}
		}
	}
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				msgs := make([]isb.Message, perBatch)
				for i := range msgs {
					msgs[i], _ = line(w, b, i)
				}
				errs := unset(perBatch)
				if err := l.Write(context.Background(), msgs, errs); err != nil {
					errc <- err
					return
				}
				for _, err := range errs {
					if err != nil {
						errc <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("Write = %v", err)
	}

	lines := strings.Split(strings.TrimSuffix(raw.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("wrote %d lines, want %d", len(lines), len(want))
	}
	seen := map[string]bool{}
	for i, ln := range lines {
		if !want[ln] {
			t.Fatalf("line %d is not a whole message line: %.200q", i, ln)
		}
		if seen[ln] {
			t.Fatalf("line %d written twice: %.200q", i, ln)
		}
		seen[ln] = true
	}
}

func TestLogConcurrentWritersNoOverlap(t *testing.T) {
	// The same, through a writer that notices two writes at once.
	var out lockedBuffer
	l := sink.NewLog(&out)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for b := range 20 {
				msgs := []isb.Message{{ID: fmt.Sprint(w, "-", b), Value: bytes.Repeat([]byte{'x'}, 40<<10), EventTime: et}}
				l.Write(context.Background(), msgs, unset(1))
			}
		})
	}
	wg.Wait()
	if out.overlap {
		t.Fatal("the sink wrote from two goroutines at once")
	}
	if n := strings.Count(out.buf.String(), "\n"); n != 160 {
		t.Fatalf("wrote %d lines, want 160", n)
	}
}

// flakyWriter fails its first fails writes.
type flakyWriter struct {
	fails int
	buf   bytes.Buffer
}

var errWrite = errors.New("write failed")

func (w *flakyWriter) Write(p []byte) (int, error) {
	if w.fails > 0 {
		w.fails--
		return 0, errWrite
	}
	return w.buf.Write(p)
}

func TestLogWriteError(t *testing.T) {
	w := &flakyWriter{fails: 1}
	l := sink.NewLog(w)
	msgs := []isb.Message{{ID: "a", Value: []byte("p"), EventTime: et}}
	if err := l.Write(context.Background(), msgs, unset(1)); !errors.Is(err, errWrite) {
		t.Fatalf("Write to a failing writer = %v, want %v", err, errWrite)
	}
}

func TestLogRecoversAfterWriteError(t *testing.T) {
	w := &flakyWriter{fails: 1}
	l := sink.NewLog(w)
	msgs := []isb.Message{{ID: "a", Value: []byte("p"), EventTime: et}}
	l.Write(context.Background(), msgs, unset(1))
	if err := l.Write(context.Background(), msgs, unset(1)); err != nil {
		t.Fatalf("Write after the writer recovered = %v", err)
	}
	if got, want := w.buf.String(), "Payload - p Keys -  EventTime - 1700000000123 Headers -  ID - a\n"; !strings.HasSuffix(got, want) {
		t.Fatalf("wrote %q, want it to end with %q", got, want)
	}
}

func TestBlackhole(t *testing.T) {
	tests := []struct {
		name string
		msgs []isb.Message
	}{
		{"none", nil},
		{"one", []isb.Message{{Value: []byte("x")}}},
		{"many", make([]isb.Message, 1000)},
		{"anything", []isb.Message{{ID: "i", Value: []byte("a\nb"), Keys: []string{"k"}, Headers: map[string]string{"h": "v"}, EventTime: et}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := unset(len(tt.msgs))
			var w isb.Writer = sink.Blackhole{}
			if err := w.Write(context.Background(), tt.msgs, errs); err != nil {
				t.Fatalf("Write = %v", err)
			}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("errs[%d] = %v, want nil", i, err)
				}
			}
		})
	}
}

func TestBlackholeConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				errs := unset(3)
				sink.Blackhole{}.Write(context.Background(), make([]isb.Message, 3), errs)
				for _, err := range errs {
					if err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
