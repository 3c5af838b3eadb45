package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustOpen(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// replay returns "seg:record" of every record.
func replay(t *testing.T, l *Log) []string {
	t.Helper()
	var got []string
	if err := l.Replay(func(seg uint64, rec []byte) error {
		got = append(got, fmt.Sprintf("%d:%s", seg, rec))
		return nil
	}); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return got
}

func appendAll(t *testing.T, l *Log, recs ...string) {
	t.Helper()
	for _, r := range recs {
		if _, err := l.Append([]byte(r)); err != nil {
			t.Fatalf("Append(%q): %v", r, err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestReplayAfterRestart reads back, in order and by segment, what a run
// appended and synced; a new run appends to a new segment.
func TestReplayAfterRestart(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentSize: 20})
	if got := replay(t, l); len(got) != 0 {
		t.Fatalf("a new log replays %v", got)
	}
	appendAll(t, l, "one", "two", "three", "") // 8+3, 8+3 pass 20 after two
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, Options{SegmentSize: 20})
	if _, err := l.Append([]byte("x")); err == nil || !strings.Contains(err.Error(), "before Replay") {
		t.Fatalf("Append before Replay: %v", err)
	}
	if got, want := strings.Join(replay(t, l), " "), "1:one 1:two 2:three 2:"; got != want {
		t.Fatalf("replayed %q, want %q", got, want)
	}
	appendAll(t, l, "four")
	if segs := l.Segments(); len(segs) != 3 || segs[2].ID != 3 || segs[2].Size != 12 {
		t.Fatalf("segments %+v; want a third of 12 bytes", segs)
	}
}

// TestTornTail drops a record cut short at the end of the last segment, as
// a crash in the middle of a write leaves it, and truncates it away.
func TestTornTail(t *testing.T) {
	for _, cut := range []int{3, 8, 10} { // in the header, after it, inside the bytes
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, Options{})
			appendAll(t, l, "kept", "torn record")
			l.Close()
			path := l.path(1)
			fi, _ := os.Stat(path)
			whole := int64(headerSize + len("kept"))
			if err := os.Truncate(path, whole+int64(cut)); err != nil || fi.Size() <= whole+int64(cut) {
				t.Fatal(err)
			}
			l = mustOpen(t, dir, Options{})
			if got := strings.Join(replay(t, l), " "); got != "1:kept" {
				t.Fatalf("replayed %q; want the whole record alone", got)
			}
			if fi, _ := os.Stat(path); fi.Size() != whole {
				t.Fatalf("segment of %d bytes after replay; want it cut to %d", fi.Size(), whole)
			}
		})
	}
}

// TestCorruption fails Replay on a damaged record that is not a torn tail,
// naming the segment and offset.
func TestCorruption(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentSize: 1})
	appendAll(t, l, "first", "second") // a segment each
	l.Close()
	path := l.path(1)
	b, _ := os.ReadFile(path)
	b[headerSize] ^= 0xff
	os.WriteFile(path, b, 0o644)
	l = mustOpen(t, dir, Options{SegmentSize: 1})
	err := l.Replay(func(uint64, []byte) error { return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != path || ce.Offset != 0 || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("Replay = %v; want a CorruptError at %s offset 0", err, path)
	}
}

// TestRemove deletes whole segments once the caller is done with them, by
// the marks it gave them, and never the one being appended to.
func TestRemove(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentSize: 1})
	for i, r := range []string{"a", "b", "c"} {
		seg, err := l.Append([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		l.Mark(seg, int64(100*(i+1)))
	}
	var kept []string
	for _, s := range l.Segments() {
		if s.Last <= 200 {
			if err := l.Remove(s.ID); err != nil {
				t.Fatal(err)
			}
			continue
		}
		kept = append(kept, fmt.Sprint(s.ID, "/", s.Last))
	}
	if strings.Join(kept, " ") != "3/300" {
		t.Fatalf("kept %v; want segment 3 alone", kept)
	}
	if err := l.Remove(3); err == nil || !strings.Contains(err.Error(), "being appended to") {
		t.Fatalf("Remove(3) = %v", err)
	}
	if err := l.Remove(9); err == nil {
		t.Fatal("Remove(9) of no segment succeeded")
	}
	l.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(names) != 1 || filepath.Base(names[0]) != "00000000000000000003.wal" {
		t.Fatalf("files left %v", names)
	}
	if _, err := l.Append([]byte("z")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestReplayStopsAtError returns the callback's error.
func TestReplayStopsAtError(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	appendAll(t, l, "a", "b")
	l.Close()
	l = mustOpen(t, dir, Options{})
	stop := errors.New("stop")
	n := 0
	if err := l.Replay(func(uint64, []byte) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Replay = %v after %d records", err, n)
	}
}

// TestRotate closes the segment appended to so that it can be removed, and
// the next record goes to a new one.
func TestRotate(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{})
	appendAll(t, l, "a")
	if err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(1); err != nil {
		t.Fatalf("Remove after Rotate: %v", err)
	}
	if seg, err := l.Append([]byte("b")); err != nil || seg != 2 {
		t.Fatalf("Append after Rotate = %d, %v; want segment 2", seg, err)
	}
}
