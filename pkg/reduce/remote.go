package reduce

import (
	"context"
	"slices"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	udfreduce "github.com/sluiceflow/sluice/pkg/udf/reduce"
	udfsession "github.com/sluiceflow/sluice/pkg/udf/sessionreduce"
	"github.com/sluiceflow/sluice/pkg/window"
)

// Remote is a Reducer that runs a user-defined reduce function through c,
// a client of a reduce or reduce-stream server: each window and key set is
// a stream of its own. Each message carries the watermark fn returns (nil:
// none, -1 ms on the wire). The results keep their keys, tags and user
// metadata; those tagged to be dropped are left out.
func Remote(c *udfreduce.Client, watermark func() time.Time) Reducer {
	return ReducerFunc(func(ctx context.Context, w window.Window, _ []string, msgs []isb.Message) ([]isb.Message, error) {
		var wm time.Time
		if watermark != nil {
			wm = watermark()
		}
		in := make([]udfreduce.Message, len(msgs))
		for i := range msgs {
			in[i] = udfreduce.Message{Message: msgs[i], Watermark: wm}
		}
		res, err := c.Reduce(ctx, udfreduce.Window{Start: w.Start, End: w.End}, in)
		if err != nil {
			return nil, err
		}
		out := make([]isb.Message, 0, len(res))
		for _, r := range res {
			if slices.Contains(r.Tags, udfreduce.DropTag) {
				continue
			}
			out = append(out, isb.Message{Keys: r.Keys, Value: r.Value, Tags: r.Tags, Metadata: r.Metadata})
		}
		return out, nil
	})
}

// RemoteSession is a Reducer of session windows that runs a user-defined
// session reduce function through c, on the client's one stream: each
// session that closes is opened with its first message, the others
// appended, and closed. Each message carries the watermark fn returns
// (nil: none, -1 ms on the wire). The results keep their keys, tags and
// user metadata; those tagged to be dropped are left out.
func RemoteSession(c *udfsession.Client, watermark func() time.Time) Reducer {
	return ReducerFunc(func(ctx context.Context, w window.Window, keys []string, msgs []isb.Message) ([]isb.Message, error) {
		var wm time.Time
		if watermark != nil {
			wm = watermark()
		}
		in := make([]udfsession.Message, len(msgs))
		for i := range msgs {
			in[i] = udfsession.Message{Message: msgs[i], Watermark: wm}
		}
		res, err := c.Reduce(ctx, udfsession.KeyedWindow{Start: w.Start, End: w.End, Keys: keys}, in)
		if err != nil {
			return nil, err
		}
		out := make([]isb.Message, 0, len(res))
		for _, r := range res {
			if slices.Contains(r.Tags, udfsession.DropTag) {
				continue
			}
			out = append(out, isb.Message{Keys: r.Keys, Value: r.Value, Tags: r.Tags, Metadata: r.Metadata})
		}
		return out, nil
	})
}
