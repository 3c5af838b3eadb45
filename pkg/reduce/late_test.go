package reduce

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

// lines is each logged line's message and fields, in order.
func lines(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		s := e.Level.String() + " " + e.Message
		for _, f := range e.Context {
			switch f.Type {
			case zapcore.DurationType:
				s += fmt.Sprintf(" %s=%s", f.Key, time.Duration(f.Integer))
			case zapcore.TimeType:
				s += fmt.Sprintf(" %s=%d", f.Key, time.Unix(0, f.Integer).Unix())
			case zapcore.StringerType:
				s += fmt.Sprintf(" %s=%s", f.Key, f.Interface)
			default:
				s += fmt.Sprintf(" %s=%d", f.Key, f.Integer)
			}
		}
		out = append(out, s)
	}
	return out
}

func win(start, end int64) window.Window {
	return window.Window{Start: time.Unix(start, 0), End: time.Unix(end, 0)}
}

// TestLateLogRate logs the first drop at once, then at most one line every
// 10 s with the drops since the last line, the furthest behind of them and
// its window, and no line for 10 s without drops; a drop after such a
// quiet spell is logged at once, and Close logs what no line has counted.
func TestLateLogRate(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	clk := clock.NewManual(time.Unix(1000, 0))
	l := NewLateLog(zap.New(core), clk)
	wm := time.Unix(120, 0)
	step := func(d time.Duration, drops ...Late) {
		clk.Advance(d)
		for _, dr := range drops {
			l.Dropped(dr)
		}
	}
	want := []string{"warn late messages dropped count=2 lateness=5s watermark=120 window=[1970-01-01T00:01:50Z, 1970-01-01T00:02:00Z)"}
	check := func(when string) {
		t.Helper()
		if got := lines(logs); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: lines\n%q\nwant\n%q", when, got, want)
		}
	}
	step(0, Late{Count: 2, Lateness: 5 * time.Second, Watermark: wm, Window: win(110, 120)})
	check("the first drop")
	step(time.Second, Late{Count: 3, Lateness: 18 * time.Second, Watermark: wm, Window: win(100, 110)})
	step(8*time.Second, Late{Count: 1, Lateness: time.Second, Watermark: wm, Window: win(110, 120)}, Late{})
	check("9s on")
	step(time.Second)
	want = append(want, "warn late messages dropped count=4 lateness=18s watermark=120 window=[1970-01-01T00:01:40Z, 1970-01-01T00:01:50Z)")
	check("10s on")
	step(9*time.Second + 999*time.Millisecond)
	check("10s more, no drops")
	step(time.Millisecond)
	if clk.Pending() != 0 {
		t.Errorf("%d timers pending after 10 s without drops", clk.Pending())
	}
	step(5*time.Second, Late{Count: 7})
	want = append(want, "warn late messages dropped count=7")
	check("a drop after a quiet spell")
	step(time.Second, Late{Count: 1, Lateness: 3 * time.Second, Watermark: wm})
	l.Close()
	want = append(want, "warn late messages dropped count=1 lateness=3s watermark=120")
	check("Close")
	l.Close()
	step(10*time.Second, Late{Count: 1})
	check("after Close")
}

// TestLoopLogsLate runs a reader on the manual clock: the messages it drops
// as late are logged with the furthest behind's lateness and window, the
// later ones 10 s after.
func TestLoopLogsLate(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	clk := clock.NewManual(time.Unix(1000, 0))
	in := memory.New("in", 100, 5*time.Millisecond, clk)
	out := memory.New("out", 100, 5*time.Millisecond, clk)
	p := newCounter(t, nil)
	var wm watermark
	wm.set(100)
	metrics := NewMetrics(prometheus.NewRegistry())
	late := NewLateLog(zap.New(core), clk)
	defer late.Close()
	loop := &Loop{Reader: in, Writer: out, Processor: p, Watermark: wm.get, Limiter: throttle.Noop{}, BatchSize: 10,
		Clock: clk, Metrics: metrics, LateLog: late}
	runtest.Start(t, loop)
	ctx := context.Background()
	write := func(msgs ...isb.Message) {
		t.Helper()
		if err := in.Write(ctx, msgs, make([]error, len(msgs))); err != nil {
			t.Fatal(err)
		}
	}
	write(msg("1", "a", 101), msg("2", "b", 102))
	runtest.WaitFor(t, "the messages read", func() bool { return testutil.ToFloat64(metrics.Read) == 2 })
	wm.set(120)
	bctx, cancel := context.WithTimeout(ctx, runtest.Timeout)
	defer cancel()
	if err := clk.BlockUntil(bctx, 1); err != nil { // the reader waits in a read
		t.Fatal("the reader does not read")
	}
	clk.Advance(5 * time.Millisecond) // the next turn closes [100,110) and [110,120)
	runtest.WaitFor(t, "the window's results", func() bool { return len(out.Messages()) == 2 })
	write(msg("3", "a", 105), msg("4", "a", 99), msg("5", "b", 121), msg("6", "b", 115))
	runtest.WaitFor(t, "the late messages", func() bool { return testutil.ToFloat64(metrics.Late) == 3 })
	want := []string{"warn late messages dropped count=3 lateness=21s watermark=120 window=[1970-01-01T00:01:30Z, 1970-01-01T00:01:40Z)"}
	if got := lines(logs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
	write(msg("7", "a", 111))
	runtest.WaitFor(t, "one more late message", func() bool { return testutil.ToFloat64(metrics.Late) == 4 })
	if n := logs.Len(); n != 1 {
		t.Errorf("%d lines within 10 s", n)
	}
	clk.Advance(LateLogInterval)
	want = append(want, "warn late messages dropped count=1 lateness=9s watermark=120 window=[1970-01-01T00:01:50Z, 1970-01-01T00:02:00Z)")
	if got := lines(logs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
}

// TestLateBehind reckons the lateness of what a Stage that does not tell
// dropped from the watermark the Loop gave it last.
func TestLateBehind(t *testing.T) {
	msgs := []isb.Message{msg("1", "a", 105), msg("2", "a", 99), msg("3", "a", 130)}
	for _, tt := range []struct {
		name string
		wm   time.Time
		want Late
	}{
		{"behind", time.Unix(120, 0), Late{Count: 2, Lateness: 21 * time.Second, Watermark: time.Unix(120, 0)}},
		{"no watermark", time.Time{}, Late{Count: 2}},
		{"none behind", time.Unix(90, 0), Late{Count: 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := lateBehind(2, msgs, tt.wm); got != tt.want {
				t.Errorf("lateBehind = %+v, want %+v", got, tt.want)
			}
		})
	}
}
