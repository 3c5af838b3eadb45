// Package route writes a vertex's output to the buffers of the vertices its
// edges lead to: each message goes along every edge whose tag conditions it
// meets, into one partition of that edge's buffer, chosen by its keys.
//
// # Conditions
//
// An edge without conditions takes every message. An edge with
// conditions.tags takes a message when, with operator "or" (the default), any
// of its tags is among the values; with "and", all of the values are among its
// tags; with "not", none of its tags is. A message no edge takes goes nowhere
// and counts as unrouted.
//
// # Partitions
//
// A message with keys goes to the partition its keys hash to, so that messages
// with the same keys stay together; one without keys goes to the partitions in
// turn. On an edge to an ordered vertex ([Edge].Ordered) every message goes
// to the partition Numaflow's runtime picks ([OrderedPartition]), keyless
// ones included, so that the order of a key's messages is that of one
// partition.
//
// # Full buffers
//
// A buffer that refuses a message with [isb.ErrBufferFull] makes the message
// fail (onFull: retryUntilSuccess, the default; the forwarder retries it) or
// gives it up for that edge (discardLatest; it counts as discarded). A message
// taken by several edges succeeds once every edge has it; when the forwarder
// retries it, only the edges that failed are written again.
package route

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/sluiceflow/sluice/internal/enum"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// Operator is how a tag condition matches a message's tags. The zero value is
// [Or], Numaflow's default.
type Operator uint8

const (
	// Or matches a message with any of the values among its tags (the default).
	Or Operator = iota
	// And matches a message with all of the values among its tags.
	And
	// Not matches a message with none of the values among its tags.
	Not
)

var operatorNames = [...]string{Or: "or", And: "and", Not: "not"}

// String returns the operator's YAML name: or, and or not.
func (o Operator) String() string { return enum.Name(operatorNames[:], o, "Operator") }

// UnmarshalText parses or, and or not, and rejects any other name.
func (o *Operator) UnmarshalText(b []byte) error {
	return enum.Parse(o, operatorNames[:], b, "operator")
}

// Condition selects messages by their tags. The zero Condition (no values)
// takes every message.
type Condition struct {
	Operator Operator
	Values   []string
}

// Match reports whether a message with tags meets c.
func (c Condition) Match(tags []string) bool {
	if len(c.Values) == 0 {
		return true
	}
	switch c.Operator {
	case And:
		for _, v := range c.Values {
			if !slices.Contains(tags, v) {
				return false
			}
		}
		return true
	case Not:
		for _, t := range tags {
			if slices.Contains(c.Values, t) {
				return false
			}
		}
		return true
	default:
		for _, t := range tags {
			if slices.Contains(c.Values, t) {
				return true
			}
		}
		return false
	}
}

// OnFull is what an edge does with a message its buffer is too full to take.
// The zero value is [RetryUntilSuccess], Numaflow's default.
type OnFull uint8

const (
	// RetryUntilSuccess fails the message, for the forwarder to retry (the
	// default).
	RetryUntilSuccess OnFull = iota
	// DiscardLatest gives the message up for this edge.
	DiscardLatest
)

var onFullNames = [...]string{RetryUntilSuccess: "retryUntilSuccess", DiscardLatest: "discardLatest"}

// String returns the YAML name: retryUntilSuccess or discardLatest.
func (o OnFull) String() string { return enum.Name(onFullNames[:], o, "OnFull") }

// UnmarshalText parses retryUntilSuccess or discardLatest, and rejects any
// other name.
func (o *OnFull) UnmarshalText(b []byte) error {
	return enum.Parse(o, onFullNames[:], b, "onFull")
}

// Edge is one way out of a vertex: the buffer partitions of the vertex it
// leads to, and which messages it takes.
type Edge struct {
	// To names the vertex the edge leads to, for counts and errors.
	To         string
	Condition  Condition
	OnFull     OnFull
	Partitions []isb.Writer
	// Ordered is set on an edge to a vertex with ordered processing: its
	// partitions are chosen by [OrderedPartition].
	Ordered bool
}

// Counts are what a Writer did with the messages it was given, for metrics.
// Each callback is optional and called from Write.
type Counts struct {
	// Routed is called with the messages written along an edge.
	Routed func(to string, n int)
	// Discarded is called with the messages an edge gave up (discardLatest).
	Discarded func(to string, n int)
	// Unrouted is called with the messages no edge took.
	Unrouted func(n int)
}

// Writer writes messages along edges. It is an [isb.Writer]; it is not safe for
// concurrent use (a forwarder owns one). It does not own the partitions' writers,
// which other Writers may share: their owner closes them.
type Writer struct {
	edges  []Edge
	counts Counts
	next   []int // per edge: the partition for the next message without keys
	first  []int // per edge: the index in parts of its first partition

	// partial remembers, across the retries of one batch, the edges a message
	// that failed along others has already been written along, by message id.
	partial map[string]uint64

	// Reused by every Write.
	parts     []part   // one per partition of every edge
	written   []uint64 // per message: the edges it is written along
	routed    []int    // per edge
	discarded []int    // per edge
}

// part is the messages of one Write going to one partition.
type part struct {
	w     isb.Writer
	edge  int
	msgs  []isb.Message
	errs  []error
	index []int // the index in the batch of each message
}

var _ isb.Writer = (*Writer)(nil)

// maxEdges is the most edges a Writer takes: it keeps one bit per edge.
const maxEdges = 64

// New returns a Writer along edges. Every edge needs at least one partition.
func New(edges []Edge, counts Counts) (*Writer, error) {
	if len(edges) > maxEdges {
		return nil, fmt.Errorf("route: %d edges; at most %d", len(edges), maxEdges)
	}
	w := &Writer{edges: edges, counts: counts, next: make([]int, len(edges)), first: make([]int, len(edges)),
		routed: make([]int, len(edges)), discarded: make([]int, len(edges))}
	for e, edge := range edges {
		if len(edge.Partitions) == 0 {
			return nil, fmt.Errorf("route: edge to %q has no partitions", edge.To)
		}
		w.first[e] = len(w.parts)
		for _, pw := range edge.Partitions {
			w.parts = append(w.parts, part{w: pw, edge: e})
		}
	}
	return w, nil
}

// Write writes each message along every edge that takes it and records in errs
// the first failure among them; a message no edge takes succeeds. Messages are
// identified by ID across the retries of a batch: a retried message is
// written only along the edges that failed.
func (w *Writer) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	written, unrouted := w.spread(msgs, errs)
	if unrouted > 0 && w.counts.Unrouted != nil {
		w.counts.Unrouted(unrouted)
	}
	clear(w.routed)
	clear(w.discarded)
	for pi := range w.parts {
		if p := &w.parts[pi]; len(p.msgs) > 0 {
			w.writePart(ctx, p, errs, written)
		}
	}
	w.keepPartial(msgs, errs, written)
	w.countEdges()
	return nil
}

// spread clears errs and puts each message into the partition of every edge
// that takes it and does not have it yet. It returns per message the edges it
// was written along before (by an earlier try of the batch), and how many
// messages no edge takes.
func (w *Writer) spread(msgs []isb.Message, errs []error) (written []uint64, unrouted int) {
	partial := w.partial
	w.partial = nil
	if cap(w.written) < len(msgs) {
		w.written = make([]uint64, len(msgs))
	}
	written = w.written[:len(msgs)]
	for i := range w.parts {
		p := &w.parts[i]
		p.msgs, p.errs, p.index = p.msgs[:0], p.errs[:0], p.index[:0]
	}
	for i := range msgs {
		errs[i] = nil
		m := &msgs[i]
		written[i] = partial[m.ID] // nil map: 0
		taken := false
		for e := range w.edges {
			if !w.edges[e].Condition.Match(m.Tags) {
				continue
			}
			taken = true
			if written[i]&(1<<e) != 0 {
				continue
			}
			p := &w.parts[w.first[e]+w.partition(e, m.Keys)]
			p.msgs = append(p.msgs, *m)
			p.index = append(p.index, i)
		}
		if !taken {
			unrouted++
		}
	}
	return written, unrouted
}

// writePart writes the messages of one partition and records the outcome of
// each: the edge in written when the partition took it or the edge discards
// it, else the first failure in errs.
func (w *Writer) writePart(ctx context.Context, p *part, errs []error, written []uint64) {
	p.errs = append(p.errs, make([]error, len(p.msgs))...)
	if err := p.w.Write(ctx, p.msgs, p.errs); err != nil {
		for i := range p.errs {
			p.errs[i] = err
		}
	}
	edge := &w.edges[p.edge]
	for k, err := range p.errs {
		i := p.index[k]
		switch {
		case err == nil:
			written[i] |= 1 << p.edge
			w.routed[p.edge]++
		case errors.Is(err, isb.ErrBufferFull) && edge.OnFull == DiscardLatest:
			written[i] |= 1 << p.edge
			w.discarded[p.edge]++
		default:
			if errs[i] == nil {
				errs[i] = fmt.Errorf("edge to %s: %w", edge.To, err)
			}
		}
	}
	clear(p.msgs) // keep no payloads after Write
}

// keepPartial remembers the edges of each failed message that has some, so
// that its retry skips them.
func (w *Writer) keepPartial(msgs []isb.Message, errs []error, written []uint64) {
	for i := range msgs {
		if errs[i] != nil && written[i] != 0 {
			if w.partial == nil {
				w.partial = map[string]uint64{}
			}
			w.partial[msgs[i].ID] = written[i]
		}
	}
}

// countEdges reports the messages routed and discarded along each edge.
func (w *Writer) countEdges() {
	for e := range w.edges {
		if w.routed[e] > 0 && w.counts.Routed != nil {
			w.counts.Routed(w.edges[e].To, w.routed[e])
		}
		if w.discarded[e] > 0 && w.counts.Discarded != nil {
			w.counts.Discarded(w.edges[e].To, w.discarded[e])
		}
	}
}

// partition picks the partition of edge e for a message with keys.
func (w *Writer) partition(e int, keys []string) int {
	n := len(w.edges[e].Partitions)
	if n == 1 {
		return 0
	}
	if w.edges[e].Ordered {
		return OrderedPartition(keys, n)
	}
	if len(keys) == 0 {
		p := w.next[e]
		w.next[e] = (p + 1) % n
		return p
	}
	h := fnv.New32a()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
	}
	return int(h.Sum32() % uint32(n))
}
