package vertex

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/reduce"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	"go.uber.org/zap"
)

// addReducer adds the reader of input partition i of a reduce vertex, r:
// its windows in a Processor, logged under the Reduce's Dir; shared says
// other readers share the limiter.
func (v *Vertex) addReducer(i int, r isb.Reader, shared bool) error {
	rs := v.spec.Reduce
	switch {
	case v.spec.Source != nil:
		return fmt.Errorf("vertex %s: a reduce reads its input buffer, not a source", v.spec.Name)
	case (rs.Reducer == nil && rs.Accumulator == nil) || (rs.Watermark == nil && v.spec.Watermark == nil):
		return fmt.Errorf("vertex %s: a reduce needs a Reducer, and a Watermark or the vertex's", v.spec.Name)
	}
	var d forward.Deps
	if err := v.buildWriters(&d); err != nil {
		return err
	}
	if rs.Dir == "" && i == 0 {
		v.log.Info("reduce windows are kept in memory alone (no_store): a restart loses the open ones")
	}
	var log *wal.Log
	if rs.Dir != "" {
		var opts wal.Options
		if rs.Accumulator != nil {
			opts.SegmentSize = reduce.AccumulatorSegmentSize // removed as their messages are done
		}
		l, err := wal.Open(filepath.Join(rs.Dir, "partition-"+strconv.Itoa(rs.FirstPartition+i)), opts)
		if err != nil {
			return fmt.Errorf("vertex %s: %w", v.spec.Name, err)
		}
		v.onClose(l.Close)
		log = l
	}
	p, err := v.stage(log)
	if err != nil {
		return fmt.Errorf("vertex %s: %w", v.spec.Name, err)
	}
	if n, err := p.Recover(); err != nil {
		return fmt.Errorf("vertex %s: recovering partition %d: %w", v.spec.Name, rs.FirstPartition+i, err)
	} else if n > 0 {
		v.log.Info("windows recovered from the log", zap.Int("partition", rs.FirstPartition+i), zap.Int("messages", n))
	}
	if a, ok := p.(*reduce.Accumulator); ok && a.InDoubt() > 0 {
		v.log.Warn("accumulator outputs may be written again: their messages were marked done and the crash came before the mark was confirmed",
			zap.Int("partition", rs.FirstPartition+i), zap.Int("messages", a.InDoubt()))
	}
	var lim reduce.Limiter = throttle.Noop{}
	if l := v.limiter; l != nil {
		lim = l.Gate()
		if shared {
			lim = l.Lane().Gate()
		}
	}
	if d.Sink == nil {
		return errors.New("vertex " + v.spec.Name + ": a reduce needs a sink or an output")
	}
	wm := func() (time.Time, bool) {
		t, ok := rs.Watermark()
		if ok {
			v.marks.cur.Store(t.UnixMilli()) // the vertex's, which requests carry
		}
		return t, ok
	}
	if v.spec.Watermark != nil {
		wm = v.marks.reduceMark(i)
	}
	v.runs = append(v.runs, &reduce.Loop{Reader: r, Writer: d.Sink, Processor: p, Watermark: wm,
		Limiter: lim, BatchSize: v.spec.Limits.ReadBatchSize, Log: v.log, Metrics: v.reduceMetrics, LateLog: v.lateLog})
	return nil
}

// stage makes the state of one reader of the reduce vertex: an Accumulator,
// or a Processor of windows, logged in log (nil: memory alone).
func (v *Vertex) stage(log *wal.Log) (interface {
	reduce.Stage
	Recover() (int, error)
}, error) {
	rs := v.spec.Reduce
	if a := rs.Accumulator; a != nil {
		c, err := a.Client(v.env())
		if err != nil {
			return nil, err
		}
		acc, err := reduce.NewAccumulator(reduce.AccumulatorConfig{Timeout: a.Timeout, Client: c, Log: log})
		if err != nil {
			return nil, err
		}
		v.onClose(acc.Close)
		return acc, nil
	}
	fn, err := rs.Reducer(v.env())
	if err != nil {
		return nil, err
	}
	return reduce.New(reduce.Config{Strategy: rs.Strategy, AllowedLateness: rs.AllowedLateness, Keyed: rs.Keyed,
		Reducer: fn, Log: log})
}
