package sqsclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sluiceflow/sluice/internal/sqsclient"
	"github.com/sluiceflow/sluice/pkg/clock"
)

func newQueue(t *testing.T, c clock.Clock) *sqsclient.Queue {
	t.Helper()
	q, err := sqsclient.New(context.Background(), sqsclient.Config{Field: "spec.source.sqs", Region: "us-west-2",
		QueueName: "orders", EndpointURL: "http://127.0.0.1:1", Clock: c,
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestExplain names the field of each kind of failure.
func TestExplain(t *testing.T) {
	q := newQueue(t, clock.Real())
	for _, tc := range []struct {
		name     string
		err      error
		sentinel error
		want     string
	}{
		{"no queue", &types.QueueDoesNotExist{Message: new(string)}, sqsclient.ErrQueue, `spec.source.sqs.queueName ("orders"): the queue does not exist (region us-west-2)`},
		{"refused", &smithy.GenericAPIError{Code: "InvalidClientTokenId", Message: "bad"}, sqsclient.ErrCredentials, "spec.source.sqs: the AWS credentials were refused"},
		{"other", errors.New("boom"), nil, `spec.source.sqs: queue "orders": boom`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := q.Explain(tc.err)
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v: want %q", err, tc.want)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("%v does not wrap %v", err, tc.err)
			}
		})
	}
}

// TestFailedOnceAndBackoff: a failure is returned once while it repeats,
// the backoff doubles up to its cap, and a success ends it.
func TestFailedOnceAndBackoff(t *testing.T) {
	c := clock.NewManual(time.Unix(1000, 0))
	q := newQueue(t, c)
	ctx := context.Background()
	cause := errors.New("down")
	if err := q.Failed(ctx, cause); err == nil {
		t.Fatal("first failure not returned")
	}
	for range 20 {
		if err := q.Failed(ctx, cause); err != nil {
			t.Fatalf("repeated failure returned again: %v", err)
		}
	}
	// After 21 failures the backoff is at its cap, less up to half.
	if q.Wait(ctx, 0) {
		t.Fatal("backoff over at once")
	}
	c.Advance(sqsclient.MaxBackoff/2 - time.Millisecond)
	if q.Wait(ctx, 0) {
		t.Fatal("backoff shorter than half its cap")
	}
	c.Advance(sqsclient.MaxBackoff/2 + time.Millisecond)
	if !q.Wait(ctx, 0) {
		t.Fatal("backoff longer than its cap")
	}
	if err := q.Failed(ctx, errors.New("another cause")); err == nil {
		t.Fatal("a new cause not returned")
	}
	q.Succeeded()
	if !q.Wait(ctx, 0) {
		t.Fatal("backoff after a success")
	}
	if err := q.Failed(ctx, cause); err == nil {
		t.Fatal("a failure after a success not returned")
	}
	// The first backoff is 50 to 100 ms.
	c.Advance(sqsclient.MinBackoff)
	if !q.Wait(ctx, 0) {
		t.Fatal("first backoff longer than MinBackoff")
	}
}
