package route_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/route"
)

// TestOrderedEdgePartitionsByNumaflowsHash writes keyed and keyless messages
// along an edge to an ordered vertex of 3 partitions: each goes to
// route.OrderedPartition of its keys, keyless ones all to that of no keys,
// and each partition gets its messages in the order written.
func TestOrderedEdgePartitionsByNumaflowsHash(t *testing.T) {
	parts := []*sink{{}, {}, {}}
	w, err := route.New([]route.Edge{{To: "cat", Ordered: true, Partitions: []isb.Writer{parts[0], parts[1], parts[2]}}}, route.Counts{})
	if err != nil {
		t.Fatal(err)
	}
	keys := [][]string{{"a"}, {"b"}, {"key-0"}, {"user-123"}, {"a", "b"}, nil}
	var msgs []isb.Message
	want := make([][]string, 3)
	for i := range 30 {
		k := keys[i%len(keys)]
		m := isb.Message{ID: fmt.Sprint(i), Value: []byte(fmt.Sprint(i)), Keys: k}
		msgs = append(msgs, m)
		p := route.OrderedPartition(k, 3)
		want[p] = append(want[p], string(m.Value))
	}
	for _, err := range write(t, w, msgs...) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range parts {
		if !slices.Equal(s.got, want[p]) {
			t.Errorf("partition %d got %v; want %v", p, s.got, want[p])
		}
	}
	if p := route.OrderedPartition(nil, 3); p != route.OrderedPartition([]string{""}, 3) {
		t.Errorf("no keys go to %d; want the partition of the empty string", p)
	}
}
