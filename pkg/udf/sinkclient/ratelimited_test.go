package sinkclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
	"github.com/sluiceflow/sluice/pkg/udf/sinkclient"
)

// TestUDSinkRateLimited runs a user-defined sink that fails each message
// with the error message its payload names: those that begin with the
// rate-limited marker are throttle signals with the wait they give, the rest
// plain failures.
func TestUDSinkRateLimited(t *testing.T) {
	const m = sinkclient.RateLimitedMarker
	tests := []struct {
		errMsg     string
		signal     bool
		retryAfter time.Duration
		cause      string
	}{
		{m, true, 0, ""},
		{m + " retry-after=2s: quota exhausted", true, 2 * time.Second, "quota exhausted"},
		{m + " retry-after=1500ms", true, 1500 * time.Millisecond, ""},
		{m + " retry-after=3: busy", true, 3 * time.Second, "busy"},
		{m + ": busy", true, 0, "busy"},
		{m + " retry-after=soon: busy", true, 0, m + " retry-after=soon: busy"},
		{m + " retry-after=-1s", true, 0, m + " retry-after=-1s"},
		{"rate limited, says the API", false, 0, ""},
		{"oops " + m, false, 0, ""},
	}
	failAsTold := sinker.SinkerFunc(func(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
		var out sinker.Responses
		for d := range datums {
			out = append(out, sinker.ResponseFailure(d.ID(), string(d.Value())))
		}
		return out
	})
	dir, _ := startSinker(t, serverinfo.KindSink, failAsTold)
	s, ctx := connect(t, dir, serverinfo.KindSink)
	msgs := make([]isb.Message, len(tests))
	for i, tt := range tests {
		msgs[i] = isb.Message{Value: []byte(tt.errMsg)}
	}
	errs := make([]error, len(msgs))
	if err := s.Write(ctx, msgs, errs); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		var te *isb.ThrottledError
		got := errors.As(errs[i], &te)
		switch {
		case got != tt.signal:
			t.Errorf("%q: %v; want a throttle signal: %v", tt.errMsg, errs[i], tt.signal)
		case got && (te.Signal != isb.SignalSinkRateLimited || te.RetryAfter != tt.retryAfter || te.Cause != tt.cause):
			t.Errorf("%q: %+v; want sinkRateLimited, retry after %v, cause %q", tt.errMsg, te, tt.retryAfter, tt.cause)
		case !got && (errs[i] == nil || errors.Is(errs[i], isb.ErrThrottled) || !strings.Contains(errs[i].Error(), tt.errMsg)):
			t.Errorf("%q: %v; want a plain failure", tt.errMsg, errs[i])
		}
	}
}

// TestSDKResponseRateLimited checks that what sluice's SDK writes is what
// the runtime reads.
func TestSDKResponseRateLimited(t *testing.T) {
	for _, tt := range []struct {
		wait   time.Duration
		reason string
	}{{0, ""}, {2 * time.Second, ""}, {1500 * time.Millisecond, "quota: exhausted"}, {0, "busy"}} {
		t.Run(fmt.Sprint(tt.wait, tt.reason), func(t *testing.T) {
			r := sinker.ResponseRateLimited("id", tt.wait, tt.reason)
			if !strings.HasPrefix(r.Err(), sinkclient.RateLimitedMarker) || r.OK() {
				t.Fatalf("ResponseRateLimited: %q, ok %v; want a failure with the marker", r.Err(), r.OK())
			}
			failWith := sinker.SinkerFunc(func(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
				var out sinker.Responses
				for d := range datums {
					out = append(out, sinker.ResponseRateLimited(d.ID(), tt.wait, tt.reason))
				}
				return out
			})
			dir, _ := startSinker(t, serverinfo.KindSink, failWith)
			s, ctx := connect(t, dir, serverinfo.KindSink)
			errs := make([]error, 1)
			if err := s.Write(ctx, []isb.Message{{Value: []byte("x")}}, errs); err != nil {
				t.Fatal(err)
			}
			var te *isb.ThrottledError
			if !errors.As(errs[0], &te) || te.RetryAfter != tt.wait || te.Cause != tt.reason || te.Signal != isb.SignalSinkRateLimited {
				t.Errorf("runtime read %v; want sinkRateLimited after %v, %q", errs[0], tt.wait, tt.reason)
			}
		})
	}
}
