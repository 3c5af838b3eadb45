package forward

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// RetryPolicy is how a forwarder retries: sink writes (Options.Retry), and
// the inputs a map or a transformer fails (Options.MapRetry and
// TransformRetry). Each wait is Interval times Factor to the power of the
// retries before it, capped at MaxInterval, less up to half at random.
//
// A message the sink refused because it is throttled (isb.ErrThrottled) is
// retried after the backoff or the wait the sink asked for, whichever is
// longer, and that attempt is not one of its Steps. A message the sink
// rejected (isb.ErrRejected) goes to the fallback sink at once when there is
// one, is dropped at once when OnFailure is Drop, and is otherwise retried as
// any failure.
type RetryPolicy struct {
	// Interval is the first wait (default 1ms).
	Interval time.Duration
	// MaxInterval caps each wait (default the larger of Interval and 1s).
	MaxInterval time.Duration
	// Factor multiplies the wait at each retry (default 2; at least 1).
	Factor float64
	// Steps is when OnFailure applies, 0 being never: for a sink, the failed
	// attempts of a message; for a function, the retries of an input it
	// fails, so that it is called Steps+1 times before being dropped.
	Steps     int
	OnFailure OnFailure
}

// normal returns p with its defaults in place of what it leaves unset.
func (p RetryPolicy) normal() RetryPolicy {
	if p.Interval <= 0 {
		p.Interval = time.Millisecond
	}
	if p.MaxInterval < p.Interval {
		p.MaxInterval = max(p.Interval, time.Second)
	}
	if p.Factor < 1 {
		p.Factor = 2
	}
	return p
}

// wait is the wait before the retry that follows attempt (0 for the first
// retry): Interval times Factor^attempt, capped at MaxInterval, less up to
// half at random. p is normal.
func (p RetryPolicy) wait(attempt int) time.Duration {
	d := p.MaxInterval
	if f := float64(p.Interval) * math.Pow(p.Factor, float64(attempt)); f < float64(p.MaxInterval) {
		d = time.Duration(f)
	}
	return d - time.Duration(rand.Int64N(int64(d/2)+1))
}

// apply runs m on in, retrying a call that fails (call), then the inputs m
// failed (udf.Failed) as p says: each retry sends the inputs the call before
// failed, after p's wait, until none fails; with OnFailure Drop, those still
// failed after p.Steps retries are dropped and counted in the drops it
// returns. It returns hard's error when hard ends first, and the batch is
// then abandoned (handed back to the source).
func (f *Forwarder) apply(hard context.Context, stage string, m udf.Mapper, p RetryPolicy, in, out []isb.Message) ([]isb.Message, int, error) {
	start := len(out)
	res, dropped, err := f.call(hard, stage, m, in, out)
	if err != nil || !anyFailed(res[start:]) {
		return res, dropped, err
	}
	var failed []isb.Message
	for retry := 0; ; retry++ {
		res, failed = takeFailed(res, start, failed[:0])
		if len(failed) == 0 {
			break
		}
		f.d.Metrics.Failed.WithLabelValues(stage).Add(float64(len(failed)))
		if p.OnFailure == Drop && retry >= p.Steps {
			f.log.Warn("dropping messages the function keeps failing (onFailure: drop)",
				zap.String("stage", stage), zap.Int("messages", len(failed)), zap.Int("retries", retry))
			dropped += len(failed)
			break
		}
		wait := p.wait(retry)
		if retry == 0 {
			f.log.Warn("the function failed messages; retrying them", zap.String("stage", stage),
				zap.Int("messages", len(failed)), zap.Duration("wait", wait))
		}
		if !f.sleep(hard, wait) {
			return nil, 0, hard.Err()
		}
		var n int
		if res, n, err = f.call(hard, stage, m, failed, res); err != nil {
			return nil, 0, err
		}
		dropped += n
	}
	// The retries' results came after the others: put them back in the
	// order of the batch.
	slices.SortStableFunc(res[start:], func(a, b isb.Message) int { return cmp.Compare(a.Origin, b.Origin) })
	return res, dropped, nil
}

// anyFailed reports whether a message of res is failed (udf.Failed).
func anyFailed(res []isb.Message) bool {
	for i := range res {
		if udf.Failed(&res[i]) {
			return true
		}
	}
	return false
}

// takeFailed moves the failed messages of res[start:] out of it, as the
// inputs they stand for (udf.Unfail), onto failed, and returns both.
func takeFailed(res []isb.Message, start int, failed []isb.Message) ([]isb.Message, []isb.Message) {
	j := start
	for i := start; i < len(res); i++ {
		if udf.Failed(&res[i]) {
			failed = append(failed, udf.Unfail(res[i]))
			continue
		}
		res[j] = res[i]
		j++
	}
	clear(res[j:]) // let go of the payloads
	return res[:j], failed
}
