package accumulator

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	accumulatorv1 "github.com/sluiceflow/sluice/pkg/apis/proto/accumulator/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
)

// Option configures a Server.
type Option func(*udfserver.Config)

// WithSocketDir sets the directory of the socket and server-info file
// (default: SLUICE_UDS_DIR, or /var/run/numaflow when that is unset).
func WithSocketDir(dir string) Option { return func(c *udfserver.Config) { c.SocketDir = dir } }

// WithShutdownTimeout bounds a graceful stop (10s by default).
func WithShutdownTimeout(d time.Duration) Option {
	return func(c *udfserver.Config) { c.ShutdownTimeout = d }
}

// Server serves a Creator's accumulators.
type Server struct{ srv *udfserver.Server }

// NewServer returns a server for c, which must not be nil.
func NewServer(c Creator, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.KindAccumulator, cfg)
	accumulatorv1.RegisterAccumulatorServer(srv.Registrar(), &service{c: c, srv: srv})
	return &Server{srv: srv}
}

// Start serves until ctx ends or the process gets SIGTERM or SIGINT, and
// returns nil then; an error if the server could not start or an
// accumulator panicked (the server then shuts down).
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

type service struct {
	accumulatorv1.UnimplementedAccumulatorServer
	c   Creator
	srv *udfserver.Server
}

func (s *service) IsReady(context.Context, *emptypb.Empty) (*accumulatorv1.ReadyResponse, error) {
	return &accumulatorv1.ReadyResponse{Ready: s.srv.Ready()}, nil
}

// task is one key set's accumulator on a stream.
type task struct {
	keys []string
	in   chan Datum
	mu   sync.Mutex
	// closeW is the CLOSE's window, echoed in the EOF.
	closeW *accumulatorv1.KeyedWindow
}

// AccumulateFn runs an accumulator per key set: OPEN makes one, APPEND
// feeds it, CLOSE closes its input, and once it returns the EOF goes out
// with its window. Half-closing the stream closes every accumulator.
func (s *service) AccumulateFn(stream accumulatorv1.Accumulator_AccumulateFnServer) error {
	g, ctx := errgroup.WithContext(stream.Context())
	out := make(chan *accumulatorv1.AccumulatorResponse)
	var sendMu sync.Mutex
	send := func(r *accumulatorv1.AccumulatorResponse) error {
		select {
		case out <- r:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sent := make(chan error, 1)
	go func() {
		for r := range out {
			sendMu.Lock()
			err := stream.Send(r)
			sendMu.Unlock()
			if err != nil {
				sent <- err
				for range out {
				}
				return
			}
		}
		sent <- nil
	}()
	tasks := map[string]*task{}
	start := func(t *task) {
		g.Go(func() error {
			res := make(chan Message)
			done := make(chan struct{})
			latest := time.UnixMilli(-1)
			window := func() *accumulatorv1.KeyedWindow {
				return &accumulatorv1.KeyedWindow{Start: timestamppb.New(time.UnixMilli(0)), End: timestamppb.New(latest),
					Slot: "slot-0", Keys: t.keys}
			}
			var fwdErr error
			go func() {
				defer close(done)
				for m := range res {
					if m.watermark.After(latest) {
						latest = m.watermark
					}
					if fwdErr != nil {
						continue
					}
					fwdErr = send(&accumulatorv1.AccumulatorResponse{Payload: &accumulatorv1.Payload{Keys: m.keys,
						Value: m.value, EventTime: timestamppb.New(m.eventTime), Watermark: timestamppb.New(m.watermark),
						Id: m.id, Headers: m.headers}, Window: window(), Tags: m.tags})
				}
			}()
			err := s.srv.Call(func() { s.c.Create().Accumulate(ctx, t.in, res) })
			close(res)
			<-done
			if err != nil {
				return err
			}
			if fwdErr != nil {
				return fwdErr
			}
			t.mu.Lock()
			w := t.closeW
			t.mu.Unlock()
			if w == nil {
				w = window()
			}
			return send(&accumulatorv1.AccumulatorResponse{Window: w, EOF: true})
		})
	}
	feed := func(t *task, req *accumulatorv1.AccumulatorRequest) error {
		p := req.GetPayload()
		d := &datum{value: p.GetValue(), eventTime: p.GetEventTime().AsTime(), wm: p.GetWatermark().AsTime(),
			keys: p.GetKeys(), headers: p.GetHeaders(), id: p.GetId()}
		select {
		case t.in <- d:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var recvErr error
	for recvErr == nil {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			recvErr = err
			break
		}
		kw := req.GetOperation().GetKeyedWindow()
		key := strings.Join(kw.GetKeys(), "\x00")
		t := tasks[key]
		switch req.GetOperation().GetEvent() {
		case accumulatorv1.AccumulatorRequest_WindowOperation_OPEN, accumulatorv1.AccumulatorRequest_WindowOperation_APPEND:
			if t == nil {
				t = &task{keys: kw.GetKeys(), in: make(chan Datum, 500)}
				tasks[key] = t
				start(t)
			}
			recvErr = feed(t, req)
		case accumulatorv1.AccumulatorRequest_WindowOperation_CLOSE:
			if t != nil {
				t.mu.Lock()
				t.closeW = kw
				t.mu.Unlock()
				close(t.in)
				delete(tasks, key)
			}
		}
	}
	for k, t := range tasks {
		close(t.in)
		delete(tasks, k)
	}
	err := g.Wait()
	close(out)
	if sendErr := <-sent; err == nil {
		err = sendErr
	}
	if err == nil {
		err = recvErr
	}
	return err
}
