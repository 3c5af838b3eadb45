package reduce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/udf/reduceclient"
)

// ErrStreamerClosed is the error of a RemoteStreamer's Send after Close.
var ErrStreamerClosed = errors.New("reduce: the reduce streamer is closed")

// RemoteStreamer is a StreamReducer that runs a user-defined reduce
// streamer (numaflow-go's reducestreamer, or sluice's SDK) through a client
// of its reduce-stream server, as Numaflow's runtime does: each window and
// key set is a stream of its own, opened with its first message, and each
// message goes as it is added, with the watermark then. A goroutine per
// open stream receives what the function sends, for the next Take; End
// half-closes the stream, which ends the window for the function, and
// waits for the server's EOF. The results keep their keys, tags and user
// metadata; those tagged to be dropped are left out.
//
// Its Reduce reduces a window and key set whole on a stream of its own, as
// [Remote] does. Close ends every stream and waits for their receivers; it
// is safe to call twice. Send, End and Reset are for one goroutine; Take
// may be called from it too.
type RemoteStreamer struct {
	c         *reduceclient.Client
	watermark func() time.Time
	ctx       context.Context // the streams'; Close cancels it
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the receivers

	mu      sync.Mutex
	streams map[streamID]*remoteWindow
	ready   []*remoteWindow // with results not taken, in the order they came
	err     error           // a stream's failure, for the next Take
	closed  bool
}

var _ StreamReducer = (*RemoteStreamer)(nil)

// streamID names a window and key set.
type streamID struct {
	start, end int64
	keys       string
}

func idOf(w window.Window, keys []string) streamID {
	return streamID{w.Start.UnixNano(), w.End.UnixNano(), window.KeysID(keys)}
}

// remoteWindow is the stream of one window and key set.
type remoteWindow struct {
	w    window.Window
	keys []string
	st   *reduceclient.Stream
	done chan struct{} // closed when its receiver returns

	// Under RemoteStreamer.mu:
	res    []Streamed // received, not taken
	queued bool       // in ready
	next   int        // the index of the next result
	err    error      // why the stream failed
	gone   bool       // forgotten by End, Reset or Close: its receiver notes no more
}

// RemoteStream returns a RemoteStreamer of the reduce streamer c serves.
// Each message carries the watermark fn returns (nil: none, -1 ms on the
// wire).
func RemoteStream(c *reduceclient.Client, watermark func() time.Time) *RemoteStreamer {
	ctx, cancel := context.WithCancel(context.Background())
	return &RemoteStreamer{c: c, watermark: watermark, ctx: ctx, cancel: cancel, streams: map[streamID]*remoteWindow{}}
}

// Reduce reduces the messages of window w and keys whole, on a stream of
// their own, and returns the results.
func (r *RemoteStreamer) Reduce(ctx context.Context, w window.Window, keys []string, msgs []isb.Message) ([]isb.Message, error) {
	return Remote(r.c, r.watermark).Reduce(ctx, w, keys, msgs)
}

// Send sends m to window w of keys, opening its stream with the first
// message, once the server is connected or ctx ends.
func (r *RemoteStreamer) Send(ctx context.Context, w window.Window, keys []string, m isb.Message) error {
	id := idOf(w, keys)
	r.mu.Lock()
	rw, closed := r.streams[id], r.closed
	r.mu.Unlock()
	if closed {
		return ErrStreamerClosed
	}
	if rw == nil {
		var err error
		if rw, err = r.open(ctx, id, w, keys); err != nil {
			return err
		}
	}
	var wm time.Time
	if r.watermark != nil {
		wm = r.watermark()
	}
	return rw.st.Send(reduceclient.Message{Message: m, Watermark: wm})
}

// open opens the stream of window w and keys, and starts its receiver.
func (r *RemoteStreamer) open(ctx context.Context, id streamID, w window.Window, keys []string) (*remoteWindow, error) {
	if err := r.c.Connect(ctx); err != nil {
		return nil, fmt.Errorf("reduce: window %v: %w", w, err)
	}
	st, err := r.c.Open(r.ctx, reduceclient.Window{Start: w.Start, End: w.End})
	if err != nil {
		return nil, err
	}
	rw := &remoteWindow{w: w, keys: slices.Clone(keys), st: st, done: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		st.Close()
		return nil, ErrStreamerClosed
	}
	r.streams[id] = rw
	r.wg.Add(1)
	go r.receive(rw)
	return rw, nil
}

// receive notes what the stream of rw brings until it ends.
func (r *RemoteStreamer) receive(rw *remoteWindow) {
	defer r.wg.Done()
	defer close(rw.done)
	for {
		res, err := rw.st.Recv()
		r.mu.Lock()
		switch {
		case rw.gone:
			r.mu.Unlock()
			return
		case errors.Is(err, io.EOF):
			r.mu.Unlock()
			return
		case err != nil:
			rw.err = err
			if r.err == nil {
				r.err = err
			}
			r.mu.Unlock()
			return
		case slices.Contains(res.Tags, reduceclient.DropTag):
			r.mu.Unlock()
			continue
		}
		rw.res = append(rw.res, Streamed{Window: rw.w, Keys: rw.keys, Index: rw.next,
			Result: isb.Message{Keys: res.Keys, Value: res.Value, Tags: res.Tags, Metadata: res.Metadata}})
		rw.next++
		if !rw.queued {
			rw.queued = true
			r.ready = append(r.ready, rw)
		}
		r.mu.Unlock()
	}
}

// Take returns what the functions have sent since the last Take, in the
// order it came (each window and key set's in the order sent), and the
// failure of a stream since, if any.
func (r *RemoteStreamer) Take() ([]Streamed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Streamed
	for _, rw := range r.ready {
		out = append(out, rw.res...)
		rw.res, rw.queued = nil, false
	}
	clear(r.ready)
	r.ready = r.ready[:0]
	err := r.err
	r.err = nil
	return out, err
}

// End half-closes the stream of window w and keys, which ends the window
// for its function, waits for the server's EOF (within the deadline of the
// client's calls), and returns the results not taken.
func (r *RemoteStreamer) End(ctx context.Context, w window.Window, keys []string) ([]Streamed, error) {
	id := idOf(w, keys)
	r.mu.Lock()
	rw := r.streams[id]
	r.mu.Unlock()
	if rw == nil {
		return nil, fmt.Errorf("reduce: window %v, keys %q: no stream open", w, keys)
	}
	if err := rw.st.CloseSend(); err != nil {
		return nil, err
	}
	select {
	case <-rw.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	delete(r.streams, id)
	rw.gone = true
	res, err := rw.res, rw.err
	rw.res = nil
	r.mu.Unlock()
	rw.st.Close()
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Reset ends every stream and forgets what they sent and was not taken,
// and any failure: the next Send of a window and key set opens it again.
func (r *RemoteStreamer) Reset() {
	r.mu.Lock()
	streams := r.forget()
	r.mu.Unlock()
	for _, rw := range streams {
		rw.st.Close()
		<-rw.done
	}
}

// forget drops every stream and returns them. r.mu is held.
func (r *RemoteStreamer) forget() []*remoteWindow {
	out := make([]*remoteWindow, 0, len(r.streams))
	for id, rw := range r.streams {
		rw.gone, rw.res = true, nil
		out = append(out, rw)
		delete(r.streams, id)
	}
	clear(r.ready)
	r.ready, r.err = r.ready[:0], nil
	return out
}

// Close ends every stream and waits for their receivers. A Send after it
// fails with ErrStreamerClosed.
func (r *RemoteStreamer) Close() error {
	r.mu.Lock()
	r.closed = true
	streams := r.forget()
	r.mu.Unlock()
	r.cancel()
	for _, rw := range streams {
		rw.st.Close()
	}
	r.wg.Wait()
	return nil
}
