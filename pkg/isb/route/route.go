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
// turn.
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

	"github.com/sluiceflow/sluice/pkg/isb"
)

// Operator is how a tag condition matches a message's tags.
type Operator uint8

const (
	// Or matches a message with any of the values among its tags (the default).
	Or Operator = iota
	// And matches a message with all of the values among its tags.
	And
	// Not matches a message with none of the values among its tags.
	Not
)

// String returns the operator's YAML name.
func (o Operator) String() string {
	switch o {
	case And:
		return "and"
	case Not:
		return "not"
	default:
		return "or"
	}
}

// UnmarshalText parses or, and or not.
func (o *Operator) UnmarshalText(b []byte) error {
	switch string(b) {
	case "or", "":
		*o = Or
	case "and":
		*o = And
	case "not":
		*o = Not
	default:
		return fmt.Errorf("route: operator %q: want or, and or not", b)
	}
	return nil
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
type OnFull uint8

const (
	// RetryUntilSuccess fails the message, for the forwarder to retry (the
	// default).
	RetryUntilSuccess OnFull = iota
	// DiscardLatest gives the message up for this edge.
	DiscardLatest
)

// String returns the YAML name.
func (o OnFull) String() string {
	if o == DiscardLatest {
		return "discardLatest"
	}
	return "retryUntilSuccess"
}

// UnmarshalText parses retryUntilSuccess or discardLatest.
func (o *OnFull) UnmarshalText(b []byte) error {
	switch string(b) {
	case "retryUntilSuccess", "":
		*o = RetryUntilSuccess
	case "discardLatest":
		*o = DiscardLatest
	default:
		return fmt.Errorf("route: onFull %q: want retryUntilSuccess or discardLatest", b)
	}
	return nil
}

// Edge is one way out of a vertex: the buffer partitions of the vertex it
// leads to, and which messages it takes.
type Edge struct {
	// To names the vertex the edge leads to, for counts and errors.
	To         string
	Condition  Condition
	OnFull     OnFull
	Partitions []isb.Writer
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

	// done remembers, across the retries of one batch, the edges a message has
	// already been written along, by message id.
	done map[string]uint64

	// Reused by every Write.
	plan  []target
	parts map[isb.Writer]*part
}

// target is one write of one message: along edge, into partition w.
type target struct {
	msg  int
	edge int
	w    isb.Writer
}

// part is the messages of one Write going to one partition.
type part struct {
	msgs    []isb.Message
	errs    []error
	targets []int // index in plan of each message
}

var _ isb.Writer = (*Writer)(nil)

// maxEdges is the most edges a Writer takes: done keeps one bit per edge.
const maxEdges = 64

// New returns a Writer along edges. Every edge needs at least one partition.
func New(edges []Edge, counts Counts) (*Writer, error) {
	if len(edges) > maxEdges {
		return nil, fmt.Errorf("route: %d edges; at most %d", len(edges), maxEdges)
	}
	for _, e := range edges {
		if len(e.Partitions) == 0 {
			return nil, fmt.Errorf("route: edge to %q has no partitions", e.To)
		}
	}
	return &Writer{edges: edges, counts: counts, next: make([]int, len(edges)),
		done: map[string]uint64{}, parts: map[isb.Writer]*part{}}, nil
}

// Write writes each message along every edge that takes it and records in errs
// the first failure among them; a message no edge takes succeeds. Messages are
// identified by ID across the retries of a batch: a retried message is
// written only along the edges that failed.
func (w *Writer) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	done := make(map[string]uint64, len(msgs))
	for i := range msgs {
		done[msgs[i].ID] = w.done[msgs[i].ID]
	}
	w.done = done
	w.plan = w.plan[:0]
	for p := range w.parts {
		delete(w.parts, p)
	}
	unrouted := 0
	for i := range msgs {
		errs[i] = nil
		m := &msgs[i]
		taken := false
		for e := range w.edges {
			edge := &w.edges[e]
			if !edge.Condition.Match(m.Tags) {
				continue
			}
			taken = true
			if w.done[m.ID]&(1<<e) != 0 {
				continue
			}
			pw := edge.Partitions[w.partition(e, m.Keys)]
			w.plan = append(w.plan, target{msg: i, edge: e, w: pw})
		}
		if !taken {
			unrouted++
		}
	}
	if unrouted > 0 && w.counts.Unrouted != nil {
		w.counts.Unrouted(unrouted)
	}
	for t := range w.plan {
		p := w.parts[w.plan[t].w]
		if p == nil {
			p = &part{}
			w.parts[w.plan[t].w] = p
		}
		p.msgs = append(p.msgs, msgs[w.plan[t].msg])
		p.targets = append(p.targets, t)
	}
	routed := make([]int, len(w.edges))
	discarded := make([]int, len(w.edges))
	for pw, p := range w.parts {
		p.errs = make([]error, len(p.msgs))
		if err := pw.Write(ctx, p.msgs, p.errs); err != nil {
			for i := range p.errs {
				p.errs[i] = err
			}
		}
		for i, err := range p.errs {
			t := w.plan[p.targets[i]]
			id := msgs[t.msg].ID
			switch {
			case err == nil:
				w.done[id] |= 1 << t.edge
				routed[t.edge]++
			case errors.Is(err, isb.ErrBufferFull) && w.edges[t.edge].OnFull == DiscardLatest:
				w.done[id] |= 1 << t.edge
				discarded[t.edge]++
			default:
				if errs[t.msg] == nil {
					errs[t.msg] = fmt.Errorf("edge to %s: %w", w.edges[t.edge].To, err)
				}
			}
		}
	}
	for e := range w.edges {
		if routed[e] > 0 && w.counts.Routed != nil {
			w.counts.Routed(w.edges[e].To, routed[e])
		}
		if discarded[e] > 0 && w.counts.Discarded != nil {
			w.counts.Discarded(w.edges[e].To, discarded[e])
		}
	}
	return nil
}

// partition picks the partition of edge e for a message with keys.
func (w *Writer) partition(e int, keys []string) int {
	n := len(w.edges[e].Partitions)
	if n == 1 {
		return 0
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
