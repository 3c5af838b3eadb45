package route_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/route"
)

func TestConditionMatch(t *testing.T) {
	tests := []struct {
		op     route.Operator
		values []string
		tags   []string
		want   bool
	}{
		{route.Or, nil, nil, true},
		{route.Or, nil, []string{"a"}, true},
		{route.Or, []string{"a", "b"}, []string{"b"}, true},
		{route.Or, []string{"a", "b"}, []string{"c"}, false},
		{route.Or, []string{"a"}, nil, false},
		{route.And, []string{"a", "b"}, []string{"b", "a", "c"}, true},
		{route.And, []string{"a", "b"}, []string{"a"}, false},
		{route.And, []string{"a"}, nil, false},
		{route.Not, []string{"a"}, []string{"b"}, true},
		{route.Not, []string{"a"}, nil, true},
		{route.Not, []string{"a", "b"}, []string{"c", "b"}, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s%v/%v", tt.op, tt.values, tt.tags), func(t *testing.T) {
			c := route.Condition{Operator: tt.op, Values: tt.values}
			if got := c.Match(tt.tags); got != tt.want {
				t.Fatalf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseNames(t *testing.T) {
	for _, name := range []string{"or", "and", "not"} {
		var o route.Operator
		if err := o.UnmarshalText([]byte(name)); err != nil || o.String() != name {
			t.Errorf("operator %q: %v, %v", name, o, err)
		}
	}
	for _, bad := range []string{"xor", "", "OR"} {
		var o route.Operator
		if err := o.UnmarshalText([]byte(bad)); err == nil || !strings.Contains(err.Error(), "want or, and or not") {
			t.Errorf("operator %q: %v, want an error listing the operators", bad, err)
		}
	}
	if got := route.Operator(9).String(); got != "Operator(9)" {
		t.Errorf("Operator(9).String() = %q", got)
	}
	for _, name := range []string{"retryUntilSuccess", "discardLatest"} {
		var f route.OnFull
		if err := f.UnmarshalText([]byte(name)); err != nil || f.String() != name {
			t.Errorf("onFull %q: %v, %v", name, f, err)
		}
	}
	for _, bad := range []string{"drop", ""} {
		var f route.OnFull
		if err := f.UnmarshalText([]byte(bad)); err == nil || !strings.Contains(err.Error(), "want retryUntilSuccess or discardLatest") {
			t.Errorf("onFull %q: %v, want an error listing the policies", bad, err)
		}
	}
	if got := route.OnFull(9).String(); got != "OnFull(9)" {
		t.Errorf("OnFull(9).String() = %q", got)
	}
}

// sink is a partition that records what it takes, and refuses messages whose
// value is in refuse with the error given.
type sink struct {
	got    []string
	refuse map[string]error
	calls  int
}

func (s *sink) Write(_ context.Context, msgs []isb.Message, errs []error) error {
	s.calls++
	for i, m := range msgs {
		if err := s.refuse[string(m.Value)]; err != nil {
			errs[i] = err
			continue
		}
		errs[i] = nil
		s.got = append(s.got, string(m.Value))
	}
	return nil
}

func msg(id string, tags ...string) isb.Message {
	return isb.Message{ID: id, Value: []byte(id), Tags: tags}
}

func write(t *testing.T, w *route.Writer, msgs ...isb.Message) []error {
	t.Helper()
	errs := make([]error, len(msgs))
	if err := w.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	return errs
}

func TestRoutesByTags(t *testing.T) {
	even, odd, all := &sink{}, &sink{}, &sink{}
	var unrouted int
	routed := map[string]int{}
	w, err := route.New([]route.Edge{
		{To: "even", Condition: route.Condition{Values: []string{"even-tag"}}, Partitions: []isb.Writer{even}},
		{To: "odd", Condition: route.Condition{Values: []string{"odd-tag"}}, Partitions: []isb.Writer{odd}},
		{To: "all", Partitions: []isb.Writer{all}},
	}, route.Counts{Unrouted: func(n int) { unrouted += n }, Routed: func(to string, n int) { routed[to] += n }})
	if err != nil {
		t.Fatal(err)
	}
	errs := write(t, w, msg("0", "even-tag"), msg("1", "odd-tag"), msg("2", "even-tag"), msg("x"))
	for i, err := range errs {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
	if fmt.Sprint(even.got, odd.got, all.got) != "[0 2] [1] [0 1 2 x]" {
		t.Fatalf("even %v, odd %v, all %v", even.got, odd.got, all.got)
	}
	if unrouted != 0 || fmt.Sprint(routed) != "map[all:4 even:2 odd:1]" {
		t.Fatalf("unrouted %d, routed %v", unrouted, routed)
	}
	w2, _ := route.New([]route.Edge{{To: "even", Condition: route.Condition{Values: []string{"even-tag"}}, Partitions: []isb.Writer{&sink{}}}},
		route.Counts{Unrouted: func(n int) { unrouted += n }})
	if errs := write(t, w2, msg("y"), msg("z", "odd-tag")); errs[0] != nil || errs[1] != nil || unrouted != 2 {
		t.Fatalf("unrouted messages: %v, counted %d; want success and 2", errs, unrouted)
	}
}

func TestPartitionsByKeys(t *testing.T) {
	parts := []*sink{{}, {}, {}}
	w, err := route.New([]route.Edge{{To: "v", Partitions: []isb.Writer{parts[0], parts[1], parts[2]}}}, route.Counts{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []isb.Message
	for i := range 30 {
		m := msg(fmt.Sprint(i))
		m.Keys = []string{fmt.Sprint("k", i%5)}
		msgs = append(msgs, m)
	}
	write(t, w, msgs...)
	where := map[string]int{} // key -> partition
	total := 0
	for p, s := range parts {
		total += len(s.got)
		for _, v := range s.got {
			var i int
			fmt.Sscan(v, &i)
			key := fmt.Sprint("k", i%5)
			if q, ok := where[key]; ok && q != p {
				t.Fatalf("key %s in partitions %d and %d", key, q, p)
			}
			where[key] = p
		}
	}
	if total != 30 {
		t.Fatalf("%d messages written; want 30", total)
	}
	// Without keys, partitions take turns.
	for _, s := range parts {
		s.got = nil
	}
	write(t, w, msg("a"), msg("b"), msg("c"), msg("d"))
	if fmt.Sprint(parts[0].got, parts[1].got, parts[2].got) != "[a d] [b] [c]" {
		t.Fatalf("round robin: %v %v %v", parts[0].got, parts[1].got, parts[2].got)
	}
}

func TestRetryWritesOnlyFailedEdges(t *testing.T) {
	broken := errors.New("broken")
	a, b := &sink{}, &sink{refuse: map[string]error{"1": broken}}
	w, _ := route.New([]route.Edge{{To: "a", Partitions: []isb.Writer{a}}, {To: "b", Partitions: []isb.Writer{b}}}, route.Counts{})
	errs := write(t, w, msg("0"), msg("1"))
	if errs[0] != nil || !errors.Is(errs[1], broken) {
		t.Fatalf("errs = %v; want message 1 failed", errs)
	}
	// The forwarder retries the failed message alone.
	b.refuse = nil
	if errs := write(t, w, msg("1")); errs[0] != nil {
		t.Fatalf("retry: %v", errs[0])
	}
	if fmt.Sprint(a.got, b.got) != "[0 1] [0 1]" {
		t.Fatalf("a %v, b %v; want each message once per edge", a.got, b.got)
	}
	// A new batch starts afresh: a message id seen before is written again.
	write(t, w, msg("0"))
	if fmt.Sprint(a.got, b.got) != "[0 1 0] [0 1 0]" {
		t.Fatalf("a %v, b %v", a.got, b.got)
	}
}

func TestOnFull(t *testing.T) {
	full := map[string]error{"1": isb.ErrBufferFull}
	retry, discard := &sink{refuse: full}, &sink{refuse: full}
	var discarded []string
	w, _ := route.New([]route.Edge{
		{To: "retry", Partitions: []isb.Writer{retry}},
	}, route.Counts{})
	if errs := write(t, w, msg("0"), msg("1")); errs[0] != nil || !errors.Is(errs[1], isb.ErrBufferFull) {
		t.Fatalf("retryUntilSuccess: %v; want message 1 to fail with ErrBufferFull", errs)
	}
	w, _ = route.New([]route.Edge{
		{To: "discard", OnFull: route.DiscardLatest, Partitions: []isb.Writer{discard}},
	}, route.Counts{Discarded: func(to string, n int) { discarded = append(discarded, fmt.Sprint(to, n)) }})
	if errs := write(t, w, msg("0"), msg("1")); slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		t.Fatalf("discardLatest: %v; want no failure", errs)
	}
	if fmt.Sprint(discard.got, discarded) != "[0] [discard1]" {
		t.Fatalf("written %v, discarded %v", discard.got, discarded)
	}
}

func TestWholeBatchError(t *testing.T) {
	w, _ := route.New([]route.Edge{{To: "v", Partitions: []isb.Writer{failing{}}}}, route.Counts{})
	errs := write(t, w, msg("0"), msg("1"))
	for i, err := range errs {
		if err == nil || err.Error() != "edge to v: down" {
			t.Fatalf("message %d: %v; want the batch's error, naming the edge", i, err)
		}
	}
}

type failing struct{}

func (failing) Write(context.Context, []isb.Message, []error) error { return errors.New("down") }

func TestNewChecksEdges(t *testing.T) {
	if _, err := route.New([]route.Edge{{To: "v"}}, route.Counts{}); err == nil {
		t.Fatal("an edge without partitions was accepted")
	}
	edges := make([]route.Edge, 65)
	for i := range edges {
		edges[i] = route.Edge{To: fmt.Sprint(i), Partitions: []isb.Writer{&sink{}}}
	}
	if _, err := route.New(edges, route.Counts{}); err == nil {
		t.Fatal("65 edges accepted")
	}
}
