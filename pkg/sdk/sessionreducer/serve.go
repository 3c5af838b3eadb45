package sessionreducer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	sessionreducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/sessionreduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/wire"
)

type (
	request  = sessionreducev1.SessionReduceRequest
	response = sessionreducev1.SessionReduceResponse
	keyed    = sessionreducev1.KeyedWindow
)

// serve serves one SessionReduceFn stream: one task per open session, kept
// by the session's keyed window, until the client half-closes the stream;
// then the sessions still open close, and the stream ends once every
// closed session's results and EOF are sent.
func serve(srv *udfserver.Server, c Creator, stream sessionreducev1.SessionReduce_SessionReduceFnServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	out := make(chan *response)
	sent := make(chan error, 1)
	go func() {
		var err error
		for resp := range out {
			if err == nil {
				if err = stream.Send(resp); err != nil {
					cancel()
				}
			}
		}
		sent <- err
	}()
	g, gctx := errgroup.WithContext(ctx)
	s := &session{srv: srv, c: c, g: g, ctx: gctx, out: out, tasks: map[string]*task{}}
	recvErr := s.receive(udfserver.Receive(stream))
	if recvErr != nil {
		cancel()
	}
	for _, t := range s.tasks {
		close(t.in)
	}
	err := g.Wait()
	if err == nil {
		err = recvErr
	}
	close(out)
	if sendErr := <-sent; err == nil {
		err = sendErr
	}
	return err
}

// session is the state of one stream; its receiving goroutine alone
// touches tasks.
type session struct {
	srv   *udfserver.Server
	c     Creator
	g     *errgroup.Group
	ctx   context.Context
	out   chan<- *response
	tasks map[string]*task
}

// task is the reducer of one open session.
type task struct {
	r    SessionReducer
	keys []string
	in   chan Datum
	done chan struct{} // closed when SessionReduce has returned

	mu     sync.Mutex
	win    *keyed // changed by EXPAND
	merged bool   // its results are dropped
}

func (t *task) window() *keyed {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.win
}

// receive carries out each request until the client half-closes the stream
// (nil) or the stream fails.
func (s *session) receive(r *udfserver.Receiver[request]) error {
	for {
		var req *request
		select {
		case req = <-r.C():
		case <-s.ctx.Done():
			return s.ctx.Err() // a task failed; serve returns its error
		}
		if req == nil {
			return r.Err()
		}
		if err := s.do(req); err != nil {
			return err
		}
	}
}

// do carries out one request.
func (s *session) do(req *request) error {
	op := req.GetOperation()
	ws := op.GetKeyedWindows()
	want := map[sessionreducev1.SessionReduceRequest_WindowOperation_Event]int{
		sessionreducev1.SessionReduceRequest_WindowOperation_OPEN:   1,
		sessionreducev1.SessionReduceRequest_WindowOperation_APPEND: 1,
		sessionreducev1.SessionReduceRequest_WindowOperation_EXPAND: 2,
	}[op.GetEvent()]
	if (want > 0 && len(ws) != want) || len(ws) == 0 {
		return udfserver.InvalidRequest(fmt.Sprintf("a %s operation names %d windows", op.GetEvent(), len(ws)))
	}
	switch op.GetEvent() {
	case sessionreducev1.SessionReduceRequest_WindowOperation_OPEN, sessionreducev1.SessionReduceRequest_WindowOperation_APPEND:
		t := s.tasks[taskID(ws[0])]
		if t == nil {
			t = s.start(ws[0], nil)
		}
		return s.feed(t, req)
	case sessionreducev1.SessionReduceRequest_WindowOperation_EXPAND:
		id := taskID(ws[0])
		t := s.tasks[id]
		if t == nil {
			return udfserver.InvalidRequest(fmt.Sprintf("EXPAND of session %s, which is not open", id))
		}
		delete(s.tasks, id)
		t.mu.Lock()
		t.win = ws[1]
		t.mu.Unlock()
		s.tasks[taskID(ws[1])] = t
		return s.feed(t, req)
	case sessionreducev1.SessionReduceRequest_WindowOperation_MERGE:
		return s.merge(ws)
	case sessionreducev1.SessionReduceRequest_WindowOperation_CLOSE:
		for _, w := range ws {
			id := taskID(w)
			if t := s.tasks[id]; t != nil {
				delete(s.tasks, id)
				close(t.in)
			}
		}
		return nil
	}
	return udfserver.InvalidRequest(fmt.Sprintf("unknown window operation %d", op.GetEvent()))
}

// feed hands the request's payload, if any, to t.
func (s *session) feed(t *task, req *request) error {
	p := req.GetPayload()
	if p == nil {
		return nil
	}
	d := wire.NewDatum(wire.DatumFields{Keys: p.GetKeys(), Value: p.GetValue(), EventTime: wire.Time(p.GetEventTime()),
		Watermark: wire.Time(p.GetWatermark()), Headers: p.GetHeaders(), Metadata: p.GetMetadata()})
	select {
	case t.in <- d:
	case <-t.done:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	return nil
}

// merge ends the sessions ws and starts one over the smallest window that
// covers them, with their accumulators.
func (s *session) merge(ws []*keyed) error {
	into := &keyed{Start: ws[0].GetStart(), End: ws[0].GetEnd(), Slot: ws[0].GetSlot(), Keys: ws[0].GetKeys()}
	var ended []*task
	for _, w := range ws {
		id := taskID(w)
		t := s.tasks[id]
		if t == nil {
			return udfserver.InvalidRequest(fmt.Sprintf("MERGE of session %s, which is not open", id))
		}
		delete(s.tasks, id)
		t.mu.Lock()
		t.merged = true
		t.mu.Unlock()
		close(t.in)
		ended = append(ended, t)
		if wire.Time(w.GetStart()).Before(wire.Time(into.Start)) {
			into.Start = w.GetStart()
		}
		if wire.Time(w.GetEnd()).After(wire.Time(into.End)) {
			into.End = w.GetEnd()
		}
	}
	var accs [][]byte
	for _, t := range ended {
		select {
		case <-t.done:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		var acc []byte
		if err := s.srv.Call(func() { acc = t.r.Accumulator(s.ctx) }); err != nil {
			return err
		}
		accs = append(accs, acc)
	}
	s.start(into, accs)
	return nil
}

// start starts the task of session w, its reducer first taking in accs.
func (s *session) start(w *keyed, accs [][]byte) *task {
	t := &task{r: s.c.Create(), keys: w.GetKeys(), in: make(chan Datum), done: make(chan struct{}), win: w}
	s.tasks[taskID(w)] = t
	s.g.Go(func() error {
		var res Messages
		err := s.srv.Call(func() {
			defer close(t.done)
			for _, acc := range accs {
				t.r.MergeAccumulator(s.ctx, acc)
			}
			res = t.r.SessionReduce(s.ctx, t.keys, t.in)
		})
		if err != nil {
			return err
		}
		t.mu.Lock()
		merged, win := t.merged, t.win
		t.mu.Unlock()
		if merged {
			return nil
		}
		for _, m := range res {
			r := &sessionreducev1.SessionReduceResponse_Result{Keys: m.Keys(), Value: m.Value(), Tags: m.Tags()}
			if md := m.UserMetadata(); md != nil {
				r.Metadata = metadata.ToProto(md)
			}
			if err := s.send(&response{Result: r, KeyedWindow: win}); err != nil {
				return err
			}
		}
		return s.send(&response{KeyedWindow: win, EOF: true})
	})
	return t
}

func (s *session) send(r *response) error {
	select {
	case s.out <- r:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// taskID identifies a session as servers do: start and end in
// milliseconds, and the keys.
func taskID(w *keyed) string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(wire.Time(w.GetStart()).UnixMilli(), 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(wire.Time(w.GetEnd()).UnixMilli(), 10))
	for _, k := range w.GetKeys() {
		b.WriteByte(':')
		b.WriteString(strconv.Quote(k))
	}
	return b.String()
}
