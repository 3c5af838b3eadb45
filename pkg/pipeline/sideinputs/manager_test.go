package sideinputs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
)

// script is a Retriever whose answers a test sets, and which reports the
// time of each call.
type script struct {
	clk   clock.Clock
	calls chan time.Time
	mu    sync.Mutex
	n     int
	// answer gives the value, broadcast and error of call n (1-based).
	answer func(n int) ([]byte, bool, error)
}

func (s *script) Retrieve(context.Context) ([]byte, bool, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	v, b, err := s.answer(n)
	s.calls <- s.clk.Now()
	return v, b, err
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// stored reads name's value from the memory store.
func stored(m *Memory, name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return string(m.values[name])
}

func TestManagerSchedule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		schedule string
		answer   func(n int) ([]byte, bool, error)
		// calls are the times of the calls, from 10:00:01; values what the
		// store holds after each.
		calls, values []string
	}{
		{
			name: "at start, then every 5s", schedule: "*/5 * * * * *",
			answer: func(n int) ([]byte, bool, error) { return []byte(strconv.Itoa(n)), true, nil },
			calls:  []string{"10:00:01", "10:00:05", "10:00:10", "10:00:15"},
			values: []string{"1", "2", "3", "4"},
		},
		{
			name: "no_broadcast keeps the last value", schedule: "@every 10s",
			answer: func(n int) ([]byte, bool, error) { return []byte(strconv.Itoa(n)), n != 2, nil },
			calls:  []string{"10:00:01", "10:00:11", "10:00:21"},
			values: []string{"1", "1", "3"},
		},
		{
			name: "retried every second until a first value", schedule: "0 * * * *",
			answer: func(n int) ([]byte, bool, error) {
				if n < 3 {
					return nil, false, errors.New("not yet")
				}
				return []byte("v"), true, nil
			},
			calls:  []string{"10:00:01", "10:00:02", "10:00:03", "11:00:00"},
			values: []string{"", "", "v", "v"},
		},
		{
			name: "failures after a value wait for the schedule", schedule: "*/20 * * * * *",
			answer: func(n int) ([]byte, bool, error) {
				if n == 2 {
					return nil, false, errors.New("down")
				}
				return []byte(strconv.Itoa(n)), true, nil
			},
			calls:  []string{"10:00:01", "10:00:20", "10:00:40"},
			values: []string{"1", "1", "3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := at(t, "2026-01-01T10:00:01Z")
			clk := clock.NewManual(start)
			s := &script{clk: clk, calls: make(chan time.Time, 1), answer: tc.answer}
			store := NewMemory()
			m, err := NewManager(ManagerDeps{
				SideInputs: []config.SideInput{{Name: "ticker", Trigger: config.SideInputTrigger{Schedule: tc.schedule}}},
				Retrievers: map[string]Retriever{"ticker": s}, Store: store, Clock: clk,
			})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- m.Run(ctx) }()
			for i, want := range tc.calls {
				if i > 0 {
					if err := clk.BlockUntil(ctx, 1); err != nil {
						t.Fatal(err)
					}
					clk.Set(at(t, "2026-01-01T"+want+"Z"))
				}
				select {
				case got := <-s.calls:
					if w := at(t, "2026-01-01T"+want+"Z"); !got.Equal(w) {
						t.Fatalf("call %d at %s, want %s", i+1, got.Format(time.TimeOnly), want)
					}
				case <-ctx.Done():
					t.Fatalf("call %d: no call by %s", i+1, want)
				}
				// The value is stored before the manager sleeps again.
				if err := clk.BlockUntil(ctx, 1); err != nil {
					t.Fatal(err)
				}
				if got := stored(store, "ticker"); got != tc.values[i] {
					t.Errorf("after call %d: stored %q, want %q", i+1, got, tc.values[i])
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "side-inputs")
	store := NewMemory()
	f := NewFiles(dir, store, []string{"a", "b"}, nil)
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	gate := f.Gate([]string{"a", "b"})
	if err := gate.Ready(); !errors.Is(err, ErrNoValue) {
		t.Fatalf("Ready before any value = %v, want ErrNoValue", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- gate.Wait(ctx) }()

	store.Put(ctx, "a", []byte("one"))
	store.Put(ctx, "c", []byte("not named")) // no file: not one of Files' names
	waitFile(t, filepath.Join(dir, "a"), "one")
	if err := gate.Ready(); err == nil || err.Error() != "waiting for side inputs: b (no value in "+dir+" yet)" {
		t.Errorf("Ready with a alone = %v", err)
	}
	select {
	case err := <-waited:
		t.Fatalf("Wait returned %v with b missing", err)
	default:
	}
	store.Put(ctx, "b", []byte("two"))
	if err := <-waited; err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if err := gate.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
	store.Put(ctx, "a", []byte("three"))
	waitFile(t, filepath.Join(dir, "a"), "three")
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "a" || names[1] != "b" {
		t.Errorf("files = %v, want [a b] (no temporary files left, none for c)", names)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
}

// waitFile waits until path holds want.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	runtest.WaitFor(t, fmt.Sprintf("%s = %q", path, want), func() bool {
		b, err := os.ReadFile(path)
		return err == nil && string(b) == want
	}, runtest.Showing(func() string {
		b, err := os.ReadFile(path)
		return fmt.Sprintf("%q (%v)", b, err)
	}))
}

func TestWriteFileReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x")
	old, next := "first, longer value", "second"
	if err := WriteFile(dir, "x", []byte(old)); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if before.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", before.Mode().Perm())
	}
	// A reader that opened the file before the write goes on reading the
	// whole old value: the new one is a new file renamed over the name, not
	// the old file truncated and written in place.
	reader, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if err := WriteFile(dir, "x", []byte(next)); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(reader); err != nil || string(b) != old {
		t.Errorf("reader opened before the write read %q (%v), want the whole old value %q", b, err, old)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Error("the file is the same after the write; want a new file renamed over it")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != next {
		t.Errorf("file = %q (%v), want %q", b, err, next)
	}
	// The temporary file is gone: only the value's file is in dir.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "x" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("dir holds %q, want only [x]", names)
	}
}

func TestWriteFileReadersSeeWholeValues(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x")
	values := []string{strings.Repeat("a", 4096), "b"}
	if err := WriteFile(dir, "x", []byte(values[0])); err != nil {
		t.Fatal(err)
	}
	const writes = 300
	done := make(chan error, 1)
	go func() {
		for i := range writes {
			if err := WriteFile(dir, "x", []byte(values[i%2])); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for reads := 0; ; reads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		if s := string(b); s != values[0] && s != values[1] {
			t.Fatalf("read %d saw %d bytes %.10q...; want one whole value", reads, len(b), s)
		}
	}
}
