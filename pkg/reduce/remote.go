package reduce

import (
	"context"
	"slices"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/udf/reduceclient"
	"github.com/sluiceflow/sluice/pkg/udf/sessionreduceclient"
)

// Remote is a Reducer that runs a user-defined reduce function through c,
// a client of a reduce or reduce-stream server: each window and key set is
// a stream of its own, which gets the window's messages when it closes
// ([RemoteStream] sends a reduce streamer each message as it comes). Each
// message carries the watermark fn returns (nil: none, -1 ms on the wire).
// The results keep their keys, tags and user metadata; those tagged to be
// dropped are left out.
func Remote(c *reduceclient.Client, watermark func() time.Time) Reducer {
	return ReducerFunc(func(ctx context.Context, w window.Window, _ []string, msgs []isb.Message) ([]isb.Message, error) {
		var wm time.Time
		if watermark != nil {
			wm = watermark()
		}
		in := make([]reduceclient.Message, len(msgs))
		for i := range msgs {
			in[i] = reduceclient.Message{Message: msgs[i], Watermark: wm}
		}
		res, err := c.Reduce(ctx, reduceclient.Window{Start: w.Start, End: w.End}, in)
		if err != nil {
			return nil, err
		}
		out := make([]isb.Message, 0, len(res))
		for _, r := range res {
			if slices.Contains(r.Tags, reduceclient.DropTag) {
				continue
			}
			out = append(out, isb.Message{Keys: r.Keys, Value: r.Value, Tags: r.Tags, Metadata: r.Metadata})
		}
		return out, nil
	})
}

// RemoteSession is a SessionReducer that runs a user-defined session
// reduce function through c, on the client's one stream, as Numaflow's
// runtime does: each operation on a session goes as it happens, and a
// session is closed, and its results come back, when the watermark closes
// it. Each message carries the watermark fn returns (nil: none, -1 ms on
// the wire). The results keep their keys, tags and user metadata; those
// tagged to be dropped are left out.
func RemoteSession(c *sessionreduceclient.Client, watermark func() time.Time) SessionReducer {
	return &remoteSession{c: c, watermark: watermark}
}

type remoteSession struct {
	c         *sessionreduceclient.Client
	watermark func() time.Time
}

var _ SessionReducer = (*remoteSession)(nil)

func keyed(w window.Window, keys []string) sessionreduceclient.KeyedWindow {
	return sessionreduceclient.KeyedWindow{Start: w.Start, End: w.End, Keys: keys}
}

func (r *remoteSession) message(m isb.Message) sessionreduceclient.Message {
	var wm time.Time
	if r.watermark != nil {
		wm = r.watermark()
	}
	return sessionreduceclient.Message{Message: m, Watermark: wm}
}

// Open opens session w of keys on the server with m.
func (r *remoteSession) Open(ctx context.Context, keys []string, w window.Window, m isb.Message) error {
	return r.c.Open(ctx, keyed(w, keys), r.message(m))
}

// Append adds m to the open session w of keys.
func (r *remoteSession) Append(ctx context.Context, keys []string, w window.Window, m isb.Message) error {
	return r.c.Append(ctx, keyed(w, keys), r.message(m))
}

// Expand makes session old of keys the session to, with m.
func (r *remoteSession) Expand(ctx context.Context, keys []string, old, to window.Window, m isb.Message) error {
	return r.c.Expand(ctx, keyed(old, keys), keyed(to, keys), r.message(m))
}

// Merge merges the sessions ws of keys into one.
func (r *remoteSession) Merge(ctx context.Context, keys []string, ws []window.Window) error {
	kws := make([]sessionreduceclient.KeyedWindow, len(ws))
	for i, w := range ws {
		kws[i] = keyed(w, keys)
	}
	return r.c.Merge(ctx, kws...)
}

// Reduce closes session w of keys, which has had its messages, and
// returns its results.
func (r *remoteSession) Reduce(ctx context.Context, w window.Window, keys []string, _ []isb.Message) ([]isb.Message, error) {
	res, err := r.c.CloseSessions(ctx, keyed(w, keys))
	if err != nil {
		return nil, err
	}
	out := make([]isb.Message, 0, len(res[0]))
	for _, r := range res[0] {
		if slices.Contains(r.Tags, sessionreduceclient.DropTag) {
			continue
		}
		out = append(out, isb.Message{Keys: r.Keys, Value: r.Value, Tags: r.Tags, Metadata: r.Metadata})
	}
	return out, nil
}
