package reduce

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

// Config is what a Processor reduces, and where it keeps its state.
type Config struct {
	// Strategy assigns messages to windows (window.Fixed, window.Sliding,
	// window.Session).
	Strategy window.Strategy
	// AllowedLateness keeps a window open this long past its end.
	AllowedLateness time.Duration
	// Keyed reduces each key set of a window on its own; without, all of a
	// window's messages are reduced together, with no keys.
	Keyed bool
	// Reducer reduces a window's messages. With session windows, a Reducer
	// that is a SessionReducer (RemoteSession's) is told of each session's
	// operations as messages are added, and reduces a session as it closes.
	// With fixed and sliding windows, a Reducer that is a StreamReducer
	// (RemoteStream's) is sent each message as it is added, and what its
	// functions send comes out of each Advance, the windows open or not.
	Reducer Reducer
	// Log is the write-ahead log; nil keeps state in memory alone.
	Log *wal.Log
}

// Processor keeps the open windows of one reader of a reduce vertex.
type Processor struct {
	cfg     Config
	book    *window.Book[isb.Message] // the open windows and their messages by key set
	late    int64
	dropped Late      // what the last Add dropped as late
	pending time.Time // the watermark of the last Advance, to Commit
	dirty   bool      // Advance closed windows since the last Commit
	buf     []byte
	// recovered holds the IDs of the messages the log gave back, with when
	// their last window closes: the reader may deliver them again (read and
	// logged, not acked before a crash), and they are not to count twice.
	recovered map[string]time.Time
	dups      int64
	// sessions is the Reducer when it is a SessionReducer of session
	// windows, which holds the open sessions; stale says that its server
	// may lack some (after a restart, or a failed call), which go again
	// before anything else.
	sessions SessionReducer
	stale    bool
	// stream is the Reducer when it is a StreamReducer of aligned windows;
	// streamStale says that its server may lack open windows.
	stream      StreamReducer
	streamStale bool
}

// New returns a Processor for cfg. With a log, call [Processor.Recover]
// before the first Add.
func New(cfg Config) (*Processor, error) {
	if cfg.Reducer == nil {
		return nil, errors.New("reduce: Config.Reducer is nil")
	}
	if len(cfg.Strategy.Assign(nil, time.Unix(0, 0))) == 0 {
		return nil, errors.New("reduce: Config.Strategy assigns no windows; make it with window.Fixed, window.Sliding or window.Session")
	}
	p := &Processor{cfg: cfg, book: window.NewBook[isb.Message](cfg.Strategy, cfg.AllowedLateness)}
	if sessions, ok := cfg.Reducer.(SessionReducer); ok && cfg.Strategy.Timeout() > 0 {
		p.sessions, p.stale = sessions, true
	}
	if stream, ok := cfg.Reducer.(StreamReducer); ok && cfg.Strategy.Timeout() == 0 {
		p.stream, p.streamStale = stream, true
	}
	return p, nil
}

// Recover replays the log: messages come back to their open windows, and
// the windows a committed watermark closed stay closed, their state
// dropped. It returns how many messages came back. A SessionReducer is
// sent the sessions still open, and a StreamReducer the windows still open,
// by the next Add or Advance.
func (p *Processor) Recover() (int, error) {
	if p.cfg.Log == nil {
		return 0, nil
	}
	n := 0
	err := p.cfg.Log.Replay(func(_ uint64, rec []byte) error {
		if len(rec) == 0 {
			return errors.New("reduce: an empty log record")
		}
		switch rec[0] {
		case recMessage:
			m, err := decodeMessage(rec[1:])
			if err != nil {
				return err
			}
			if ws, _, late := p.put(m); !late {
				n++
				if m.ID != "" {
					if p.recovered == nil {
						p.recovered = map[string]time.Time{}
					}
					p.recovered[m.ID] = p.settles(m, ws)
				}
			}
		case recWatermark:
			r := &reader{b: rec[1:]}
			wm := time.Unix(0, r.varint())
			if r.err != nil {
				return fmt.Errorf("%w: a watermark", r.err)
			}
			p.book.Advance(wm) // the windows it closes had their results written
			p.pending = wm
		default:
			return fmt.Errorf("reduce: a log record of unknown kind %q", rec[0])
		}
		return nil
	})
	return n, err
}

// Add puts msgs in their open windows and makes them durable in the log.
// It returns how many were late (their windows had all closed) and dropped.
// Once it returns without error, msgs may be acked upstream. A
// SessionReducer is told what each message did to its sessions; a
// StreamReducer is sent each message in each of its windows.
func (p *Processor) Add(ctx context.Context, msgs []isb.Message) (late int, err error) {
	l := p.cfg.Log
	p.dropped = Late{}
	if p.sessions != nil && p.stale {
		if err := p.resend(ctx, nil); err != nil {
			return 0, err
		}
	}
	if p.stream != nil && p.streamStale {
		if err := p.restream(ctx, nil); err != nil {
			return 0, err
		}
	}
	for i := range msgs {
		if _, ok := p.recovered[msgs[i].ID]; ok && msgs[i].ID != "" {
			delete(p.recovered, msgs[i].ID) // delivered again after a crash: logged already
			p.dups++
			continue
		}
		ws, c, dropped := p.put(msgs[i])
		if dropped {
			late++
			p.noteLate(msgs[i])
			continue
		}
		if p.sessions != nil {
			if err := p.tellOrResend(ctx, c, msgs[i]); err != nil {
				return 0, err
			}
		}
		if p.stream != nil {
			if err := p.sendStream(ctx, p.keys(msgs[i]), ws, msgs[i]); err != nil {
				return 0, err
			}
		}
		if l == nil {
			continue
		}
		p.buf = appendMessage(p.buf[:0], &msgs[i])
		seg, err := l.Append(p.buf)
		if err != nil {
			return 0, err
		}
		l.Mark(seg, p.settles(msgs[i], ws).UnixNano())
	}
	if l != nil {
		if err := l.Sync(); err != nil {
			return 0, err
		}
	}
	p.late += int64(late)
	return late, nil
}

// noteLate notes m, dropped as late, in what Add dropped.
func (p *Processor) noteLate(m isb.Message) {
	wm, _ := p.book.Watermark()
	w := window.Window{Start: m.EventTime, End: m.EventTime.Add(p.cfg.Strategy.Timeout())}
	if p.cfg.Strategy.Timeout() == 0 {
		ws := p.cfg.Strategy.Assign(nil, m.EventTime)
		w = ws[len(ws)-1]
	}
	p.dropped.add(Late{Count: 1, Lateness: wm.Sub(m.EventTime), Watermark: wm, Window: w})
}

// Dropped is what the last Add dropped as late: how many, and of the one
// furthest behind the watermark, how far, and the latest window of its
// event time (its session's, had it opened one, with session windows).
func (p *Processor) Dropped() Late { return p.dropped }

// put puts m in its open windows and returns them, with sessions what it
// did to them; late when it has none.
func (p *Processor) put(m isb.Message) (windows []window.Window, c window.Change, late bool) {
	keys := p.keys(m)
	if p.cfg.Strategy.Timeout() > 0 {
		c, late = p.book.AddSession(keys, m.EventTime, m)
		if late {
			return nil, c, true
		}
		return []window.Window{c.Window}, c, false
	}
	windows, late = p.book.Add(keys, m.EventTime, m)
	return windows, c, late
}

// keys are the keys m is grouped by: its own when keyed, else none.
func (p *Processor) keys(m isb.Message) []string {
	if p.cfg.Keyed {
		return m.Keys
	}
	return nil
}

// tellOrResend tells the SessionReducer what m did to its sessions; when
// that fails, it sends the open sessions (m's included) again.
func (p *Processor) tellOrResend(ctx context.Context, c window.Change, m isb.Message) error {
	err := p.tell(ctx, p.keys(m), c, m)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	p.stale = true
	return p.resend(ctx, nil)
}

// Advance moves the watermark to wm and reduces each window it closes, in
// the order of their ends, each key set in the order of its keys. With a
// StreamReducer, what its functions have sent so far comes first, of the
// windows open or closing, and then the rest of each closing window's
// results. Write the results, then call [Processor.Commit]. A watermark
// behind the last closes nothing.
func (p *Processor) Advance(ctx context.Context, wm time.Time) ([]isb.Message, error) {
	closed := p.book.Advance(wm)
	var out []isb.Message
	var closing []streamGroup
	if p.stream != nil {
		closing = streamGroups(closed)
		var err error
		if out, err = p.takeStreamed(ctx, closing); err != nil {
			return nil, err
		}
	}
	if len(closed) == 0 {
		return out, nil
	}
	bound := p.bound(wm)
	for id, at := range p.recovered {
		if !at.After(bound) {
			delete(p.recovered, id) // its windows are closed: what comes again is late
		}
	}
	if len(p.recovered) == 0 {
		p.recovered = nil
	}
	if p.sessions != nil && p.stale {
		if err := p.resend(ctx, closed); err != nil {
			return nil, err
		}
	}
	var err error
	if p.stream != nil {
		out, err = p.endStreams(ctx, out, closing)
	} else {
		out, err = p.reduceClosed(ctx, out, closed)
	}
	if err != nil {
		return nil, err
	}
	p.pending, p.dirty = wm, true
	return out, nil
}

// reduceClosed appends the results of the windows closed to out: each key
// set of each window reduced whole, or closed on the SessionReducer.
func (p *Processor) reduceClosed(ctx context.Context, out []isb.Message, closed []window.Closed[isb.Message]) ([]isb.Message, error) {
	for i, c := range closed {
		for _, g := range c.Groups {
			var res []isb.Message
			var err error
			if p.sessions != nil {
				res, err = p.closeSession(ctx, closed[i:], g)
			} else {
				res, err = p.cfg.Reducer.Reduce(ctx, c.Window, g.Keys, g.Items)
			}
			if err != nil {
				return nil, fmt.Errorf("reduce: window %v, keys %q: %w", c.Window, g.Keys, err)
			}
			for i := range res {
				r := &res[i]
				if r.Keys == nil {
					r.Keys = g.Keys
				}
				r.EventTime = c.Window.ResultTime()
				r.ID = resultID(c.Window, g.Keys, i)
			}
			out = append(out, res...)
		}
	}
	return out, nil
}

// endStreams appends to out the rest of the results of each window and
// key set closing, ended on the StreamReducer in order.
func (p *Processor) endStreams(ctx context.Context, out []isb.Message, closing []streamGroup) ([]isb.Message, error) {
	for j := range closing {
		res, err := p.endStream(ctx, closing[j:])
		if err != nil {
			return nil, fmt.Errorf("reduce: window %v, keys %q: %w", closing[j].w, closing[j].g.Keys, err)
		}
		out = appendStreamed(out, res)
	}
	return out, nil
}

// Commit records that the results of the last Advance are written: the
// log notes its watermark, so that a restart does not reduce those windows
// again, and the segments whose windows have all closed are removed.
func (p *Processor) Commit() error {
	l := p.cfg.Log
	if l == nil || !p.dirty {
		return nil
	}
	wm := p.pending
	if _, err := l.Append(appendWatermark(p.buf[:0], wm)); err != nil {
		return err
	}
	if err := l.Sync(); err != nil {
		return err
	}
	p.dirty = false
	segs := l.Segments()
	bound := p.bound(wm).UnixNano()
	for i, s := range segs {
		if s.Last > bound {
			continue
		}
		if i == len(segs)-1 {
			if s.Last == 0 {
				continue // watermarks alone: kept until a message follows
			}
			if err := l.Rotate(); err != nil {
				return err
			}
		}
		if err := l.Remove(s.ID); err != nil {
			return err
		}
	}
	return nil
}

// settles is when m, put in windows ws, has its windows closed: with
// aligned windows, the end of the last plus the allowed lateness; with
// sessions, which grow, its event time, which [Processor.bound] passes once
// every session that may hold it has closed.
func (p *Processor) settles(m isb.Message, ws []window.Window) time.Time {
	if p.cfg.Strategy.Timeout() > 0 {
		return m.EventTime
	}
	return ws[len(ws)-1].End.Add(p.cfg.AllowedLateness)
}

// bound is the latest time that settles has passed under watermark wm: the
// messages (and log segments) settled at or before it are in closed windows
// alone. With sessions it is just before the start of the oldest open one,
// or, with none open, the end of time.
func (p *Processor) bound(wm time.Time) time.Time {
	if p.cfg.Strategy.Timeout() == 0 {
		return wm
	}
	if start, ok := p.book.Oldest(); ok {
		return start.Add(-1)
	}
	return time.Unix(0, math.MaxInt64)
}

// Late is the number of messages dropped as late since the Processor began.
func (p *Processor) Late() int64 { return p.late }

// Duplicates is the number of messages the reader delivered again after a
// restart that the log had given back already, and that were dropped.
func (p *Processor) Duplicates() int64 { return p.dups }

// Open is the number of windows open.
func (p *Processor) Open() int { return p.book.Open() }

// resultID names the i-th result of a window and key set, the same in
// every run.
func resultID(w window.Window, keys []string, i int) string {
	return fmt.Sprintf("%d-%d-%s-%d", w.Start.UnixMilli(), w.End.UnixMilli(), window.KeysID(keys), i)
}
