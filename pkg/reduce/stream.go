package reduce

import (
	"context"
	"fmt"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

// StreamReducer is a Reducer of fixed or sliding windows whose function
// answers as messages come, as a reduce streamer does. The Processor sends
// each message to each of its windows, with its key set, as it adds it
// (Send; the first of a window and key set opens it), takes at each
// Advance what the functions have sent so far (Take, which does not wait),
// and ends a window and key set when the watermark closes it (End, which
// returns the rest of its results once its function has sent them all).
// The results of a window and key set are numbered from 0 in the order its
// function sends them, those tagged to be dropped left out; each one comes
// once, from Take or from End.
//
// An error of Send, Take or End may mean the server lost windows (a stream
// failed, or the server restarted): the Processor then calls Reset, which
// ends every stream and forgets what they sent and was not taken, and
// sends each open window and key set again, its messages in the order
// added, before it goes on. Their functions start again and number their
// results from 0 again. The Processor calls a StreamReducer from one
// goroutine.
type StreamReducer interface {
	Reducer
	Send(ctx context.Context, w window.Window, keys []string, m isb.Message) error
	Take() ([]Streamed, error)
	End(ctx context.Context, w window.Window, keys []string) ([]Streamed, error)
	Reset()
}

// Streamed is a result of a StreamReducer's function: its window, the key
// set whose function sent it, and its place among the results of that
// window and key set. Result's keys are the key set's unless the function
// gave its own.
type Streamed struct {
	Window window.Window
	Keys   []string
	Index  int
	Result isb.Message
}

// streamGroup is a window and key set of a StreamReducer, with its
// messages.
type streamGroup struct {
	w window.Window
	g *window.Group[isb.Message]
}

// streamGroups lists the windows and key sets of closed, in order.
func streamGroups(closed []window.Closed[isb.Message]) []streamGroup {
	var out []streamGroup
	for _, c := range closed {
		for _, g := range c.Groups {
			out = append(out, streamGroup{c.Window, g})
		}
	}
	return out
}

// sendStream sends m, of keys, to each of its windows ws; when that fails,
// it sends every open window and key set (m's included) again.
func (p *Processor) sendStream(ctx context.Context, keys []string, ws []window.Window, m isb.Message) error {
	for _, w := range ws {
		err := p.stream.Send(ctx, w, keys, m)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return err
		}
		p.streamStale = true
		return p.restream(ctx, nil)
	}
	return nil
}

// restream ends every stream of the StreamReducer and sends the windows
// and key sets closing, then every open one, again, each with its messages
// in the order added. The server has them all once it returns nil.
func (p *Processor) restream(ctx context.Context, closing []streamGroup) error {
	p.stream.Reset()
	var err error
	send := func(w window.Window, g *window.Group[isb.Message]) {
		for _, m := range g.Items {
			if err != nil {
				return
			}
			err = p.stream.Send(ctx, w, g.Keys, m)
		}
	}
	for _, c := range closing {
		send(c.w, c.g)
	}
	p.book.EachWindow(send)
	if err != nil {
		return fmt.Errorf("reduce: sending the open windows again: %w", err)
	}
	p.streamStale = false
	return nil
}

// takeStreamed returns, as results to write, what the functions have sent
// so far; when a stream has failed, it sends closing and the open windows
// again.
func (p *Processor) takeStreamed(ctx context.Context, closing []streamGroup) ([]isb.Message, error) {
	if p.streamStale {
		if err := p.restream(ctx, closing); err != nil {
			return nil, err
		}
	}
	res, err := p.stream.Take()
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		p.streamStale = true
		if err := p.restream(ctx, closing); err != nil {
			return nil, err
		}
	}
	return appendStreamed(nil, res), nil
}

// endStream ends closing[0], which the watermark closed, and returns the
// rest of its results; when that fails, it sends closing and the open
// windows again, and tries once more.
func (p *Processor) endStream(ctx context.Context, closing []streamGroup) ([]Streamed, error) {
	c := closing[0]
	res, err := p.stream.End(ctx, c.w, c.g.Keys)
	if err == nil || ctx.Err() != nil {
		return res, err
	}
	p.streamStale = true
	if err := p.restream(ctx, closing); err != nil {
		return nil, err
	}
	return p.stream.End(ctx, c.w, c.g.Keys)
}

// appendStreamed appends the results res to out, each with the event time
// of its window's results and the ID of its place in them.
func appendStreamed(out []isb.Message, res []Streamed) []isb.Message {
	for _, s := range res {
		r := s.Result
		if r.Keys == nil {
			r.Keys = s.Keys
		}
		r.EventTime = s.Window.ResultTime()
		r.ID = resultID(s.Window, s.Keys, s.Index)
		out = append(out, r)
	}
	return out
}
