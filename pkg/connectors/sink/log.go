package sink

import (
	"bufio"
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// Log writes one line per message to its writer (stdout for the log sink), in the
// words of Numaflow's log sink:
//
//	Payload - {"Data":{"value":7}} Keys - key-0-1 EventTime - 1700000000000 Headers - X-A: 1,  ID - in-0-7
//
// Keys are joined with ",", the event time is in Unix milliseconds, and each
// header is written "name: value, ".
// Everything is written as it is, but a newline, written as the two characters
// \n, so that every message stays on one line. Log is safe for
// concurrent use.
type Log struct {
	mu  sync.Mutex
	out io.Writer
	w   *bufio.Writer
}

var _ isb.Writer = (*Log)(nil)

// NewLog returns a log sink writing to w.
func NewLog(w io.Writer) *Log { return &Log{out: w, w: bufio.NewWriterSize(w, 64<<10)} }

// Write writes a line per message and flushes the batch.
func (l *Log) Write(_ context.Context, msgs []isb.Message, errs []error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var num [20]byte
	for i := range msgs {
		m := &msgs[i]
		l.w.WriteString("Payload - ")
		// The payload is only read, and copied into the buffer.
		writeOneLine(l.w, unsafe.String(unsafe.SliceData(m.Value), len(m.Value)))
		l.w.WriteString(" Keys - ")
		for j, k := range m.Keys {
			if j > 0 {
				l.w.WriteByte(',')
			}
			writeOneLine(l.w, k)
		}
		l.w.WriteString(" EventTime - ")
		l.w.Write(strconv.AppendInt(num[:0], m.EventTime.UnixMilli(), 10))
		l.w.WriteString(" Headers - ")
		writeHeaders(l.w, m.Headers)
		l.w.WriteString(" ID - ")
		writeOneLine(l.w, m.ID)
		l.w.WriteByte('\n')
		errs[i] = nil
	}
	if err := l.w.Flush(); err != nil {
		l.w.Reset(l.out) // a bufio.Writer keeps its first error; start afresh
		return err
	}
	return nil
}

// writeOneLine writes s with each newline as the two characters \n.
func writeOneLine(w *bufio.Writer, s string) {
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			w.WriteString(s)
			return
		}
		w.WriteString(s[:i])
		w.WriteString(`\n`)
		s = s[i+1:]
	}
}

func writeHeaders(w *bufio.Writer, h map[string]string) {
	if len(h) == 0 {
		return
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		writeOneLine(w, k)
		w.WriteString(": ")
		writeOneLine(w, h[k])
		w.WriteString(", ")
	}
}
