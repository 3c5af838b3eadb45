package route_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/route"
)

// discard takes every message.
type discard struct{}

func (discard) Write(_ context.Context, msgs []isb.Message, errs []error) error {
	clear(errs[:len(msgs)])
	return nil
}

// BenchmarkWrite routes batches of 500 messages, half tagged even and half
// odd, along two edges with conditions (one partition each) and one without
// (two partitions, by key).
func BenchmarkWrite(b *testing.B) {
	w, err := route.New([]route.Edge{
		{To: "even", Condition: route.Condition{Values: []string{"even"}}, Partitions: []isb.Writer{discard{}}},
		{To: "odd", Condition: route.Condition{Values: []string{"odd"}}, Partitions: []isb.Writer{discard{}}},
		{To: "all", Partitions: []isb.Writer{discard{}, discard{}}},
	}, route.Counts{})
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]isb.Message, 500)
	for i := range msgs {
		msgs[i] = isb.Message{ID: "in-" + strconv.Itoa(i), Keys: []string{strconv.Itoa(i % 7)}, Tags: []string{[]string{"even", "odd"}[i%2]}}
	}
	errs := make([]error, len(msgs))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(ctx, msgs, errs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}
