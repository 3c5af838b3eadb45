package vertex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// marks are a vertex's watermarks: how far each of its readers has got, the
// watermark it computes from them, and where it publishes it.
type marks struct {
	spec     *Watermark
	src      *watermark.Source // a source vertex's
	trackers []*tracker        // a tracker per reader
	// reduced[i] is the watermark reduce reader i has closed its windows up
	// to and written their results (ms); closing[i] the one it closes now.
	reduced, closing []atomic.Int64
	lateness         time.Duration
	cur              atomic.Int64 // the vertex's watermark (ms)
}

// noneMs is watermark.None in ms.
var noneMs = watermark.None().UnixMilli()

// buildMarks wraps the vertex's readers to track how far they have got, and
// returns the wrapped readers.
func (v *Vertex) buildMarks(readers []isb.Reader) ([]isb.Reader, error) {
	ws := v.spec.Watermark
	m := &marks{spec: ws}
	m.cur.Store(noneMs)
	v.marks = m
	if ws == nil {
		return readers, nil
	}
	if ws.Interval <= 0 {
		ws.Interval = DefaultWatermarkInterval
	}
	out := make([]isb.Reader, len(readers))
	if v.spec.Source != nil {
		src, err := watermark.NewSource(ws.Source, watermark.WithClock(v.o.clock))
		if err != nil {
			return nil, fmt.Errorf("vertex %s: %w", v.spec.Name, err)
		}
		m.src = src
	} else if len(ws.Inputs) != len(readers) {
		return nil, fmt.Errorf("vertex %s: %d watermark inputs for %d inputs", v.spec.Name, len(ws.Inputs), len(readers))
	}
	for i, r := range readers {
		t := newTracker(r, m.src, int32(i))
		m.trackers = append(m.trackers, t)
		out[i] = t.reader()
	}
	if v.spec.Reduce != nil {
		m.reduced = make([]atomic.Int64, len(readers))
		m.closing = make([]atomic.Int64, len(readers))
		for i := range m.reduced {
			m.reduced[i].Store(noneMs)
			m.closing[i].Store(noneMs)
		}
		m.lateness = v.spec.Reduce.AllowedLateness
	}
	return out, nil
}

// reduceMark returns the watermark of reduce reader i, which closes its
// windows with it: its input's as of how far it has got. What it returned
// before is then closed and written, and the vertex may publish it.
func (m *marks) reduceMark(i int) func() (time.Time, bool) {
	return func() (time.Time, bool) {
		wm := m.spec.Inputs[i].At(m.trackers[i].frontier())
		m.reduced[i].Store(m.closing[i].Load())
		m.closing[i].Store(wm.UnixMilli())
		return wm, !watermark.IsNone(wm)
	}
}

// watermark returns the vertex's watermark: watermark.None without one.
func (v *Vertex) watermark() time.Time { return time.UnixMilli(v.marks.cur.Load()).UTC() }

// compute returns the vertex's watermark now: a source's own; the smallest
// of its inputs' as of how far it has read them; or, for a reduce, the
// smallest its readers have closed windows up to, less allowedLateness,
// before which no result is still to come.
func (m *marks) compute() time.Time {
	if m.src != nil {
		return m.src.Watermark()
	}
	low := int64(math.MaxInt64)
	for i, f := range m.spec.Inputs {
		var ms int64
		if m.reduced != nil {
			ms = m.reduced[i].Load()
		} else {
			ms = f.At(m.trackers[i].frontier()).UnixMilli()
		}
		if ms == noneMs {
			return watermark.None()
		}
		low = min(low, ms)
	}
	if low == math.MaxInt64 {
		return watermark.None()
	}
	wm := time.UnixMilli(low).UTC()
	if m.reduced != nil {
		wm = wm.Add(-m.lateness)
	}
	return wm
}

// runMarks fetches and publishes the vertex's watermark every interval
// until ctx ends, then removes what it published, so that it holds no
// vertex downstream back.
func (v *Vertex) runMarks(ctx context.Context) error {
	m := v.marks
	if m.spec == nil {
		return nil
	}
	processor := v.spec.Name + "-" + strconv.Itoa(v.o.replica)
	onErr := watermark.WithErrorHandler(func(err error) { v.log.Warn("watermark heartbeat failed", zap.Error(err)) })
	pubs := map[watermark.Store]*watermark.Publisher{}
	var outs []WatermarkOutput
	if m.spec.Outputs != nil {
		outs = m.spec.Outputs()
	}
	g, gctx := errgroup.WithContext(ctx)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for _, p := range pubs {
			if err := p.Close(cctx); err != nil {
				v.log.Warn("watermark entries not removed", zap.Error(err))
			}
		}
	}()
	for _, o := range outs {
		if pubs[o.Store] != nil {
			continue
		}
		p, err := watermark.NewPublisher(ctx, o.Store, processor, watermark.WithClock(v.o.clock), onErr)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("vertex %s: %w", v.spec.Name, err)
		}
		pubs[o.Store] = p
		g.Go(func() error { return p.Run(gctx) })
	}
	g.Go(func() error {
		var failing bool
		for {
			err := v.tickMarks(gctx, outs, pubs)
			if err != nil && !failing && gctx.Err() == nil {
				v.log.Warn("watermark not fetched or published; the vertex keeps the last one", zap.Error(err))
			}
			failing = err != nil
			if !clock.Sleep(gctx, v.o.clock, m.spec.Interval) {
				return nil
			}
		}
	})
	return g.Wait()
}

// tickMarks fetches the inputs' watermarks, computes the vertex's and
// publishes it to every partition it writes to, from the offset of the
// vertex's last write there.
func (v *Vertex) tickMarks(ctx context.Context, outs []WatermarkOutput, pubs map[watermark.Store]*watermark.Publisher) error {
	m := v.marks
	var errs []error
	for i, f := range m.spec.Inputs {
		errs = append(errs, f.Refresh(ctx), m.trackers[i].refreshFloor(ctx))
	}
	// The watermark first, the offsets after: every message written by
	// then at or before an offset comes from what the watermark counts as
	// finished.
	wm := m.compute()
	if watermark.IsNone(wm) {
		return errors.Join(errs...)
	}
	m.cur.Store(wm.UnixMilli())
	type part struct {
		s watermark.Store
		p int32
	}
	offsets := make(map[part]int64, len(outs))
	for _, o := range outs {
		k := part{o.Store, o.Partition}
		offsets[k] = max(offsets[k], o.Writer.LastOffset())
	}
	for k, off := range offsets {
		errs = append(errs, pubs[k.s].Publish(ctx, k.p, wm, off))
	}
	return errors.Join(errs...)
}

// buildMarkMetrics registers the vertex's watermark and its lag behind the
// clock.
func (v *Vertex) buildMarkMetrics(reg prometheus.Registerer) {
	if v.spec.Watermark == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_watermark_seconds",
			Help: "The vertex's watermark, in seconds since the Unix epoch; -0.001 while it has none."},
			func() float64 { return float64(v.marks.cur.Load()) / 1000 }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_watermark_lag_seconds",
			Help: "How far the vertex's watermark is behind the clock, in seconds; NaN while it has none."},
			func() float64 {
				if lag, ok := v.watermarkLag(); ok {
					return lag.Seconds()
				}
				return math.NaN()
			}),
	)
}

// watermarkLag returns how far the vertex's watermark is behind its clock,
// false while it has none.
func (v *Vertex) watermarkLag() (time.Duration, bool) {
	ms := v.marks.cur.Load()
	if ms == noneMs {
		return 0, false
	}
	return v.o.clock.Now().Sub(time.UnixMilli(ms)), true
}
