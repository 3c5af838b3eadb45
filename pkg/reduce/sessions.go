package reduce

import (
	"context"
	"fmt"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

// SessionReducer is a Reducer of session windows that is told what
// happens to each session as messages come, as Numaflow's runtime tells a
// session reduce server: Open when a message opens a session, Append when
// one falls in an open session, Expand when one grows a session (old → to),
// Merge when sessions of a key set come to touch (ws, merged into the
// smallest window that covers them, which later operations name). Reduce
// is called when the watermark closes a session that has had all its
// messages so; it closes the session and returns its results (msgs are the
// session's messages, for reference).
//
// An error of any call may mean the server lost every open session (its
// stream failed): the Processor then sends each open session again, Open
// with its first message and Append with the others, before it goes on.
// The Processor calls it from one goroutine.
type SessionReducer interface {
	Reducer
	Open(ctx context.Context, keys []string, w window.Window, m isb.Message) error
	Append(ctx context.Context, keys []string, w window.Window, m isb.Message) error
	Expand(ctx context.Context, keys []string, old, to window.Window, m isb.Message) error
	Merge(ctx context.Context, keys []string, ws []window.Window) error
}

// tell sends what adding m, of keys, did to the sessions.
func (p *Processor) tell(ctx context.Context, keys []string, c window.Change, m isb.Message) error {
	switch c.Op {
	case window.Opened:
		return p.sessions.Open(ctx, keys, c.Window, m)
	case window.Joined:
		return p.sessions.Append(ctx, keys, c.Window, m)
	case window.Expanded:
		return p.sessions.Expand(ctx, keys, c.Old[0], c.Window, m)
	case window.Merged:
		if err := p.sessions.Merge(ctx, keys, c.Old); err != nil {
			return err
		}
		merged := c.Old[0]
		for _, w := range c.Old[1:] {
			merged = merged.Union(w)
		}
		if merged != c.Window {
			return p.sessions.Expand(ctx, keys, merged, c.Window, m)
		}
		return p.sessions.Append(ctx, keys, c.Window, m)
	}
	return fmt.Errorf("reduce: a session change of unknown op %v", c.Op)
}

// resend sends the sessions closing, then every open session, again: Open
// with the first message and Append with the others. The server has them
// all once it returns nil.
func (p *Processor) resend(ctx context.Context, closing []window.Closed[isb.Message]) error {
	var err error
	send := func(w window.Window, g *window.Group[isb.Message]) {
		if err != nil || len(g.Items) == 0 {
			return
		}
		if err = p.sessions.Open(ctx, g.Keys, w, g.Items[0]); err != nil {
			return
		}
		for _, m := range g.Items[1:] {
			if err = p.sessions.Append(ctx, g.Keys, w, m); err != nil {
				return
			}
		}
	}
	for _, c := range closing {
		for _, g := range c.Groups {
			send(c.Window, g)
		}
	}
	p.book.EachSession(send)
	if err != nil {
		return fmt.Errorf("reduce: sending the open sessions again: %w", err)
	}
	p.stale = false
	return nil
}

// closeSession reduces the closing session c, its group g, through the
// session reducer; when that fails, it sends closing (from c on) and the open
// sessions again, and tries once more.
func (p *Processor) closeSession(ctx context.Context, closing []window.Closed[isb.Message], g *window.Group[isb.Message]) ([]isb.Message, error) {
	c := closing[0]
	res, err := p.sessions.Reduce(ctx, c.Window, g.Keys, g.Items)
	if err == nil || ctx.Err() != nil {
		return res, err
	}
	p.stale = true
	if err := p.resend(ctx, closing); err != nil {
		return nil, err
	}
	return p.sessions.Reduce(ctx, c.Window, g.Keys, g.Items)
}
