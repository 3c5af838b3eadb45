package forward

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/isb/route"
)

// tagMod tags each message with its value modulo n, as "m<rest>", and adds
// prefix to its value; it counts the messages it is given.
type tagMod struct {
	n      int
	prefix string
	seen   int
}

func (t *tagMod) Map(_ context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	for _, m := range in {
		t.seen++
		v, _ := strconv.Atoi(string(m.Value[len(m.Value)-1:]))
		m.Tags = append(slices.Clone(m.Tags), "m"+strconv.Itoa(v%t.n))
		m.Value = append([]byte(t.prefix), m.Value...)
		out = append(out, m)
	}
	return out, 0, nil
}

func values(msgs []isb.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Value))
	}
	slices.Sort(out)
	return out
}

func TestBypass(t *testing.T) {
	or := func(vs ...string) *route.Condition { return &route.Condition{Values: vs} }
	cases := []struct {
		name                   string
		bypass                 Bypass
		sink, fallback, ons    []string
		mapped, written, drops int
	}{
		{
			// The transformer tags by the last digit modulo 3: m1 goes to the
			// fallback sink past the map, m2 to the on-success sink; the map
			// tags again modulo 2 (m0 and m1): its m1 goes to the fallback sink.
			name:     "fallback and on success",
			bypass:   Bypass{Fallback: or("m1"), OnSuccess: or("m2")},
			fallback: []string{"t1", "t4", "t7", "ut3", "ut9"},
			ons:      []string{"t2", "t5", "t8"},
			sink:     []string{"ut0", "ut6"},
			mapped:   4, written: 2,
		},
		{
			// With a bypass to the sink, only what it takes is written; the
			// rest is dropped. The sink comes first: m1 goes to the sink.
			name:   "sink first, the rest dropped",
			bypass: Bypass{Sink: or("m1"), Fallback: or("m1", "m2")},
			sink:   []string{"t1", "t4", "t7", "ut3", "ut9"}, fallback: []string{"t2", "t5", "t8"},
			mapped: 4, written: 5, drops: 2,
		},
		{
			// not: every message without the tag, m0 after the transformer.
			name:   "not",
			bypass: Bypass{OnSuccess: &route.Condition{Operator: route.Not, Values: []string{"m1", "m2"}}},
			ons:    []string{"t0", "t3", "t6", "t9"}, sink: []string{"ut1", "ut2", "ut4", "ut5", "ut7", "ut8"},
			mapped: 6, written: 6,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snk := memory.New("sink", 100, time.Millisecond, nil)
			fb := memory.New("fb", 100, time.Millisecond, nil)
			ons := memory.New("ons", 100, time.Millisecond, nil)
			mapper := &tagMod{n: 2, prefix: "u"}
			h := start(t, Deps{Reader: filledBuffer(t, 10), Transformer: &tagMod{n: 3, prefix: "t"}, Mapper: mapper, Sink: snk, Fallback: fb, OnSuccess: ons, Bypass: &tc.bypass}, Options{})
			h.waitAcked(t, 10)
			h.stop(t)
			if got := values(snk.Messages()); !slices.Equal(got, tc.sink) {
				t.Errorf("sink got %v; want %v", got, tc.sink)
			}
			if got := values(fb.Messages()); !slices.Equal(got, tc.fallback) {
				t.Errorf("fallback sink got %v; want %v", got, tc.fallback)
			}
			if got := values(ons.Messages()); !slices.Equal(got, tc.ons) {
				t.Errorf("on-success sink got %v; want %v", got, tc.ons)
			}
			if mapper.seen != tc.mapped {
				t.Errorf("the map saw %d messages; want %d", mapper.seen, tc.mapped)
			}
			w, d := testutil.ToFloat64(h.m.Written), testutil.ToFloat64(h.m.Dropped)
			f, o := testutil.ToFloat64(h.m.Fallback), testutil.ToFloat64(h.m.OnSuccess)
			if int(w) != tc.written || int(d) != tc.drops || int(f) != len(tc.fallback) || int(o) != len(tc.ons) {
				t.Errorf("written %v, dropped %v, fallback %v, on success %v; want %d, %d, %d, %d",
					w, d, f, o, tc.written, tc.drops, len(tc.fallback), len(tc.ons))
			}
		})
	}
}
