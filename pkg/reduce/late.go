package reduce

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

// LateLogInterval is the shortest time between two lines of a LateLog.
const LateLogInterval = 10 * time.Second

// Late is what a reader dropped as late: how many messages, and of the one
// furthest behind, how late it was (the watermark less its event time),
// the watermark, and the window closest to it. Window is the zero value
// where there are no windows (an accumulator), and Watermark too where the
// watermark is not known.
type Late struct {
	Count     int
	Lateness  time.Duration
	Watermark time.Time
	Window    window.Window
}

// add notes d in l: the counts add up, and the furthest behind is kept.
func (l *Late) add(d Late) {
	if l.Count == 0 || d.Lateness > l.Lateness {
		l.Lateness, l.Watermark, l.Window = d.Lateness, d.Watermark, d.Window
	}
	l.Count += d.Count
}

// LateLog logs, at warn, the messages a reduce vertex drops as late: a line
// "late messages dropped" at once for the first, and then at most one line
// every LateLogInterval, with the messages dropped since the last line
// (count), the furthest behind of them (lateness, watermark) and its
// window, the latest window its event time falls in, which has closed.
// Drops that no line has counted get one LateLogInterval after the last
// line. One LateLog serves every reader of a vertex; it is safe for
// concurrent use. Close logs what no line has counted and stops.
type LateLog struct {
	log *zap.Logger
	clk clock.Clock

	mu      sync.Mutex
	pending Late        // dropped since the last line
	timer   clock.Timer // the next line's, while lines go out
	closed  bool
}

// NewLateLog returns a LateLog that writes to log, its lines timed by clk.
func NewLateLog(log *zap.Logger, clk clock.Clock) *LateLog {
	return &LateLog{log: log, clk: clk}
}

// Dropped notes the messages d of a reader dropped as late.
func (l *LateLog) Dropped(d Late) {
	if d.Count <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending.add(d)
	if l.timer == nil && !l.closed {
		l.line()
		l.timer = l.clk.AfterFunc(LateLogInterval, l.tick)
	}
}

// tick writes the line of the drops since the last, if any, and waits for
// the next; with none, lines stop until the next drop.
func (l *LateLog) tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.pending.Count == 0 {
		l.timer = nil
		return
	}
	l.line()
	l.timer = l.clk.AfterFunc(LateLogInterval, l.tick)
}

// line writes the line of the drops pending. l.mu is held.
func (l *LateLog) line() {
	d := l.pending
	l.pending = Late{}
	fields := []zap.Field{zap.Int("count", d.Count)}
	if !d.Watermark.IsZero() {
		fields = append(fields, zap.Duration("lateness", d.Lateness), zap.Time("watermark", d.Watermark))
	}
	if d.Window != (window.Window{}) {
		fields = append(fields, zap.Stringer("window", d.Window))
	}
	l.log.Warn("late messages dropped", fields...)
}

// Close writes the line of the drops no line has counted, and stops the
// lines. It is safe to call twice.
func (l *LateLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.pending.Count > 0 {
		l.line()
	}
	return nil
}

// lateBehind is what a Stage that does not tell it dropped: count
// messages, the furthest behind of msgs behind the watermark wm (zero:
// not known) taken for the latest.
func lateBehind(count int, msgs []isb.Message, wm time.Time) Late {
	d := Late{Count: count}
	if wm.IsZero() {
		return d
	}
	for _, m := range msgs {
		if behind := wm.Sub(m.EventTime); behind > 0 && (d.Watermark.IsZero() || behind > d.Lateness) {
			d.Lateness, d.Watermark = behind, wm
		}
	}
	return d
}
