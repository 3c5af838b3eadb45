package udsconn

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// DefaultTimeout is how long a call to a UDF server may go unanswered before
// it is abandoned when no timeout is set: the default of limits.udfTimeout.
const DefaultTimeout = 60 * time.Second

// firstCallLog is when a call still outstanding is logged first, or at half
// its deadline when that comes sooner; after that it is logged each time its
// age doubles, at least every maxLogGap.
const firstCallLog = 5 * time.Second

// ErrDeadline is matched by the error of a call abandoned because the server
// did not answer it within its deadline.
var ErrDeadline = errors.New("no answer within the deadline")

// Calls keeps the calls outstanding to the UDF servers of one vertex: it
// gives each call its deadline, logs a call that goes on, and tells the
// oldest call of each function. The connections of a vertex share one, given
// with [WithCalls]. It is safe for concurrent use.
type Calls struct {
	timeout time.Duration
	clock   clock.Clock

	mu    sync.Mutex
	open  map[*Call]struct{}
	funcs []string // the functions called or connected to, in the order first seen
}

// NewCalls returns the calls of a vertex, each of which may go unanswered
// for timeout (DefaultTimeout when 0 or less) before it is abandoned, timed
// on clk (clock.Real() when nil).
func NewCalls(timeout time.Duration, clk clock.Clock) *Calls {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if clk == nil {
		clk = clock.Real()
	}
	return &Calls{timeout: timeout, clock: clk, open: map[*Call]struct{}{}}
}

// Timeout is how long a call may go unanswered before it is abandoned.
func (c *Calls) Timeout() time.Duration { return c.timeout }

// note adds function to the functions seen.
func (c *Calls) note(function string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteLocked(function)
}

func (c *Calls) noteLocked(function string) {
	if !slices.Contains(c.funcs, function) {
		c.funcs = append(c.funcs, function)
	}
}

// Functions returns the functions that were called, or whose server was
// connected to, in the order first seen: map, batchmap or mapstream (as the
// map server's info says), sourcetransformer, source, sink, fb-sink,
// ons-sink, reduce, reducestream, sessionreducer, accumulator, sideinput.
func (c *Calls) Functions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.funcs)
}

// Outstanding is the oldest call outstanding to one function.
type Outstanding struct {
	// Function is the function called (see [Calls.Functions]), Call the
	// call (its RPC, such as MapFn, ReadFn or AckFn, and for the long-lived
	// streams of reduce functions what it waits for) and Messages the
	// messages it carries.
	Function string
	Call     string
	Messages int
	// Age is how long the call has been outstanding, and Deadline how long
	// it may be before it is abandoned.
	Age, Deadline time.Duration
	// Calls is how many calls to the function are outstanding, this one
	// among them.
	Calls int
}

// Oldest returns the oldest call outstanding to each function that has one,
// in the order of Functions.
func (c *Calls) Oldest() []Outstanding {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	by := map[string]*Outstanding{}
	for cl := range c.open {
		age := now.Sub(cl.start)
		o := by[cl.function]
		if o == nil {
			o = &Outstanding{Function: cl.function}
			by[cl.function] = o
		}
		o.Calls++
		if o.Calls == 1 || age > o.Age {
			o.Call, o.Messages, o.Age, o.Deadline = cl.name, cl.n, age, cl.deadline
		}
	}
	out := make([]Outstanding, 0, len(by))
	for _, f := range c.funcs {
		if o := by[f]; o != nil {
			out = append(out, *o)
		}
	}
	return out
}

// Call is one call outstanding to a connection's server, from [Conn.Begin]
// to [Call.End]. Past its deadline it is abandoned: the functions given to
// OnAbandon run, the connection is stuck (its Ready says so) until a call
// to the server succeeds, and End returns an error matching [ErrDeadline].
// It is safe for concurrent use.
type Call struct {
	conn     *Conn
	calls    *Calls
	function string
	name     string
	n        int
	start    time.Time
	deadline time.Duration
	extra    time.Duration
	sendOnly bool // its success is no answer of the server

	abandoned atomic.Bool

	mu        sync.Mutex
	timer     clock.Timer
	nextLog   time.Duration // the age at which the call is logged next
	ended     bool
	onAbandon []func()
	err       error // why it was abandoned
}

// Begin starts a call named name, carrying n messages, to c's server, and
// arms its deadline: the Calls' timeout. The caller ends it with End.
func (c *Conn) Begin(name string, n int) *Call { return c.begin(name, n, 0) }

// BeginSend is Begin for a call that only hands requests to the server (a
// Send on a long-lived stream, which blocks only while the server reads
// nothing): its success is no answer of the server, and does not end the
// connection's being stuck.
func (c *Conn) BeginSend(name string, n int) *Call {
	cl := c.begin(name, n, 0)
	cl.sendOnly = true
	return cl
}

// begin is Begin with extra time, which the call may take by design, added
// to its deadline and to when it is first logged.
func (c *Conn) begin(name string, n int, extra time.Duration) *Call {
	calls := c.calls
	cl := &Call{conn: c, calls: calls, function: c.function(), name: name, n: n, start: calls.clock.Now(),
		deadline: calls.timeout + extra, extra: extra}
	cl.nextLog = extra + min(firstCallLog, calls.timeout/2)
	calls.mu.Lock()
	calls.open[cl] = struct{}{}
	calls.noteLocked(cl.function)
	calls.mu.Unlock()
	cl.mu.Lock()
	cl.arm()
	cl.mu.Unlock()
	return cl
}

// arm sets the timer for the next log or the deadline, whichever comes
// first; cl.mu is held.
func (cl *Call) arm() {
	at := min(cl.nextLog, cl.deadline)
	cl.timer = cl.calls.clock.AfterFunc(at-cl.calls.clock.Now().Sub(cl.start), cl.fire)
}

// fire logs the call, or abandons it at its deadline.
func (cl *Call) fire() {
	cl.mu.Lock()
	if cl.ended {
		cl.mu.Unlock()
		return
	}
	age := cl.calls.clock.Now().Sub(cl.start)
	if age < cl.deadline {
		cl.nextLog = age + min(age, maxLogGap)
		cl.arm()
		cl.mu.Unlock()
		cl.conn.log.Warn("a call to the UDF server is outstanding", cl.fields(age)...)
		return
	}
	cl.err = fmt.Errorf("%s call %s of %d messages: %w of %s", cl.function, cl.name, cl.n, ErrDeadline, cl.deadlineText())
	cl.abandoned.Store(true)
	fs := cl.onAbandon
	cl.onAbandon = nil
	cl.mu.Unlock()
	cl.conn.setStuck(cl.err)
	cl.conn.log.Error("a call to the UDF server got no answer within its deadline: abandoned, to be retried", cl.fields(age)...)
	for _, f := range fs {
		f()
	}
}

// deadlineText says what the deadline is made of.
func (cl *Call) deadlineText() string {
	if cl.extra > 0 {
		return fmt.Sprintf("%v (%v the call may take + limits.udfTimeout %v)", cl.deadline, cl.extra, cl.calls.timeout)
	}
	return fmt.Sprintf("%v (limits.udfTimeout)", cl.deadline)
}

func (cl *Call) fields(age time.Duration) []zap.Field {
	return []zap.Field{zap.String("function", cl.function), zap.String("call", cl.name), zap.Int("messages", cl.n),
		zap.Duration("outstanding", age), zap.Duration("deadline", cl.deadline)}
}

// OnAbandon makes f run when the call is abandoned at its deadline, or at
// once if it has been; f must not block. Once the call has ended f never
// runs.
func (cl *Call) OnAbandon(f func()) {
	cl.mu.Lock()
	if cl.abandoned.Load() {
		cl.mu.Unlock()
		f()
		return
	}
	if !cl.ended {
		cl.onAbandon = append(cl.onAbandon, f)
	}
	cl.mu.Unlock()
}

// Abandoned reports whether the call was abandoned at its deadline.
func (cl *Call) Abandoned() bool { return cl.abandoned.Load() }

// Err returns, once the call is abandoned, why (an error matching
// ErrDeadline that names the function, the call and the deadline); nil
// before.
func (cl *Call) Err() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.err
}

// End ends the call, err being its outcome, and returns err; but for a call
// abandoned at its deadline that failed, it returns an error matching
// ErrDeadline: err when it does, else the deadline's. A call that succeeded
// (err nil) ends the connection's being stuck, unless it was begun with
// BeginSend. End is safe to call twice; the second call changes nothing.
func (cl *Call) End(err error) error {
	cl.mu.Lock()
	already := cl.ended
	cl.ended = true
	cl.onAbandon = nil
	if cl.timer != nil {
		cl.timer.Stop()
	}
	abandoned := cl.err
	cl.mu.Unlock()
	if !already {
		cl.calls.mu.Lock()
		delete(cl.calls.open, cl)
		cl.calls.mu.Unlock()
		if err == nil && !cl.sendOnly {
			cl.conn.answered()
		}
	}
	if err != nil && abandoned != nil && !errors.Is(err, ErrDeadline) {
		return abandoned
	}
	return err
}
