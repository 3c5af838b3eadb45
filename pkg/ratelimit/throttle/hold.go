package throttle

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// A per-key limit (rateLimit.perKey) lets each message key take at most so
// many messages a second. The forwarder reads as before, under the vertex's
// limiter; of what it read, the messages whose key has no tokens left in the
// epoch are held, and the vertex tokens they were read with go back at once
// (the read returns fewer messages than granted, and Pay gives back the
// rest). The others go on. A held message goes on in a later epoch, when its
// key has tokens again, in its order within the key, taking a vertex token
// again then: it is put at the front of a later read, before new messages.
// Messages without keys are under the vertex's limit only.
//
// The hold is bounded (PerKey.MaxHeld): a read takes no more new messages
// than there is room for. Once the hold is full and none of its keys can go
// on before the next epoch, a reader that takes messages back gets the
// newest held messages of the keys that hold the most, to deliver again once
// those keys' backlog can have gone (at least a second later), so that reads
// go on and the other keys are not held up behind a hot one; a reader that
// cannot take them back is read no further until held messages go on. Held
// messages are acked once written, like any other; when the forwarder stops,
// it hands those still held back to a reader that can take them, and
// otherwise leaves them unacked, for the source to deliver again if it can.

// Hold is a forwarder's per-key hold: the messages it read whose key is over
// its limit, queued by key until the key has tokens again, and the rule of
// which go on, which wait and which go back to the source. The forwarder
// reads through it (Read), lets it make room before a read (Wait), and takes
// what it still holds when it stops (Release); the reader and handing
// messages back to it stay the forwarder's. Only the forwarder's reading
// goroutine uses it.
type Hold struct {
	PerKey
	env      Env
	readSize int // the most messages one read takes
	queues   map[string]*heldKey
	order    []*heldKey // keys with held messages, in the order they were first held
	held     int
	// spillFailed is set when the reader refused held messages back: the
	// hold then waits instead.
	spillFailed bool

	// Scratch of a read: one request per key, and per new message its key
	// and the index of its request (keyless: -1; behind held ones: -2).
	reqs    []ratelimit.KeyRequest
	granted []int
	cand    []int // of reqs: held messages asked for
	fresh   []int // of reqs: new messages asked for
	index   map[string]int
	keys    []string
	slot    []int
}

// ReadFunc reads at most len(buf) messages into buf, as isb.Reader.Read: the
// forwarder's reader, counting what it reads.
type ReadFunc func(ctx context.Context, buf []isb.ReadMessage) (int, error)

// NackFunc hands msgs back to the forwarder's reader, to be delivered again
// no sooner than delay (isb.Nacker.Nack, under the forwarder's ack lock and a
// timeout of its own, also once ctx is done).
type NackFunc func(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error

// NewHold returns the per-key hold of a forwarder that reads batches of
// batchSize, at most readSize messages a read, or nil when t has no per-key
// limit.
func (t *Throttle) NewHold(batchSize, readSize int) *Hold {
	if t.PerKey == nil || t.PerKey.Limiter == nil {
		return nil
	}
	p := *t.PerKey
	if p.MaxHeld <= 0 {
		p.MaxHeld = DefaultMaxHeldBatches * batchSize
	}
	if p.Metrics == nil {
		p.Metrics = NewKeyMetrics(nil)
	}
	return &Hold{PerKey: p, env: t.env, readSize: readSize, queues: map[string]*heldKey{}, index: map[string]int{}}
}

// heldKey is the queue of one key's held messages.
type heldKey struct {
	key     string
	msgs    []isb.ReadMessage
	head    int
	blocked int64 // the last epoch in which the key had no tokens left
}

func (q *heldKey) len() int { return len(q.msgs) - q.head }

// maxKeyRounds bounds the reads of one call whose messages were all held.
const maxKeyRounds = 8

// Read fills buf, at most len(buf) messages, with held messages whose key
// has tokens again and new messages read with r whose key has tokens (or
// that have no key), and holds the new ones whose key has none. When every
// new message of a read was held, it reads again, a few times at most. It
// returns the messages put in buf and the first error of r or the per-key
// limiter.
func (h *Hold) Read(ctx context.Context, buf []isb.ReadMessage, r ReadFunc) (int, error) {
	for round := 1; ; round++ {
		out, n, err := h.step(ctx, r, buf)
		if out > 0 || n == 0 || err != nil || round == maxKeyRounds || h.held >= h.MaxHeld || ctx.Err() != nil {
			return out, err
		}
	}
}

// request returns the index of key's request in this step, adding it.
func (h *Hold) request(key string) int {
	if i, ok := h.index[key]; ok {
		return i
	}
	i := len(h.reqs)
	h.index[key] = i
	h.reqs = append(h.reqs, ratelimit.KeyRequest{Key: key})
	h.cand, h.fresh = append(h.cand, 0), append(h.fresh, 0)
	return i
}

// step is one read: held messages that may go on are asked for, in the
// order their keys were held; when there are none, new messages are read,
// as many as the hold has room for; then one Take asks for the tokens of
// every key. It returns the
// messages put in buf and how many were read from r.
func (h *Hold) step(ctx context.Context, r ReadFunc, buf []isb.ReadMessage) (int, int, error) {
	h.reqs, h.cand, h.fresh = h.reqs[:0], h.cand[:0], h.fresh[:0]
	clear(h.index)
	e, _ := h.Limiter.Epoch()
	reserved := 0
	for _, q := range h.order {
		if reserved == len(buf) {
			break
		}
		if q.blocked < e {
			c := min(q.len(), len(buf)-reserved)
			h.cand[h.request(q.key)] = c
			reserved += c
		}
	}
	n, err := 0, error(nil)
	// Held messages that may go on are not kept waiting for a read of new
	// ones, which waits up to readTimeout when the source is dry: a step
	// with some reads nothing new.
	if want := min(len(buf)-reserved, h.MaxHeld-h.held); want > 0 && reserved == 0 {
		n, err = r(ctx, buf[reserved:reserved+want])
	}
	fresh := buf[reserved : reserved+n]
	h.keys, h.slot = h.keys[:0], h.slot[:0]
	for j := range fresh {
		key, ok := h.Mode.KeyOf(fresh[j].Keys)
		h.keys = append(h.keys, key)
		switch q := h.queues[key]; {
		case !ok:
			h.slot = append(h.slot, -1)
		case q != nil && (q.blocked >= e || h.candidates(key) < q.len()):
			h.slot = append(h.slot, -2) // behind held messages of its key
		default:
			i := h.request(key)
			h.fresh[i]++
			h.slot = append(h.slot, i)
		}
	}
	asked := false
	for i := range h.reqs {
		h.reqs[i].Want = h.cand[i] + h.fresh[i]
		asked = asked || h.reqs[i].Want > 0
	}
	h.granted = slices.Grow(h.granted[:0], len(h.reqs))[:len(h.reqs)]
	epoch := e
	if asked {
		var terr error
		if epoch, terr = h.Limiter.TryAcquire(ctx, h.reqs, h.granted); terr != nil && err == nil {
			err = terr
		}
	}
	out := h.release(buf, epoch)
	held := 0
	for j := range fresh {
		m := fresh[j]
		switch i := h.slot[j]; {
		case i == -1:
		case i == -2:
			h.push(h.keys[j], m, noBlock)
			held++
			continue
		case h.granted[i] > 0:
			h.granted[i]--
		default:
			h.push(h.keys[j], m, epoch)
			held++
			continue
		}
		buf[out] = m
		out++
	}
	clear(buf[out : reserved+n]) // let go of what moved to the hold
	if held > 0 {
		h.Metrics.HeldTotal.Add(float64(held))
		h.Metrics.AddHeld(int64(held))
	}
	return out, n, err
}

// noBlock pushes a message without changing its key's blocked epoch.
const noBlock = -1 << 62

// candidates returns the held messages of key asked for in this step.
func (h *Hold) candidates(key string) int {
	if i, ok := h.index[key]; ok {
		return h.cand[i]
	}
	return 0
}

// release moves the held messages granted tokens to the front of buf, and
// takes their tokens out of h.granted, leaving there what is left for new
// messages. A key that got fewer than asked is blocked in epoch. It returns
// the messages released.
func (h *Hold) release(buf []isb.ReadMessage, epoch int64) int {
	out, emptied := 0, false
	for i, req := range h.reqs {
		c := h.cand[i]
		if c == 0 {
			continue
		}
		q := h.queues[req.Key]
		k := min(h.granted[i], c)
		out += copy(buf[out:], q.msgs[q.head:q.head+k])
		clear(q.msgs[q.head : q.head+k])
		q.head += k
		h.granted[i] -= k
		if k < c {
			q.blocked = epoch
		}
		if q.len() == 0 {
			q.msgs, q.head = nil, 0
			emptied = true
		}
	}
	if out > 0 {
		h.held -= out
		h.Metrics.AddHeld(-int64(out))
	}
	if emptied {
		h.dropEmpty()
	}
	return out
}

// push holds m behind the held messages of key, and blocks the key in
// epoch blocked unless that is noBlock.
func (h *Hold) push(key string, m isb.ReadMessage, blocked int64) {
	q := h.queues[key]
	if q == nil {
		q = &heldKey{key: key, blocked: noBlock}
		h.queues[key] = q
		h.order = append(h.order, q)
	}
	if q.head > 0 && q.head*2 >= len(q.msgs) {
		n := copy(q.msgs, q.msgs[q.head:])
		clear(q.msgs[n:])
		q.msgs, q.head = q.msgs[:n], 0
	}
	q.msgs = append(q.msgs, m)
	if blocked != noBlock {
		q.blocked = blocked
	}
	h.held++
}

// full reports whether the hold is full and none of its keys may go on
// before the epoch after e, the current one.
func (h *Hold) full() (bool, int64) {
	if h.held < h.MaxHeld {
		return false, 0
	}
	e, _ := h.Limiter.Epoch()
	for _, q := range h.order {
		if q.blocked < e {
			return false, e
		}
	}
	return true, e
}

// Wait makes room, before a read, when the hold is full and none of its
// keys may go on: it hands the newest held messages back with nack, when
// the reader takes messages back (nack is not nil), or else waits for the
// next epoch, paused for rate_limited meanwhile.
func (h *Hold) Wait(ctx context.Context, nack NackFunc) {
	full, e := h.full()
	if !full {
		return
	}
	if nack != nil && !h.spillFailed && h.spill(ctx, nack) {
		return
	}
	h.env.Pauses.Begin(ratelimit.ReasonRateLimited)
	defer h.env.Pauses.End(ratelimit.ReasonRateLimited)
	h.Limiter.WaitEpoch(ctx, e+1)
}

// Release gives up the messages still held, for the forwarder to hand back
// to its reader when it stops, in the order their keys were first held, and
// empties the hold.
func (h *Hold) Release() []isb.ReadMessage {
	if h.held == 0 {
		return nil
	}
	msgs := make([]isb.ReadMessage, 0, h.held)
	for _, q := range h.order {
		msgs = append(msgs, q.msgs[q.head:]...)
	}
	h.Metrics.AddHeld(-int64(h.held))
	h.queues, h.order, h.held = map[string]*heldKey{}, nil, 0
	return msgs
}

// maxSpillDelay bounds how long a message handed back waits at the source.
const maxSpillDelay = time.Minute

// spill hands back with nack the newest held messages of the keys that
// hold the most, until a read's worth of room is free (at most half the
// hold), to be delivered again no sooner than the key's backlog that stays
// held can have gone: a second for each perKey.max of it, at least one. It
// reports whether it made room.
func (h *Hold) spill(ctx context.Context, nack NackFunc) bool {
	room := max(min(h.readSize, h.MaxHeld/2), 1)
	perKey := max(h.Limiter.Max(), 1)
	var msgs []isb.ReadMessage
	backlog := 0
	for len(msgs) < room {
		var top *heldKey
		for _, q := range h.order {
			if q.len() > 0 && (top == nil || q.len() > top.len()) {
				top = q
			}
		}
		if top == nil {
			break
		}
		// Down to the next largest queue, or what room still needs.
		next := 0
		for _, q := range h.order {
			if q != top && q.len() > next {
				next = q.len()
			}
		}
		k := min(max(top.len()-next, 1), room-len(msgs), top.len())
		tail := top.msgs[len(top.msgs)-k:]
		msgs = append(msgs, tail...)
		clear(tail)
		top.msgs = top.msgs[:len(top.msgs)-k]
		backlog = max(backlog, top.len())
	}
	if len(msgs) == 0 {
		return false
	}
	delay := min(max(time.Duration(int64(backlog)/perKey)*time.Second, time.Second), maxSpillDelay)
	err := nack(ctx, msgs, delay)
	h.held -= len(msgs)
	h.Metrics.AddHeld(-int64(len(msgs)))
	h.dropEmpty()
	if err != nil {
		h.spillFailed = true
		h.env.Logger.Warn("handing held messages back to the source failed; a full hold waits from now on, and these are delivered again after the source's ack deadline",
			zap.Int("messages", len(msgs)), zap.Error(err))
		return true
	}
	h.Metrics.HandedBackTotal.Add(float64(len(msgs)))
	return true
}

// dropEmpty forgets the keys with no held messages left.
func (h *Hold) dropEmpty() {
	kept := h.order[:0]
	for _, q := range h.order {
		if q.len() > 0 {
			kept = append(kept, q)
		} else {
			delete(h.queues, q.key)
		}
	}
	clear(h.order[len(kept):])
	h.order = kept
}
