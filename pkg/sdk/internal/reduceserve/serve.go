package reduceserve

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/wire"
)

// Run is user code for one task: it reads the window's messages from in until
// it is closed, and hands each result to emit, which blocks until the result
// is on its way and fails once the stream has failed. Run may return before in
// is closed; the rest of the window's messages are then dropped.
type Run func(ctx context.Context, keys []string, in <-chan Datum, md Metadata, emit func(Message) error)

// Serve serves one ReduceFn stream: run is called through srv.Call once per
// window and keys, in a goroutine of its own, and the stream ends, after the
// client has half-closed it, with the results of every task and then one
// response with EOF set (and the window of the first task, if any). A panic in
// run fails the stream with srv's UDF_EXECUTION_ERROR.
func Serve(srv *udfserver.Server, stream reducev1.Reduce_ReduceFnServer, run Run) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	out := make(chan *reducev1.ReduceResponse)
	sent := make(chan error, 1)
	go func() { sent <- send(stream, out, cancel) }()

	g, gctx := errgroup.WithContext(ctx)
	s := &session{srv: srv, run: run, g: g, ctx: gctx, out: out, tasks: map[string]*task{}}
	recvErr := s.receive(udfserver.Receive(stream))
	if recvErr != nil {
		cancel()
	}
	s.closeAll()
	err := g.Wait()
	if err == nil {
		err = recvErr
	}
	if err == nil {
		select {
		case out <- &reducev1.ReduceResponse{Window: s.first, EOF: true}:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	close(out)
	if sendErr := <-sent; err == nil {
		err = sendErr
	}
	return err
}

// send sends the responses on out until it is closed. After a failure it
// cancels the stream's work and drops the rest, so that no task waits on it.
func send(stream reducev1.Reduce_ReduceFnServer, out <-chan *reducev1.ReduceResponse, cancel context.CancelFunc) error {
	var err error
	for resp := range out {
		if err != nil {
			continue
		}
		if err = stream.Send(resp); err != nil {
			cancel()
		}
	}
	return err
}

// session is the state of one stream.
type session struct {
	srv   *udfserver.Server
	run   Run
	g     *errgroup.Group
	ctx   context.Context
	out   chan<- *reducev1.ReduceResponse
	tasks map[string]*task
	first *reducev1.Window
}

// task is the user code of one window and keys.
type task struct {
	in   chan Datum
	done chan struct{} // closed when run has returned
}

// receive hands each request to its task until the client half-closes the
// stream (nil) or the stream fails.
func (s *session) receive(r *udfserver.Receiver[reducev1.ReduceRequest]) error {
	for {
		var req *reducev1.ReduceRequest
		select {
		case req = <-r.C():
		case <-s.ctx.Done():
			return s.ctx.Err() // a task failed; Serve returns its error
		}
		if req == nil {
			return r.Err()
		}
		t, err := s.taskOf(req)
		if err != nil {
			return err
		}
		select {
		case t.in <- datum(req.GetPayload()):
		case <-t.done:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}

// taskOf returns the task of the request's window and keys, starting it if
// needed.
func (s *session) taskOf(req *reducev1.ReduceRequest) (*task, error) {
	op := req.GetOperation()
	switch ev := op.GetEvent(); ev {
	case reducev1.ReduceRequest_WindowOperation_OPEN, reducev1.ReduceRequest_WindowOperation_APPEND:
	default:
		return nil, udfserver.InvalidRequest(fmt.Sprintf("window operation %s is not used with aligned windows", ev))
	}
	if n := len(op.GetWindows()); n != 1 {
		return nil, udfserver.InvalidRequest(fmt.Sprintf("a reduce request names %d windows, want 1", n))
	}
	win := op.GetWindows()[0]
	keys := req.GetPayload().GetKeys()
	id := taskID(win, keys)
	if t, ok := s.tasks[id]; ok {
		return t, nil
	}
	if s.first == nil {
		s.first = win
	}
	t := &task{in: make(chan Datum), done: make(chan struct{})}
	s.tasks[id] = t
	md := Metadata{IntervalWindow: IntervalWindow{Start: wire.Time(win.GetStart()), End: wire.Time(win.GetEnd())}}
	emit := func(m Message) error {
		select {
		case s.out <- result(win, m):
			return nil
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
	s.g.Go(func() error {
		defer close(t.done)
		return s.srv.Call(func() { s.run(s.ctx, keys, t.in, md, emit) })
	})
	return t, nil
}

// closeAll ends the window of every task.
func (s *session) closeAll() {
	for _, t := range s.tasks {
		close(t.in)
	}
	s.tasks = nil
}

// taskID identifies a window and keys: start and end in milliseconds, and
// the keys.
func taskID(w *reducev1.Window, keys []string) string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(wire.Time(w.GetStart()).UnixMilli(), 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(wire.Time(w.GetEnd()).UnixMilli(), 10))
	for _, k := range keys {
		b.WriteByte(':')
		b.WriteString(strconv.Quote(k))
	}
	return b.String()
}

func datum(p *reducev1.ReduceRequest_Payload) Datum {
	return wire.NewDatum(wire.DatumFields{
		Keys:      p.GetKeys(),
		Value:     p.GetValue(),
		EventTime: wire.Time(p.GetEventTime()),
		Watermark: wire.Time(p.GetWatermark()),
		Headers:   p.GetHeaders(),
		Metadata:  p.GetMetadata(),
	})
}

// result is the response that carries m, a result of window w.
func result(w *reducev1.Window, m Message) *reducev1.ReduceResponse {
	r := &reducev1.ReduceResponse_Result{Keys: m.keys, Value: m.value, Tags: m.tags}
	if m.metadata != nil {
		r.Metadata = metadata.ToProto(m.metadata)
	}
	return &reducev1.ReduceResponse{Result: r, Window: w}
}
