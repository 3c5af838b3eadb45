// Command streamsorter is an accumulator UDF that emits each key set's
// messages in event-time order: it keeps them sorted, and whenever a
// message comes with a later watermark it emits those up to that
// watermark; when its key set closes it emits the rest.
package main

import (
	"context"
	"log"
	"sort"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/accumulator"
)

func main() {
	c := accumulator.CreatorFunc(func() accumulator.Accumulator { return &sorter{wm: time.UnixMilli(-1)} })
	if err := accumulator.NewServer(c).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

type sorter struct {
	wm  time.Time
	buf []accumulator.Datum // sorted by event time, ties in arrival order
}

func (s *sorter) Accumulate(ctx context.Context, in <-chan accumulator.Datum, out chan<- accumulator.Message) {
	for {
		select {
		case <-ctx.Done():
			return
		case d, ok := <-in:
			if !ok {
				s.emit(ctx, out, func(accumulator.Datum) bool { return true })
				return
			}
			if d.Watermark().After(s.wm) {
				s.wm = d.Watermark()
				s.emit(ctx, out, func(x accumulator.Datum) bool { return !x.EventTime().After(s.wm) })
			}
			i := sort.Search(len(s.buf), func(i int) bool { return s.buf[i].EventTime().After(d.EventTime()) })
			s.buf = append(s.buf, nil)
			copy(s.buf[i+1:], s.buf[i:])
			s.buf[i] = d
		}
	}
}

// emit sends the leading messages that ready accepts.
func (s *sorter) emit(ctx context.Context, out chan<- accumulator.Message, ready func(accumulator.Datum) bool) {
	n := 0
	for _, d := range s.buf {
		if !ready(d) {
			break
		}
		select {
		case out <- accumulator.MessageFromDatum(d):
		case <-ctx.Done():
			return
		}
		n++
	}
	s.buf = s.buf[n:]
}
