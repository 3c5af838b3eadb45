package serve

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
)

// mapQueue joins the served map.v1.Map to the vertex: as a [mapper.Mapper]
// (or a [batchmapper.BatchMapper], or a [mapstreamer.MapStreamer]) it queues each request and waits for its answer; as the vertex's source
// ([isb.Reader]) it hands the queued requests to the forwarder, which
// throttles them under the limit and maps them; as its sink ([isb.Writer])
// it keeps what each request became; the forwarder's ack then answers the
// request. A nacked request (the limit, or the user's map, said later) is
// queued again after its delay, never answered nor lost. It is safe for
// concurrent use.
type mapQueue struct {
	in          chan *mapRequest
	closed      chan struct{} // closed once the vertex has stopped
	readTimeout time.Duration
	seq         atomic.Uint64

	mu      sync.Mutex
	pending map[string]*mapRequest // by the message's ID
}

// mapRequest is one message in the vertex, waiting for its answer.
type mapRequest struct {
	msg  isb.Message
	out  []isb.Message // guarded by mapQueue.mu
	done chan struct{}
}

var (
	_ mapper.Mapper           = (*mapQueue)(nil)
	_ batchmapper.BatchMapper = (*mapQueue)(nil)
	_ mapstreamer.MapStreamer = (*mapQueue)(nil)
	_ isb.Reader              = (*mapQueue)(nil)
	_ isb.Nacker              = (*mapQueue)(nil)
	_ isb.Writer              = (*mapQueue)(nil)
)

func newMapQueue(readTimeout time.Duration) *mapQueue {
	if readTimeout <= 0 {
		readTimeout = time.Second
	}
	return &mapQueue{in: make(chan *mapRequest, 1024), closed: make(chan struct{}), readTimeout: readTimeout, pending: map[string]*mapRequest{}}
}

// Map queues d for the vertex and returns what it became: the user's map's
// results (or d itself, passed on), or a drop when nothing came of it. When
// ctx ends first, the stream is gone and the runtime delivers d again.
func (q *mapQueue) Map(ctx context.Context, keys []string, d mapper.Datum) mapper.Messages {
	r := q.newRequest(keys, d)
	if !q.enqueue(ctx, r) {
		return nil
	}
	select {
	case <-r.done:
		return q.answer(r)
	case <-ctx.Done():
		return nil
	}
}

// MapStream queues d for the vertex, as Map does, and sends what it became
// on out, one message after another, in the order the vertex wrote them;
// the server then ends the request's stream. When ctx ends first, it sends
// nothing.
func (q *mapQueue) MapStream(ctx context.Context, keys []string, d mapstreamer.Datum, out chan<- mapstreamer.Message) {
	for _, m := range q.Map(ctx, keys, d) {
		select {
		case out <- m:
		case <-ctx.Done():
			return
		}
	}
}

// BatchMap queues the batch's datums for the vertex as they come, and
// answers each once all have their answers, as Map does.
func (q *mapQueue) BatchMap(ctx context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
	var reqs []*mapRequest
	var ids []string
	for d := range datums {
		r := q.newRequest(d.Keys(), d)
		reqs, ids = append(reqs, r), append(ids, d.ID())
		if !q.enqueue(ctx, r) {
			for range datums {
			}
			return nil
		}
	}
	out := make(batchmapper.BatchResponses, len(reqs))
	for i, r := range reqs {
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil
		}
		out[i] = batchmapper.NewBatchResponse(ids[i], q.answer(r)...)
	}
	return out
}

func (q *mapQueue) newRequest(keys []string, d mapper.Datum) *mapRequest {
	return &mapRequest{done: make(chan struct{}), msg: isb.Message{
		ID: strconv.FormatUint(q.seq.Add(1), 10), Keys: keys, Value: d.Value(), EventTime: d.EventTime(),
		Headers: d.Headers(), Metadata: fromUserMetadata(d.UserMetadata()),
	}}
}

// enqueue hands r to the vertex; false when ctx ended first.
func (q *mapQueue) enqueue(ctx context.Context, r *mapRequest) bool {
	q.mu.Lock()
	q.pending[r.msg.ID] = r
	q.mu.Unlock()
	select {
	case q.in <- r:
		return true
	case <-ctx.Done():
		q.forget(r)
		return false
	}
}

// answer returns what r became, once acked.
func (q *mapQueue) answer(r *mapRequest) mapper.Messages {
	q.mu.Lock()
	out := r.out
	q.mu.Unlock()
	if len(out) == 0 {
		return mapper.Messages{mapper.MessageToDrop()}
	}
	msgs := make(mapper.Messages, len(out))
	for i, m := range out {
		msgs[i] = mapper.NewMessage(m.Value).WithKeys(m.Keys).WithTags(m.Tags).WithUserMetadata(toUserMetadata(m.Metadata))
	}
	return msgs
}

func (q *mapQueue) forget(r *mapRequest) {
	q.mu.Lock()
	delete(q.pending, r.msg.ID)
	q.mu.Unlock()
}

// Read hands the forwarder up to len(buf) queued requests, waiting at most
// the read timeout for the first.
func (q *mapQueue) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	t := time.NewTimer(q.readTimeout)
	defer t.Stop()
	select {
	case r := <-q.in:
		buf[0] = isb.ReadMessage{Message: r.msg, Handle: r}
	case <-t.C:
		return 0, nil
	case <-ctx.Done():
		return 0, nil
	}
	n := 1
	for ; n < len(buf); n++ {
		select {
		case r := <-q.in:
			buf[n] = isb.ReadMessage{Message: r.msg, Handle: r}
		default:
			return n, nil
		}
	}
	return n, nil
}

// Ack answers the requests of msgs with what the sink kept of them.
func (q *mapQueue) Ack(_ context.Context, msgs []isb.ReadMessage) error {
	for i := range msgs {
		r := msgs[i].Handle.(*mapRequest)
		q.forget(r)
		close(r.done)
	}
	return nil
}

// Nack queues the requests of msgs again after delay, with nothing kept of
// them.
func (q *mapQueue) Nack(_ context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	for i := range msgs {
		r := msgs[i].Handle.(*mapRequest)
		q.mu.Lock()
		r.out = nil
		q.mu.Unlock()
		time.AfterFunc(delay, func() {
			select {
			case q.in <- r:
			case <-q.closed: // the stream's runtime delivers it again
			}
		})
	}
	return nil
}

// close ends the nacked requests' waits to be queued again, once the vertex
// has stopped.
func (q *mapQueue) close() { close(q.closed) }

// Write keeps each message for the request it came of (its ID, or the ID
// and "-i" for one of several results).
func (q *mapQueue) Write(_ context.Context, msgs []isb.Message, errs []error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range msgs {
		id, _, _ := strings.Cut(msgs[i].ID, "-")
		r := q.pending[id]
		if r == nil {
			errs[i] = nil // answered already: a write the forwarder retried
			continue
		}
		m := msgs[i]
		m.Value = bytes.Clone(m.Value)
		r.out = append(r.out, m)
		errs[i] = nil
	}
	return nil
}

// fromUserMetadata returns md as the vertex's metadata, nil when empty.
func fromUserMetadata(md *mapper.UserMetadata) isb.Metadata {
	if md == nil || md.Len() == 0 {
		return nil
	}
	out := isb.Metadata{}
	for _, g := range md.Groups() {
		kv := map[string][]byte{}
		for _, k := range md.Keys(g) {
			kv[k] = md.Value(g, k)
		}
		out[g] = kv
	}
	return out
}

// toUserMetadata returns md as the SDK's user metadata.
func toUserMetadata(md isb.Metadata) *mapper.UserMetadata {
	out := mapper.NewUserMetadata()
	for g, kv := range md {
		out.CreateGroup(g)
		for k, v := range kv {
			out.AddKV(g, k, v)
		}
	}
	return out
}
