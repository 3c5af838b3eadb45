package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultSegmentSize is the size past which a segment is full.
const DefaultSegmentSize = 64 << 20

// MaxRecord is the largest record a log takes.
const MaxRecord = 64 << 20

// headerSize is a record's length and CRC, each four bytes.
const headerSize = 8

const suffix = ".wal"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrClosed is the error of a Log used after Close.
var ErrClosed = errors.New("wal: closed")

// CorruptError is a record that does not read back as written, other than
// a torn last record.
type CorruptError struct {
	Segment string // the segment file's path
	Offset  int64  // where the record begins
	Reason  string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: %s at offset %d: %s", e.Segment, e.Offset, e.Reason)
}

// Options tune a Log. The zero value takes the defaults.
type Options struct {
	// SegmentSize is the size past which Append starts a new segment
	// (default DefaultSegmentSize).
	SegmentSize int64
}

// Segment is one segment file of a log.
type Segment struct {
	// ID numbers the segments in the order they were written, from 1.
	ID uint64
	// Size is its size in bytes.
	Size int64
	// Last is the mark the caller gave the records appended to it in this
	// run ([Log.Mark]), or the zero value.
	Last int64
}

// Log is a write-ahead log in a directory of segment files.
type Log struct {
	dir      string
	opts     Options
	segs     []Segment // oldest first; the last is the one appended to
	lastID   uint64    // the highest segment number used: numbers are never reused
	f        *os.File  // the last segment, open for appending
	w        *bufio.Writer
	replayed bool
	closed   bool
}

// Open opens the log in dir, creating dir when it is not there. It finds
// the segments a previous run left; read them with [Log.Replay] before
// appending.
func Open(dir string, opts Options) (*Log, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	l := &Log{dir: dir, opts: opts}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, suffix) {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSuffix(name, suffix), 10, 64)
		if err != nil || id == 0 {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("wal: %w", err)
		}
		l.segs = append(l.segs, Segment{ID: id, Size: info.Size()})
	}
	slices.SortFunc(l.segs, func(a, b Segment) int { return cmpUint(a.ID, b.ID) })
	if n := len(l.segs); n > 0 {
		l.lastID = l.segs[n-1].ID
	}
	l.replayed = len(l.segs) == 0
	return l, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (l *Log) path(id uint64) string {
	return filepath.Join(l.dir, fmt.Sprintf("%020d%s", id, suffix))
}

// Replay calls fn with each record of the segments found by Open, oldest
// first, and with the segment it is in; the bytes are valid only during
// the call. A torn record at the end of the last segment is dropped and
// the segment truncated before it. It stops at fn's first error and
// returns it.
func (l *Log) Replay(fn func(seg uint64, rec []byte) error) error {
	if l.closed {
		return ErrClosed
	}
	for i := range l.segs {
		last := i == len(l.segs)-1
		size, err := l.replaySegment(l.segs[i].ID, last, fn)
		if err != nil {
			return err
		}
		l.segs[i].Size = size
	}
	l.replayed = true
	return nil
}

// replaySegment reads one segment's records and returns the size of its
// whole records, truncating a torn tail of the last segment.
func (l *Log) replaySegment(id uint64, last bool, fn func(uint64, []byte) error) (int64, error) {
	path := l.path(id)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var off int64
	var hdr [headerSize]byte
	var buf []byte
	for {
		torn := func(reason string) (int64, error) {
			if !last {
				return 0, &CorruptError{Segment: path, Offset: off, Reason: reason}
			}
			if err := os.Truncate(path, off); err != nil {
				return 0, fmt.Errorf("wal: truncating a torn record: %w", err)
			}
			return off, nil
		}
		n, err := io.ReadFull(r, hdr[:])
		switch {
		case err == io.EOF:
			return off, nil
		case err == io.ErrUnexpectedEOF:
			return torn(fmt.Sprintf("a header cut short after %d bytes", n))
		case err != nil:
			return 0, fmt.Errorf("wal: %w", err)
		}
		size := binary.LittleEndian.Uint32(hdr[:4])
		if size > MaxRecord {
			return 0, &CorruptError{Segment: path, Offset: off, Reason: fmt.Sprintf("a record of %d bytes, more than %d", size, MaxRecord)}
		}
		buf = slices.Grow(buf[:0], int(size))[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return torn(fmt.Sprintf("a record of %d bytes cut short", size))
			}
			return 0, fmt.Errorf("wal: %w", err)
		}
		if crc32.Checksum(buf, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			if last {
				// A record whose bytes did not all reach the disk before a
				// crash, and nothing after it: never synced.
				if _, err := r.Peek(1); err == io.EOF {
					return torn("a record whose checksum does not match, at the end")
				}
			}
			return 0, &CorruptError{Segment: path, Offset: off, Reason: "checksum mismatch"}
		}
		if err := fn(id, buf); err != nil {
			return 0, err
		}
		off += headerSize + int64(size)
	}
}

// Append writes rec to the log, in a new segment when the last is full,
// and returns the segment it went to. It is durable only after [Log.Sync].
func (l *Log) Append(rec []byte) (seg uint64, err error) {
	switch {
	case l.closed:
		return 0, ErrClosed
	case !l.replayed:
		return 0, errors.New("wal: Append before Replay of the segments found by Open")
	case len(rec) > MaxRecord:
		return 0, fmt.Errorf("wal: a record of %d bytes, more than %d", len(rec), MaxRecord)
	}
	if l.f == nil || l.segs[len(l.segs)-1].Size >= l.opts.SegmentSize {
		if err := l.rotate(); err != nil {
			return 0, err
		}
	}
	var hdr [headerSize]byte
	binary.LittleEndian.PutUint32(hdr[:4], uint32(len(rec)))
	binary.LittleEndian.PutUint32(hdr[4:], crc32.Checksum(rec, castagnoli))
	if _, err := l.w.Write(hdr[:]); err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	if _, err := l.w.Write(rec); err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	s := &l.segs[len(l.segs)-1]
	s.Size += headerSize + int64(len(rec))
	return s.ID, nil
}

// rotate starts a new segment after the last, syncing the one it leaves.
func (l *Log) rotate() error {
	if l.f != nil {
		if err := l.syncFile(); err != nil {
			return err
		}
		if err := l.f.Close(); err != nil {
			return fmt.Errorf("wal: %w", err)
		}
		l.f = nil
	}
	id := l.lastID + 1
	f, err := os.OpenFile(l.path(id), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := syncDir(l.dir); err != nil {
		f.Close()
		return err
	}
	l.f, l.w = f, bufio.NewWriterSize(f, 64<<10)
	l.lastID = id
	l.segs = append(l.segs, Segment{ID: id})
	return nil
}

// Rotate syncs and closes the segment appended to, so that it can be
// removed; the next Append starts a new one.
func (l *Log) Rotate() error {
	if l.closed {
		return ErrClosed
	}
	if l.f == nil {
		return nil
	}
	err := l.syncFile()
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("wal: %w", cerr)
	}
	l.f, l.w = nil, nil
	return err
}

// Sync makes every record appended so far durable.
func (l *Log) Sync() error {
	if l.closed {
		return ErrClosed
	}
	if l.f == nil {
		return nil
	}
	return l.syncFile()
}

func (l *Log) syncFile() error {
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}

// Mark raises the mark of segment seg to last when it is higher: the
// caller's note of the latest window its records reach (such as a window's
// end in Unix milliseconds), which [Log.Segments] reports.
func (l *Log) Mark(seg uint64, last int64) {
	for i := range l.segs {
		if l.segs[i].ID == seg {
			l.segs[i].Last = max(l.segs[i].Last, last)
			return
		}
	}
}

// Segments returns the log's segments, oldest first.
func (l *Log) Segments() []Segment { return slices.Clone(l.segs) }

// Remove deletes segment seg. The segment appended to cannot be removed
// while it is open; it is closed once Append starts the next.
func (l *Log) Remove(seg uint64) error {
	if l.closed {
		return ErrClosed
	}
	i := slices.IndexFunc(l.segs, func(s Segment) bool { return s.ID == seg })
	switch {
	case i < 0:
		return fmt.Errorf("wal: no segment %d", seg)
	case l.f != nil && i == len(l.segs)-1:
		return fmt.Errorf("wal: segment %d is being appended to", seg)
	}
	if err := os.Remove(l.path(seg)); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	l.segs = slices.Delete(l.segs, i, i+1)
	return syncDir(l.dir)
}

// Close syncs and closes the log. Closing twice is safe.
func (l *Log) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.syncFile()
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("wal: %w", cerr)
	}
	return err
}

// syncDir makes a segment's creation or removal durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}
