package udsconn_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udsconn"
	sourcev1 "github.com/sluiceflow/sluice/pkg/apis/proto/source/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait in these tests.
const wait = 10 * time.Second

// socketDir returns a short temporary directory: unix socket paths are limited.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "uc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// server is a user-defined source on a unix socket: a read of n records
// answers n records and the end of transmission, an ack answers success. It
// counts the streams opened and notes how each ended.
type server struct {
	sourcev1.UnimplementedSourceServer
	gs *grpc.Server

	mu    sync.Mutex
	reads int           // read streams opened
	acks  int           // ack streams opened
	ends  []string      // per stream that ended: "eof", or the error
	hold  chan struct{} // set at start
	got   chan struct{} // gets a value when a read request arrives
	// silent makes a read stream never answer, not even its handshake.
	silent bool
}

// startServer serves in dir, as a server process that (re)started would: its
// info file written, its socket listening. Stop stops it at once, like a crash.
// A read waits for hold, when not nil, before it answers.
func startServer(t *testing.T, dir string, hold chan struct{}) *server {
	t.Helper()
	lis, err := net.Listen("unix", filepath.Join(dir, serverinfo.SourceSocket))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{gs: grpc.NewServer(), hold: hold, got: make(chan struct{}, 1)}
	sourcev1.RegisterSourceServer(s.gs, s)
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.gs.Serve(lis)
	}()
	t.Cleanup(func() {
		s.gs.Stop()
		<-served
	})
	if err := serverinfo.Write(filepath.Join(dir, serverinfo.SourceInfoFile), serverinfo.Default(serverinfo.KindSource, "test")); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *server) IsReady(context.Context, *emptypb.Empty) (*sourcev1.ReadyResponse, error) {
	return &sourcev1.ReadyResponse{Ready: true}, nil
}

func (s *server) ended(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, io.EOF) {
		s.ends = append(s.ends, "eof")
		return nil
	}
	s.ends = append(s.ends, err.Error())
	return err
}

func (s *server) ReadFn(st sourcev1.Source_ReadFnServer) error {
	if _, err := st.Recv(); err != nil {
		return s.ended(err)
	}
	s.mu.Lock()
	silent := s.silent
	s.mu.Unlock()
	if silent {
		select {
		case s.got <- struct{}{}:
		default:
		}
		<-st.Context().Done()
		return s.ended(st.Context().Err())
	}
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	if err := st.Send(&sourcev1.ReadResponse{Handshake: &sourcev1.Handshake{Sot: true}}); err != nil {
		return s.ended(err)
	}
	for {
		req, err := st.Recv()
		if err != nil {
			return s.ended(err)
		}
		select {
		case s.got <- struct{}{}:
		default:
		}
		if s.hold != nil {
			select {
			case <-s.hold:
			case <-st.Context().Done():
				return s.ended(st.Context().Err())
			}
		}
		for i := range req.GetRequest().GetNumRecords() {
			off := &sourcev1.Offset{Offset: []byte{byte(i)}}
			if err := st.Send(&sourcev1.ReadResponse{Result: &sourcev1.ReadResponse_Result{Payload: []byte("x"), Offset: off}}); err != nil {
				return s.ended(err)
			}
		}
		if err := st.Send(&sourcev1.ReadResponse{Status: &sourcev1.ReadResponse_Status{Eot: true}}); err != nil {
			return s.ended(err)
		}
	}
}

func (s *server) AckFn(st sourcev1.Source_AckFnServer) error {
	if _, err := st.Recv(); err != nil {
		return s.ended(err)
	}
	s.mu.Lock()
	s.acks++
	s.mu.Unlock()
	if err := st.Send(&sourcev1.AckResponse{Handshake: &sourcev1.Handshake{Sot: true}}); err != nil {
		return s.ended(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			return s.ended(err)
		}
		if err := st.Send(&sourcev1.AckResponse{Result: &sourcev1.AckResponse_Result{Success: &emptypb.Empty{}}}); err != nil {
			return s.ended(err)
		}
	}
}

// PendingFn answers 7 once hold, when not nil, is closed.
func (s *server) PendingFn(ctx context.Context, _ *emptypb.Empty) (*sourcev1.PendingResponse, error) {
	select {
	case s.got <- struct{}{}:
	default:
	}
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &sourcev1.PendingResponse{Result: &sourcev1.PendingResponse_Result{Count: 7}}, nil
}

// streams returns how many read and ack streams were opened, and how they ended.
func (s *server) streams() (reads, acks int, ends []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads, s.acks, append([]string(nil), s.ends...)
}

// client is a source's connection with its read and ack streams, as
// sourceclient.Client has them.
type client struct {
	conn *udsconn.Conn
	rd   *udsconn.Stream[sourcev1.ReadRequest, sourcev1.ReadResponse]
	ak   *udsconn.Stream[sourcev1.AckRequest, sourcev1.AckResponse]
	logs *observer.ObservedLogs
}

func newClient(t *testing.T, dir string, opts ...udsconn.Option) *client {
	core, logs := observer.New(zapcore.InfoLevel)
	c := &client{logs: logs}
	c.conn = udsconn.New(dir, serverinfo.KindSource, func(ctx context.Context, cc *grpc.ClientConn) (bool, error) {
		resp, err := sourcev1.NewSourceClient(cc).IsReady(ctx, &emptypb.Empty{})
		return resp.GetReady(), err
	}, zap.New(core), opts...)
	c.rd = udsconn.NewStream[sourcev1.ReadRequest, sourcev1.ReadResponse](c.conn)
	c.rd.Name = "ReadFn"
	c.rd.Open = func(ctx context.Context, cc *grpc.ClientConn) (grpc.BidiStreamingClient[sourcev1.ReadRequest, sourcev1.ReadResponse], error) {
		return sourcev1.NewSourceClient(cc).ReadFn(ctx)
	}
	c.rd.Handshake = func() *sourcev1.ReadRequest { return &sourcev1.ReadRequest{Handshake: &sourcev1.Handshake{Sot: true}} }
	c.rd.Echoed = func(m *sourcev1.ReadResponse) bool { return m.GetHandshake().GetSot() }
	c.ak = udsconn.NewStream[sourcev1.AckRequest, sourcev1.AckResponse](c.conn)
	c.ak.Name = "AckFn"
	c.ak.Open = func(ctx context.Context, cc *grpc.ClientConn) (grpc.BidiStreamingClient[sourcev1.AckRequest, sourcev1.AckResponse], error) {
		return sourcev1.NewSourceClient(cc).AckFn(ctx)
	}
	c.ak.Handshake = func() *sourcev1.AckRequest { return &sourcev1.AckRequest{Handshake: &sourcev1.Handshake{Sot: true}} }
	c.ak.Echoed = func(m *sourcev1.AckResponse) bool { return m.GetHandshake().GetSot() }
	t.Cleanup(c.close)
	return c
}

func (c *client) close() {
	c.rd.Close()
	c.ak.Close()
	c.conn.Close()
}

// read reads n records and returns how many came.
func (c *client) read(ctx context.Context, n int) (int, error) {
	got := 0
	send := func(send func(*sourcev1.ReadRequest) error) error {
		return send(&sourcev1.ReadRequest{Request: &sourcev1.ReadRequest_Request{NumRecords: uint64(n), TimeoutInMs: 100}})
	}
	recv := func(r *sourcev1.ReadResponse) (bool, error) {
		if r.GetResult() != nil {
			got++
		}
		return r.GetStatus().GetEot(), nil
	}
	err := c.rd.Exchange(ctx, n, send, recv)
	return got, err
}

func (c *client) ack(ctx context.Context) error {
	send := func(send func(*sourcev1.AckRequest) error) error {
		return send(&sourcev1.AckRequest{Request: &sourcev1.AckRequest_Request{Offsets: []*sourcev1.Offset{{Offset: []byte{0}}}}})
	}
	return c.ak.Exchange(ctx, 1, send, func(*sourcev1.AckResponse) (bool, error) { return true, nil })
}

// count is how many log entries have the message msg.
func (c *client) count(msg string) int { return c.logs.FilterMessage(msg).Len() }

func (c *client) current(t *testing.T) *grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cc, _, err := c.conn.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func mustRead(t *testing.T, c *client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if got, err := c.read(ctx, n); err != nil || got != n {
		t.Fatalf("read = %d, %v; want %d", got, err, n)
	}
}

func mustAck(t *testing.T, c *client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.ack(ctx); err != nil {
		t.Fatalf("ack: %v", err)
	}
}

const (
	failed    = "UDF server failed; reconnecting"
	connected = "connected to UDF server"
)

// A source that restarts is picked up by both of its streams over one new
// connection: the stream that sees the failure drops the old connection, the
// other, opened on the old one, opens again on the new one.
func TestRestartedServer(t *testing.T) {
	for _, first := range []string{"read", "ack"} {
		t.Run(first+" sees the failure", func(t *testing.T) {
			dir := socketDir(t)
			a := startServer(t, dir, nil)
			c := newClient(t, dir)
			mustRead(t, c, 3)
			mustAck(t, c)
			old := c.current(t)
			a.gs.Stop()

			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			var err error
			if first == "read" {
				_, err = c.read(ctx, 1)
			} else {
				err = c.ack(ctx)
			}
			if err == nil || ctx.Err() != nil {
				t.Fatalf("%s on the stopped server = %v; want its failure", first, err)
			}
			if !errors.Is(err, udsconn.ErrServerFailed) || udsconn.Message(err) != udsconn.Message(errors.Unwrap(err)) {
				t.Fatalf("%s on the stopped server = %v (said %q); want it to match ErrServerFailed, said as the server's error",
					first, err, udsconn.Message(err))
			}
			if err := c.conn.Ready(); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, serverinfo.SourceInfoFile)) {
				t.Fatalf("Ready = %v; want it to name the info file", err)
			}

			b := startServer(t, dir, nil)
			// The other stream first: it was opened on the old connection.
			if first == "read" {
				mustAck(t, c)
				mustRead(t, c, 2)
			} else {
				mustRead(t, c, 2)
				mustAck(t, c)
			}
			mustRead(t, c, 1)
			mustAck(t, c)
			if cc := c.current(t); cc == old {
				t.Fatal("still on the old connection")
			}
			if reads, acks, _ := b.streams(); reads != 1 || acks != 1 {
				t.Errorf("the restarted server got %d read and %d ack streams; want one of each", reads, acks)
			}
			if n := c.count(failed); n != 1 {
				t.Errorf("%d warnings %q; want 1", n, failed)
			}
			if n := c.count(connected); n != 2 {
				t.Errorf("connected %d times; want twice", n)
			}
		})
	}
}

// Broken drops a connection once: a stream failing on a connection the Conn
// has already replaced leaves the new one alone.
func TestBrokenOnlyDropsItsConnection(t *testing.T) {
	dir := socketDir(t)
	startServer(t, dir, nil)
	c := newClient(t, dir)
	first := c.current(t)
	if !c.conn.Broken(first, errors.New("boom")) {
		t.Fatal("Broken(current) = false")
	}
	if c.conn.Broken(first, errors.New("again")) {
		t.Fatal("Broken of a dropped connection = true")
	}
	second := c.current(t)
	if second == first {
		t.Fatal("Get returned the dropped connection")
	}
	if c.conn.Broken(first, errors.New("late")) {
		t.Fatal("Broken(old) dropped the new connection")
	}
	if got := c.current(t); got != second {
		t.Fatal("the current connection changed after Broken(old)")
	}
	if err := c.conn.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	if n := c.count(failed); n != 1 {
		t.Errorf("%d warnings %q; want 1", n, failed)
	}
}

// A context that ends mid-exchange half-closes the stream: the server
// finishes the exchange, whose answers the caller gets, and ends the stream
// on the end of its input; the connection stays.
func TestContextEndHalfCloses(t *testing.T) {
	dir := socketDir(t)
	hold := make(chan struct{})
	s := startServer(t, dir, hold)
	c := newClient(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := c.read(ctx, 4)
		done <- result{n, err}
	}()
	<-s.got
	cancel()
	close(hold)
	r := <-done
	if r.err != nil || r.n != 4 {
		t.Fatalf("read = %d, %v; want the 4 records the server sent after the half-close", r.n, r.err)
	}
	runtest.WaitFor(t, "the server's stream to end", func() bool { _, _, ends := s.streams(); return len(ends) == 1 }, runtest.Within(wait))
	if _, _, ends := s.streams(); ends[0] != "eof" {
		t.Fatalf("the server's read stream ended with %q; want the end of its input", ends[0])
	}
	if err := c.conn.Ready(); err != nil {
		t.Fatalf("Ready = %v; a context that ends is no failure of the server", err)
	}
	if n := c.count(failed); n != 0 {
		t.Fatalf("%d warnings %q", n, failed)
	}
	mustRead(t, c, 1) // on a new stream, same connection
	if reads, _, _ := s.streams(); reads != 2 {
		t.Fatalf("%d read streams; want a new one after the half-closed one", reads)
	}
}

// A server that does not finish the exchange within the grace has the stream
// cancelled; the error is the context's, and the connection stays.
func TestContextEndCancelsASlowServer(t *testing.T) {
	dir := socketDir(t)
	s := startServer(t, dir, make(chan struct{})) // never released
	c := newClient(t, dir)
	c.rd.Grace = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.read(ctx, 1)
		done <- err
	}()
	<-s.got
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("read = %v; want context.Canceled", err)
	}
	if err := c.conn.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	if n := c.count(failed); n != 0 {
		t.Fatalf("%d warnings %q", n, failed)
	}
}

// Close half-closes the streams and waits for the server to end them before
// it closes the connection.
func TestCloseHalfCloses(t *testing.T) {
	dir := socketDir(t)
	s := startServer(t, dir, nil)
	c := newClient(t, dir)
	mustRead(t, c, 2)
	mustAck(t, c)
	c.close()
	if _, _, ends := s.streams(); len(ends) != 2 || ends[0] != "eof" || ends[1] != "eof" {
		t.Fatalf("the server's streams ended with %q; want the end of their input, both", ends)
	}
	if _, err := c.read(context.Background(), 1); !errors.Is(err, udsconn.ErrClosed) {
		t.Fatalf("read after Close = %v; want ErrClosed", err)
	}
	if n := c.count(failed); n != 0 {
		t.Fatalf("%d warnings %q", n, failed)
	}
}

// While it waits for the server-info file, the connection logs once which
// file, and Ready names it.
func TestWaitingNamesTheInfoFile(t *testing.T) {
	dir := socketDir(t)
	c := newClient(t, dir)
	info := filepath.Join(dir, serverinfo.SourceInfoFile)
	if c.conn.InfoFile() != info {
		t.Fatalf("InfoFile = %q; want %q", c.conn.InfoFile(), info)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := c.conn.Get(ctx)
		done <- err
	}()
	runtest.WaitFor(t, "Ready to say it waits", func() bool {
		err := c.conn.Ready()
		return err != nil && strings.Contains(err.Error(), "waiting for the server-info file "+info)
	}, runtest.Within(wait))
	runtest.WaitFor(t, "the log line", func() bool { return c.count("waiting for the UDF server's server-info file") == 1 }, runtest.Within(wait))
	if got := c.logs.FilterMessage("waiting for the UDF server's server-info file").All()[0].ContextMap()["file"]; got != info {
		t.Errorf("the log line names %v; want %s", got, info)
	}
	startServer(t, dir, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.conn.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	if n := c.count("waiting for the UDF server's server-info file"); n != 1 {
		t.Errorf("logged the wait %d times; want once", n)
	}
}

// A server-info file that is malformed or cannot be read ends the wait at
// once with an ErrIncompatible error that names the file and what is wrong:
// the server that wrote it will not write another.
func TestBadInfoFile(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"malformed", func(path string) error {
			return os.WriteFile(path, []byte("{protocol: uds}"+serverinfo.EndMarker), 0o644)
		},
			`: malformed server info: invalid character 'p' looking for beginning of object key string, in "{protocol: uds}"`},
		{"a directory", func(path string) error { return os.Mkdir(path, 0o755) }, " cannot be read: is a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := socketDir(t)
			info := filepath.Join(dir, serverinfo.SourceInfoFile)
			if err := tt.make(info); err != nil {
				t.Fatal(err)
			}
			c := newClient(t, dir)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			_, _, err := c.conn.Get(ctx)
			if !errors.Is(err, udsconn.ErrIncompatible) || ctx.Err() != nil {
				t.Fatalf("Get = %v; want ErrIncompatible at once", err)
			}
			if want := "incompatible UDF server: server-info file " + info + tt.want; err.Error() != want {
				t.Errorf("Get = %q;\nwant %q", err, want)
			}
		})
	}
}
