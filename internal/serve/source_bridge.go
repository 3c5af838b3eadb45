package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
)

// bridge is the sink of the source role's vertex and the Sourcer its UD
// source server serves: the vertex reads its source under the rate limit and
// writes each batch to the bridge, whose Write waits until the client of the
// server has read every message and acked or nacked it. So the vertex acks
// its source only what the client acked and hands back what it nacked, and
// a Read never returns more than the limiter granted.
//
// When the read stream a message went out on ends before its ack (the
// client is gone), the message is handed back.
//
// When stop is closed (the role is stopping), what no client has read is
// handed back at once, and what was read and not acked within the drain
// time is handed back then: at least once, nothing lost.
//
// A bridge is safe for concurrent use.
type bridge struct {
	queue chan *held
	stop  chan struct{}
	drain time.Duration
	// pending and partitions tell the source's own pending count and
	// partitions.
	pending    func(ctx context.Context) int64
	partitions []int32
	// ready says why the vertex cannot read (nil when it can); nil until
	// the role sets it.
	ready func() error

	mu   sync.Mutex
	next uint64
	out  map[uint64]*held
	// streams are the read streams that took messages, each watched so
	// that what it took and did not ack goes back when it ends.
	streams map[context.Context]bool
}

// held is one message written to the bridge and not yet answered.
type held struct {
	msg isb.Message
	id  uint64
	// read is set (under bridge.mu) once a Read has taken the entry, and
	// by to the context of the read stream it went out on.
	read bool
	by   context.Context
	done chan error
	once sync.Once
}

func (e *held) resolve(err error) { e.once.Do(func() { e.done <- err }) }

func newBridge(drain time.Duration, partitions []int32) *bridge {
	return &bridge{queue: make(chan *held, 1024), stop: make(chan struct{}), drain: drain,
		partitions: partitions, out: map[uint64]*held{}, streams: map[context.Context]bool{}, pending: func(context.Context) int64 { return sourcer.PendingUnknown }}
}

var _ isb.Writer = (*bridge)(nil)
var _ sourcer.Sourcer = (*bridge)(nil)
var _ sourcer.ReadyReporter = (*bridge)(nil)

// Ready says why the vertex behind the bridge does not read, nil when it
// does: the answer to IsReady.
func (b *bridge) Ready() error {
	if b.ready == nil {
		return errors.New("the source is not open yet")
	}
	return b.ready()
}

// Write hands msgs to the server's readers and waits for each one's ack
// (nil in errs) or nack (isb.ErrNack).
func (b *bridge) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	es := make([]*held, len(msgs))
	b.mu.Lock()
	for i := range msgs {
		b.next++
		es[i] = &held{msg: msgs[i], id: b.next, done: make(chan error, 1)}
	}
	b.mu.Unlock()
	for _, e := range es {
		select {
		case b.queue <- e:
		case <-b.stop:
			e.resolve(isb.ErrNack)
		case <-ctx.Done():
			e.resolve(isb.ErrNack)
		}
	}
	var deadline <-chan time.Time
	for i, e := range es {
		select {
		case errs[i] = <-e.done:
			continue
		case <-ctx.Done():
			b.handBack(es[i:])
			errs[i] = <-e.done
			continue
		case <-b.stop:
		}
		// What no client has read goes back at once.
		b.mu.Lock()
		var unread []*held
		for _, e := range es[i:] {
			if !e.read {
				unread = append(unread, e)
			}
		}
		b.mu.Unlock()
		b.handBack(unread)
		if deadline == nil {
			t := time.NewTimer(b.drain)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case errs[i] = <-e.done:
		case <-deadline:
			b.handBack(es[i:])
			errs[i] = <-e.done
		}
	}
	return nil
}

// streamEnded hands back what the read stream of ctx took and did not ack:
// its client is gone (a new one reads on a new stream), so no ack comes.
func (b *bridge) streamEnded(ctx context.Context) {
	var gone []*held
	b.mu.Lock()
	delete(b.streams, ctx)
	for _, e := range b.out {
		if e.by == ctx {
			gone = append(gone, e)
		}
	}
	b.mu.Unlock()
	b.handBack(gone)
}

// handBack nacks every entry of es not yet answered.
func (b *bridge) handBack(es []*held) {
	b.mu.Lock()
	for _, e := range es {
		delete(b.out, e.id)
	}
	b.mu.Unlock()
	for _, e := range es {
		e.resolve(isb.ErrNack)
	}
}

// Read sends at most req.Count messages, waiting req.Timeout at most for
// the first.
func (b *bridge) Read(ctx context.Context, req sourcer.ReadRequest, out chan<- sourcer.Message) {
	timer := time.NewTimer(req.Timeout)
	defer timer.Stop()
	for n := uint64(0); n < req.Count; n++ {
		var e *held
		if n == 0 {
			select {
			case e = <-b.queue:
			case <-timer.C:
				return
			case <-ctx.Done():
				return
			}
		} else {
			select {
			case e = <-b.queue:
			default:
				return
			}
		}
		b.mu.Lock()
		e.read, e.by = true, ctx
		b.out[e.id] = e
		if !b.streams[ctx] {
			b.streams[ctx] = true
			context.AfterFunc(ctx, func() { b.streamEnded(ctx) })
		}
		b.mu.Unlock()
		select {
		case <-b.stop:
			// Not yet sent: handed back now rather than at the drain.
			b.handBack([]*held{e})
			return
		default:
		}
		out <- sourcer.Message{Value: e.msg.Value, Keys: e.msg.Keys, EventTime: e.msg.EventTime, Headers: e.msg.Headers,
			Offset: sourcer.Offset{Value: binary.BigEndian.AppendUint64(nil, e.id), PartitionID: b.partitions[0]}}
	}
}

func (b *bridge) answer(offsets []sourcer.Offset, err error) {
	for _, o := range offsets {
		if len(o.Value) != 8 {
			continue
		}
		id := binary.BigEndian.Uint64(o.Value)
		b.mu.Lock()
		e := b.out[id]
		delete(b.out, id)
		b.mu.Unlock()
		if e != nil {
			e.resolve(err)
		}
	}
}

// Ack acks offsets' messages at the source.
func (b *bridge) Ack(_ context.Context, offsets []sourcer.Offset) { b.answer(offsets, nil) }

// Nack hands offsets' messages back to the source.
func (b *bridge) Nack(_ context.Context, offsets []sourcer.Offset) { b.answer(offsets, isb.ErrNack) }

// Pending is the source's own pending count. Kafka's lag (up to the
// committed offset) and JetStream's NumAckPending already count the
// messages the vertex read and no client has acked, so nothing is added for
// them.
func (b *bridge) Pending(ctx context.Context) int64 { return b.pending(ctx) }

// Partitions are the source's partitions as the role tells them.
func (b *bridge) Partitions(context.Context) []int32 { return b.partitions }

// close makes the bridge stop: see bridge.
func (b *bridge) close() { close(b.stop) }
