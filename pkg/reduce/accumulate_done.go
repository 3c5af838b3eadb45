package reduce

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/reduceclient"
)

// The kinds of log record of an Accumulator, besides recWatermark.
const (
	recAccumulated byte = 'A' // a message read, with its sequence number
	recClosed      byte = 'C' // a key set's accumulator closed, up to a sequence number
	recDone        byte = 'D' // a key set's messages done up to an event time and sequence, in a batch
	recConfirmed   byte = 'K' // the outputs of a batch's done marks are written
)

// drain turns the responses received so far into messages to write, and
// notes what they make done.
func (a *Accumulator) drain() ([]isb.Message, error) {
	a.mu.Lock()
	resps, err := a.resps, a.rerr
	a.resps = nil
	a.mu.Unlock()
	var out []isb.Message
	for _, r := range resps {
		id := window.KeysID(r.Keys)
		if r.EOF {
			q := a.closing[id]
			if len(q) == 0 {
				return nil, fmt.Errorf("%w: an EOF of keys %q, which were not closed", udf.ErrProtocol, r.Keys)
			}
			a.closed = append(a.closed, q[0])
			if a.closing[id] = q[1:]; len(q) == 1 {
				delete(a.closing, id)
			}
			continue
		}
		m := r.Message
		a.emitted(id, m.ID, r.Watermark)
		if strings.HasPrefix(m.ID, HeartbeatPrefix) || slices.Contains(m.Tags, reduceclient.DropTag) {
			continue
		}
		if m.Keys == nil {
			m.Keys = r.Keys
		}
		if m.ID == "" {
			a.nextID++
			m.ID = fmt.Sprintf("%s-%d-%d", id, m.EventTime.UnixNano(), a.nextID)
		}
		out = append(out, m)
	}
	for _, ks := range a.touched {
		for ks.done < len(ks.fed) {
			m := ks.fed[ks.done]
			if _, ok := ks.emitted[m.m.ID]; !ok && !m.m.EventTime.Before(ks.outWM) {
				break
			}
			ks.done++
		}
	}
	if err != nil && len(out) == 0 {
		return nil, err
	}
	return out, nil
}

// emitted notes an output of the key set id, with ID msgID and watermark
// wm: the fed message with that ID is emitted, and the key set's outbound
// watermark is at least wm. While a key set closes and a new accumulator of the same keys
// is open, the watermark is nobody's: it counts for neither.
func (a *Accumulator) emitted(id, msgID string, wm time.Time) {
	if lv, ok := a.undone[msgID]; ok && lv.fed && lv.ks.id == id {
		if lv.ks.emitted == nil {
			lv.ks.emitted = map[string]struct{}{}
		}
		lv.ks.emitted[msgID] = struct{}{}
		a.touch(lv.ks)
	}
	var ks *keySet
	switch q := a.closing[id]; {
	case len(q) > 0 && a.sets[id] == nil:
		ks = q[0]
	case len(q) == 0:
		ks = a.sets[id]
	}
	if ks != nil && wm.After(ks.outWM) {
		ks.outWM = wm
		a.touch(ks)
	}
}

func (a *Accumulator) touch(ks *keySet) {
	if !ks.touched {
		ks.touched = true
		a.touched = append(a.touched, ks)
	}
}

// logDone appends a done record for each key set with messages newly done,
// all in a new batch, and syncs them: they count once Commit confirms the
// batch, after its outputs are written.
func (a *Accumulator) logDone() error {
	l := a.cfg.Log
	if l == nil {
		return nil
	}
	n := 0
	for _, ks := range a.touched {
		if ks.done <= ks.logged {
			continue
		}
		if n == 0 && !a.pending {
			a.batch++
		}
		last := ks.fed[ks.done-1]
		if _, err := l.Append(appendDone(a.buf[:0], a.batch, ks.keys, last.m.EventTime, last.seq)); err != nil {
			return err
		}
		ks.logged = ks.done
		n++
	}
	if n == 0 {
		return nil
	}
	a.pending = true
	return l.Sync()
}

// Commit records that what Advance returned is written: the done marks of
// its batch are confirmed and the key sets whose accumulators have closed
// are noted in the log, with the watermark; the messages done are
// forgotten, and the log's segments that hold no message not done are
// removed.
func (a *Accumulator) Commit() error {
	l := a.cfg.Log
	if l != nil && (a.dirty || len(a.closed) > 0 || a.pending) {
		for _, ks := range a.closed {
			a.buf = appendClosed(a.buf[:0], ks.keys, ks.maxSeq)
			if _, err := l.Append(a.buf); err != nil {
				return err
			}
		}
		if a.pending {
			if _, err := l.Append(appendUvarint(append(a.buf[:0], recConfirmed), a.batch)); err != nil {
				return err
			}
		}
		if a.hasWM {
			if _, err := l.Append(appendWatermark(a.buf[:0], a.wm)); err != nil {
				return err
			}
		}
		if err := l.Sync(); err != nil {
			return err
		}
	}
	for _, ks := range a.touched {
		for _, m := range ks.fed[:ks.done] {
			a.release(ks, m)
		}
		ks.fed = slices.Delete(ks.fed, 0, ks.done)
		ks.done, ks.logged, ks.touched = 0, 0, false
	}
	for _, ks := range a.closed {
		for _, m := range ks.fed {
			a.release(ks, m)
		}
		for _, m := range ks.held {
			a.release(ks, m)
		}
		ks.fed, ks.held = nil, nil
	}
	clear(a.touched)
	a.touched, a.closed, a.dirty, a.pending = a.touched[:0], nil, false, false
	if l == nil {
		return nil
	}
	return a.removeSegments()
}

// removeSegments removes the oldest segments while they hold no message
// not done. Every done or closed record covers messages logged before it,
// so the records of a segment removed speak only of messages removed with
// it; the watermark, which speaks of all, is logged again.
func (a *Accumulator) removeSegments() error {
	l := a.cfg.Log
	segs := l.Segments()
	removed := false
	for i, s := range segs {
		if a.segUndone[s.ID] > 0 {
			break
		}
		if i == len(segs)-1 {
			if _, had := a.segUndone[s.ID]; !had {
				break // records of closes, marks and watermarks alone: kept until a message follows
			}
			if err := l.Rotate(); err != nil {
				return err
			}
		}
		if err := l.Remove(s.ID); err != nil {
			return err
		}
		delete(a.segUndone, s.ID)
		removed = true
	}
	if !removed || !a.hasWM {
		return nil
	}
	if _, err := l.Append(appendWatermark(a.buf[:0], a.wm)); err != nil {
		return err
	}
	return l.Sync()
}

// appendClosed encodes a closed record: the keys, and the latest sequence
// of the key set's messages.
func appendClosed(b []byte, keys []string, upTo uint64) []byte {
	b = appendKeys(append(b, recClosed), keys)
	return appendUvarint(b, upTo)
}

// appendDone encodes a done record: its batch, the keys, and the event time
// and sequence of the key set's last message done.
func appendDone(b []byte, batch uint64, keys []string, et time.Time, seq uint64) []byte {
	b = appendUvarint(append(b, recDone), batch)
	b = appendKeys(b, keys)
	b = binary.AppendVarint(b, et.UnixNano())
	return appendUvarint(b, seq)
}

func appendKeys(b []byte, keys []string) []byte {
	b = appendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
	}
	return b
}

func (r *reader) keys() []string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errRecord
		return nil
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = r.string()
	}
	return keys
}
