package reduce

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

// doneMark is a done record read back: the messages of key set id up to
// event time et and sequence seq are done, once batch is confirmed.
type doneMark struct {
	batch uint64
	id    string
	et    time.Time
	seq   uint64
}

// Recover replays the log: the messages not done of the key sets not
// closed come back, to be fed again, in the order they were fed. It
// returns how many came back; [Accumulator.InDoubt] says how many of them
// were marked done without the mark being confirmed.
func (a *Accumulator) Recover() (int, error) {
	if a.cfg.Log == nil {
		return 0, nil
	}
	var marks []doneMark // of batches not yet confirmed
	err := a.cfg.Log.Replay(func(seg uint64, rec []byte) error {
		if len(rec) == 0 {
			return errors.New("reduce: an empty log record")
		}
		r := &reader{b: rec[1:]}
		switch rec[0] {
		case recAccumulated:
			seq := r.uvarint()
			if r.err != nil {
				return fmt.Errorf("%w: a message's sequence", r.err)
			}
			m, err := decodeMessage(r.b)
			if err != nil {
				return err
			}
			a.seq = max(a.seq, seq)
			a.hold(m, seq, seg)
		case recClosed:
			keys := r.keys()
			upTo := r.uvarint()
			if r.err != nil {
				return fmt.Errorf("%w: a closed key set", r.err)
			}
			a.forgetClosed(window.KeysID(keys), upTo)
		case recDone:
			d := doneMark{batch: r.uvarint()}
			keys := r.keys()
			d.et, d.seq = time.Unix(0, r.varint()), r.uvarint()
			if r.err != nil {
				return fmt.Errorf("%w: a done mark", r.err)
			}
			d.id = window.KeysID(keys)
			a.batch = max(a.batch, d.batch)
			marks = append(marks, d)
		case recConfirmed:
			batch := r.uvarint()
			if r.err != nil {
				return fmt.Errorf("%w: a confirmation", r.err)
			}
			for _, d := range marks {
				if d.batch == batch { // earlier batches were never confirmed: a crash came first
					a.forget(d.id, func(m accMsg) bool { return m.before(d.et, d.seq) })
				}
			}
			marks = marks[:0]
			a.batch = max(a.batch, batch)
		case recWatermark:
			wm := time.Unix(0, r.varint())
			if r.err != nil {
				return fmt.Errorf("%w: a watermark", r.err)
			}
			a.wm, a.hasWM = wm, true
		default:
			return fmt.Errorf("reduce: a log record of unknown kind %q", rec[0])
		}
		return nil
	})
	a.inDoubt = a.countInDoubt(marks)
	n := 0
	for _, ks := range a.sets {
		ks.maxSeq = 0
		for _, m := range ks.held {
			ks.maxSeq = max(ks.maxSeq, m.seq)
		}
		n += len(ks.held)
	}
	return n, err
}

// forget drops the leading held messages of key set id that done accepts
// (held are in the order fed, so those done come first), and the key set
// when none is left.
func (a *Accumulator) forget(id string, done func(accMsg) bool) {
	ks := a.sets[id]
	if ks == nil {
		return
	}
	n := 0
	for n < len(ks.held) && done(ks.held[n]) {
		a.release(ks, ks.held[n])
		n++
	}
	if ks.held = ks.held[n:]; len(ks.held) == 0 {
		delete(a.sets, id)
	}
}

// forgetClosed drops the held messages of key set id up to sequence upTo:
// its accumulator closed after them.
func (a *Accumulator) forgetClosed(id string, upTo uint64) {
	ks := a.sets[id]
	if ks == nil {
		return
	}
	n := 0
	for _, m := range ks.held {
		if m.seq <= upTo {
			a.release(ks, m)
			continue
		}
		ks.held[n] = m
		n++
	}
	if ks.held = ks.held[:n]; n == 0 {
		delete(a.sets, id)
	}
}

// countInDoubt counts the messages back from the log that marks not
// confirmed would have made done.
func (a *Accumulator) countInDoubt(marks []doneMark) int {
	upTo := map[string]doneMark{}
	for _, d := range marks {
		if p, ok := upTo[d.id]; !ok || d.et.After(p.et) || (d.et.Equal(p.et) && d.seq > p.seq) {
			upTo[d.id] = d
		}
	}
	n := 0
	for id, d := range upTo {
		if ks := a.sets[id]; ks != nil {
			for _, m := range ks.held {
				if !m.before(d.et, d.seq) {
					break
				}
				n++
			}
		}
	}
	return n
}
