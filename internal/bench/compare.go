package bench

import (
	"context"
	"time"
)

// Runs is what one side of a comparison measured, its rate limits off or on.
type Runs struct {
	// Rates are the messages per second of each run, in the order run.
	Rates []float64
	// Messages are the messages written in all the runs, as measured.
	Messages float64
	// Polls are the answers of /status/live read during the runs of the
	// page variant ([Target.PageVariant]); 0 for the others.
	Polls int
}

// Median returns the median of the runs' rates, which decides: on a shared
// machine, one disturbed run should not.
func (r Runs) Median() float64 { return Median(r.Rates) }

// Compare measures t with its rate limits off and on in 2*runs runs of each
// long, off and on alternating, off first; each run is built anew and
// measured by [Measure]. Before each run, progress, when not nil, is called
// with the run's number, from 1, and whether the rate limits are on. The first
// error of a run stops the comparison and is returned.
func (t *Target) Compare(ctx context.Context, runs int, each time.Duration, progress func(run int, on bool)) (off, on Runs, err error) {
	sides := [2]*Runs{&off, &on}
	for i := range 2 * runs {
		rateLimited := i%2 == 1
		if progress != nil {
			progress(i+1, rateLimited)
		}
		n, elapsed, err := Measure(func() (Runner, error) { return t.Build(ctx, rateLimited) }, each)
		if err != nil {
			return Runs{}, Runs{}, err
		}
		r := sides[i%2]
		r.Rates = append(r.Rates, n/elapsed.Seconds())
		r.Messages += n
	}
	return off, on, nil
}
