// Package udsconn is the runtime's connection to a user-defined function server
// on a unix socket: it waits for the server's info file, checks that the server
// speaks a protocol sluice understands, dials the socket, and polls IsReady until
// the server takes work. After a failure it connects again the same way, so that
// a server that crashed and restarted is picked up.
//
// # Waiting
//
// A connection never waits silently. While the server-info file is missing
// or incomplete, and while the socket it names is not ready, [Conn.Ready] says
// which of the two it waits for, and a wait that goes on is logged with a
// warning at 5s, 10s, 20s, 40s, 80s, then every minute. While the socket is
// not ready, the server-info file is read again every 2s: a file that changed
// (a server of another kind took the directory, or replaced a file that a
// server that is gone left behind), was removed or cannot be read any more
// is logged with a warning naming the file, the socket waited for and how
// long, and the connection starts again from the file.
//
// # Connections and streams
//
// A [Conn] holds at most one gRPC connection at a time. Each [Stream] on it
// remembers the connection it was opened on: when the Conn has moved on to a
// newer connection (another stream saw the server fail and reconnected), the
// stream opens again on the current one, and a stream that fails drops the
// connection only if it is still the one it failed on. So several streams on
// one server (a source's read and ack streams) reconnect once per failure of
// the server, never closing each other's new connection.
//
// # Deadlines
//
// Every call to a server has a deadline: the timeout of the [Calls] the
// connection is part of ([WithCalls]; limits.udfTimeout, DefaultTimeout by
// default), measured from when the call starts on a connected server
// (waiting for the server to connect is not part of it). A call still
// outstanding is logged with a warning naming the function, the call, its
// messages and how long it has been outstanding, at 5s (or at half the
// deadline, when that is sooner), then each time its age doubles, at least
// every minute. At its deadline the call is abandoned: its stream is
// cancelled and dropped, so that a late answer is never taken, the error
// (matching [ErrDeadline]) is logged and returned, and the connection is
// stuck: [Conn.Ready] says so until a call to the server succeeds. The
// connection itself is kept; the caller's retry opens a new stream on it.
//
// # Shutdown
//
// A context that ends is not a failure of the server: the stream in use is
// half-closed (CloseSend) and the server is given a short grace to finish the
// exchange in flight and end the stream, and the connection is kept. Close
// half-closes every stream the same way and waits, at most the grace, for the
// servers to end them before it closes the connection, so that servers see
// their streams end cleanly rather than cancelled.
package udsconn

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluiceflow/sluice/internal/protocodec"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/clock"
)

// IsReady asks a server whether it takes work; each service has its own.
type IsReady func(ctx context.Context, cc *grpc.ClientConn) (bool, error)

// ErrIncompatible is matched by errors for servers sluice cannot talk to: a
// server info that asks for what sluice does not speak, or a server-info file
// that is malformed or cannot be read.
var ErrIncompatible = errors.New("incompatible UDF server")

// ErrClosed is matched by the errors of a Conn or Stream used after Close.
var ErrClosed = errors.New("udsconn: closed")

// DefaultGrace is how long a server has, once its stream is half-closed, to
// finish the exchange in flight and end the stream before the stream is
// cancelled.
const DefaultGrace = time.Second

// reconnectBackoff paces gRPC's own attempts to reach a socket while the
// server is down, so that a restarted server is found within a second.
var reconnectBackoff = grpc.ConnectParams{Backoff: backoff.Config{
	BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}}

// Conn is a connection to one UDF server that reconnects after failures. It is
// safe for concurrent use.
type Conn struct {
	dir      string
	infoPath string
	socket   func(serverinfo.ServerInfo) string // the socket to dial, from the info
	isReady  IsReady
	log      *zap.Logger
	poll     time.Duration
	clock    clock.Clock
	kind     serverinfo.Kind
	calls    *Calls

	connecting sync.Mutex     // held while a Get connects, so that one connects at a time
	retiring   sync.WaitGroup // streams being half-closed; Close waits for them

	mu      sync.Mutex // guards the fields below; never held while waiting
	cc      *grpc.ClientConn
	info    serverinfo.ServerInfo
	waiting string // what a Get waits for now, "" when none does
	broken  error  // why the last connection was dropped, nil while connected
	stuck   error  // the last call abandoned at its deadline, until a call succeeds
	closed  bool
}

// Option configures a Conn.
type Option func(*Conn)

// WithClock sets the clock the connection waits on and measures its waits
// with (default clock.Real()).
func WithClock(c clock.Clock) Option { return func(conn *Conn) { conn.clock = c } }

// WithCalls makes the connection's calls part of calls, which gives them
// their deadline and tells the oldest of them (nil: the default). Without it
// a connection has calls of its own, with DefaultTimeout, timed on the
// connection's clock.
func WithCalls(calls *Calls) Option { return func(conn *Conn) { conn.calls = calls } }

// New returns a connection, not yet made, to the server of kind in dir. For the
// map kinds, the socket is chosen by the MAP_MODE of the mapper's info file.
func New(dir string, kind serverinfo.Kind, isReady IsReady, log *zap.Logger, opts ...Option) *Conn {
	if log == nil {
		log = zap.NewNop()
	}
	c := &Conn{dir: dir, infoPath: filepath.Join(dir, kind.InfoFile()), isReady: isReady,
		log: log.With(zap.String("udf", string(kind))), poll: 100 * time.Millisecond, clock: clock.Real(), kind: kind}
	c.socket = func(serverinfo.ServerInfo) string { return kind.Socket() }
	if kind.IsMap() {
		c.socket = func(info serverinfo.ServerInfo) string { return info.MapKind().Socket() }
	}
	for _, o := range opts {
		o(c)
	}
	if c.calls == nil {
		c.calls = NewCalls(DefaultTimeout, c.clock)
	}
	return c
}

// InfoFile is the path of the server-info file the connection waits for.
func (c *Conn) InfoFile() string { return c.infoPath }

// Get returns the connection and the server's info, connecting first if needed:
// it waits for the info file (logging once which file when it is not there
// yet), checks it (an [ErrIncompatible] error when sluice cannot talk to the
// server), dials, and waits until IsReady says yes, or until ctx ends. While
// it waits, it reads the info file again now and then, and starts again from
// the file when it changed (see the package doc, Waiting).
func (c *Conn) Get(ctx context.Context) (*grpc.ClientConn, serverinfo.ServerInfo, error) {
	if cc, info, ok, err := c.current(); ok {
		return cc, info, err
	}
	c.connecting.Lock()
	defer c.connecting.Unlock()
	if cc, info, ok, err := c.current(); ok { // another Get connected meanwhile
		return cc, info, err
	}
	defer c.setWaiting("")
	for {
		cc, info, err := c.connect(ctx)
		if errors.Is(err, errInfoChanged) {
			continue
		}
		if err != nil {
			return nil, serverinfo.ServerInfo{}, err
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			cc.Close()
			return nil, serverinfo.ServerInfo{}, ErrClosed
		}
		c.cc, c.info, c.broken = cc, info, nil
		c.mu.Unlock()
		c.calls.note(c.function())
		c.log.Info("connected to UDF server", zap.String("socket", c.socketPath(info)), zap.String("language", info.Language),
			zap.String("version", info.Version), zap.Any("metadata", info.Metadata))
		return cc, info, nil
	}
}

// connect makes a connection as the info file says, once: it waits for the
// file, checks it, dials the socket it names and waits until the server is
// ready. The error matches errInfoChanged when the file changed meanwhile.
func (c *Conn) connect(ctx context.Context) (*grpc.ClientConn, serverinfo.ServerInfo, error) {
	info, err := c.waitInfo(ctx)
	if err != nil {
		return nil, serverinfo.ServerInfo{}, err
	}
	if err := serverinfo.Check(info); err != nil {
		return nil, serverinfo.ServerInfo{}, fmt.Errorf("%w (%s): %v", ErrIncompatible, c.infoPath, err)
	}
	sock := c.socketPath(info)
	c.setWaiting("waiting for " + sock + " to be ready (server-info file " + c.infoPath + ")")
	cc, err := grpc.NewClient("unix://"+sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithConnectParams(reconnectBackoff),
		grpc.WithInitialWindowSize(serverinfo.StreamWindow), grpc.WithInitialConnWindowSize(serverinfo.ConnWindow),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(serverinfo.MaxMessageSize), grpc.MaxCallSendMsgSize(serverinfo.MaxMessageSize),
			grpc.ForceCodecV2(protocodec.Codec{})))
	if err != nil {
		return nil, serverinfo.ServerInfo{}, fmt.Errorf("dialing %s: %w", sock, err)
	}
	if err := c.waitReady(ctx, cc, info); err != nil {
		cc.Close()
		if errors.Is(err, errInfoChanged) {
			return nil, serverinfo.ServerInfo{}, err
		}
		return nil, serverinfo.ServerInfo{}, fmt.Errorf("waiting for %s to be ready: %w", sock, err)
	}
	return cc, info, nil
}

// socketPath is the socket that info names.
func (c *Conn) socketPath(info serverinfo.ServerInfo) string {
	return filepath.Join(c.dir, c.socket(info))
}

func (c *Conn) setWaiting(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiting = what
}

// current returns the live connection, or ok false when one must be made.
func (c *Conn) current() (*grpc.ClientConn, serverinfo.ServerInfo, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil, serverinfo.ServerInfo{}, true, ErrClosed
	case c.cc != nil:
		return c.cc, c.info, true, nil
	}
	return nil, serverinfo.ServerInfo{}, false, nil
}

// Broken drops the connection cc after err on it, logging the server's own
// message, and reports whether it did; the next Get connects again. A cc that
// is no longer the current connection (dropped already, or replaced by a
// newer one) is left alone: each failure of the server drops its connection
// once, however many streams see it.
func (c *Conn) Broken(cc *grpc.ClientConn, err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || cc == nil || c.cc != cc {
		return false
	}
	c.log.Warn("UDF server failed; reconnecting", zap.String("error", Message(err)))
	if r := failures.Load(); r != nil {
		(*r)(err)
	}
	c.cc.Close()
	c.cc, c.broken = nil, err
	return true
}

// Ready returns nil while connected and not stuck, or what the connection
// waits for and why it is not connected, or the call it is stuck on (see the
// package doc, Deadlines); the message names the server-info file.
func (c *Conn) Ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.cc != nil && c.stuck != nil:
		return fmt.Errorf("%s: stuck until the server answers a call: %w", c.infoPath, c.stuck)
	case c.cc != nil:
		return nil
	case c.closed:
		return fmt.Errorf("%s: %w", c.infoPath, ErrClosed)
	case c.waiting != "" && c.broken != nil:
		return fmt.Errorf("%s (the server failed: %s)", c.waiting, Message(c.broken))
	case c.waiting != "":
		return errors.New(c.waiting)
	case c.broken != nil:
		return fmt.Errorf("%s: %s", c.infoPath, Message(c.broken))
	}
	return fmt.Errorf("%s: not connected yet", c.infoPath)
}

// function is the function the connection's server serves: its kind, or
// for a map server the kind of map its info says.
func (c *Conn) function() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kind.IsMap() {
		return string(c.info.MapKind())
	}
	return string(c.kind)
}

// setStuck notes that a call was abandoned at its deadline with err.
func (c *Conn) setStuck(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stuck = err
}

// answered notes that a call succeeded: the connection is no longer stuck.
func (c *Conn) answered() {
	c.mu.Lock()
	was := c.stuck
	c.stuck = nil
	c.mu.Unlock()
	if was != nil {
		c.log.Info("the UDF server answers calls again")
	}
}

// Unary makes a unary call named name, of n messages, to the server,
// connecting first if needed: call gets the connection and a context that
// ends with ctx or at the call's deadline. It returns call's error, or the
// deadline's (matching ErrDeadline) when the call was abandoned.
func (c *Conn) Unary(ctx context.Context, name string, n int, call func(ctx context.Context, cc *grpc.ClientConn) error) error {
	cc, _, err := c.Get(ctx)
	if err != nil {
		return err
	}
	cl := c.Begin(name, n)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl.OnAbandon(cancel)
	return cl.End(call(cctx, cc))
}

// retire runs end in a goroutine of its own that Close waits for, and reports
// whether it did: not once the connection is closed.
func (c *Conn) retire(end func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.retiring.Add(1)
	go func() {
		defer c.retiring.Done()
		end()
	}()
	return true
}

// Close closes the connection for good, once the streams being half-closed
// have ended (at most their grace).
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.retiring.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cc == nil {
		return nil
	}
	err := c.cc.Close()
	c.cc = nil
	return err
}

// Message returns the text of an error from a UDF server: the gRPC status's own
// message when there is one.
func Message(err error) string {
	if err == nil {
		return ""
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String() + ": " + s.Message()
	}
	return err.Error()
}

// Wrap returns err, said as what, a colon and Message(err), and matching
// what err matches (ErrDeadline, ErrProtocol, a gRPC status); nil when err
// is nil.
func Wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return &wrapped{what: what, err: err}
}

type wrapped struct {
	what string
	err  error
}

func (w *wrapped) Error() string { return w.what + ": " + Message(w.err) }
func (w *wrapped) Unwrap() error { return w.err }

// failures is the reporter ReportFailures set.
var failures atomic.Pointer[func(error)]

// ReportFailures makes every connection hand report the error a UDF server
// failed with, each time one is dropped for it (nil: none). The numa
// container of a Numaflow pod records them for the monitor sidecar. report
// is called with a connection's lock held and must not block.
func ReportFailures(report func(error)) {
	if report == nil {
		failures.Store(nil)
		return
	}
	failures.Store(&report)
}
