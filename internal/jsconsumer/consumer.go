package jsconsumer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

const (
	// DefaultAckWait is the ack wait of a consumer sluice creates without
	// one given: how long a message read and not acked (nor kept in
	// progress by its reader) waits before it is delivered again.
	DefaultAckWait = 60 * time.Second
	// MinAckWait is the shortest ack wait sluice accepts: a Consumer sends
	// in-progress acks every third of it.
	MinAckWait = 100 * time.Millisecond
)

// DecodeFunc turns a JetStream message a Consumer received into the
// messages it carries: it appends them to out, one or more (a frame), and
// returns out. They may alias msg's data and headers, which nothing writes
// to. keys is an arena for their keys, shared by the messages of one pull.
//
// An error (or no message) drops msg: the Consumer terminates it, so that
// the server does not deliver it again, and Read reports the error,
// matching [ErrDecode], next to the messages read.
type DecodeFunc func(msg *nats.Msg, out []isb.Message, keys *Keys) ([]isb.Message, error)

// Options says how a [Consumer] reads and acks.
type Options struct {
	// Decode turns each JetStream message into the messages it carries.
	// It is required.
	Decode DecodeFunc
	// ReadTimeout is the longest a Read waits for a message; below 1 ms
	// it is 1 ms.
	ReadTimeout time.Duration
	// AckWait is the consumer's ack wait, as the server has it: the
	// Consumer keeps held messages in progress every third of it. 0 is
	// [DefaultAckWait].
	AckWait time.Duration
	// FrameSize is the most messages one JetStream message carries, as its
	// writer packs them: a pull for room for n messages asks for
	// n/FrameSize JetStream messages (at least one), and what a Read has
	// no room for waits for the next one. 0 or 1: one each.
	FrameSize int
	// FetchAhead makes a Read whose pull the server answered in full (a
	// backlog), and whose buf is as large as any the Consumer was given,
	// ask at once for the next batch of that size, to be taken by the next
	// Read. Without it a Consumer never asks for more than a Read has room
	// for.
	FetchAhead bool
	// ConfirmAcks makes Ack wait until the server has applied every ack
	// (a double ack each), rather than until it has received them.
	ConfirmAcks bool
	// Logger receives what the Consumer cannot return: messages dropped,
	// in-progress acks that failed. nil logs nothing.
	Logger *zap.Logger
}

// Consumer reads a stream through one durable pull consumer, which it
// neither creates nor changes. It implements [isb.Reader], [isb.Nacker] and
// [isb.Closer] and is safe for concurrent use; see the package doc for how
// it reads, what it holds and what it promises.
type Consumer struct {
	nc          *nats.Conn
	next        string // the consumer's pull subject
	decode      DecodeFunc
	readTimeout time.Duration
	ackWait     time.Duration
	frameSize   int // the messages a pull expects per JetStream message
	fetchAhead  bool
	confirmAcks bool
	log         *zap.Logger

	// Pulls: each asks for messages with the reply subject <inbox>.<pull>,
	// and sub receives every message and status the server sends to them.
	inbox    string
	sub      *nats.Subscription
	pullMu   sync.Mutex // one Read pulls at a time; guards the fields below
	pulls    uint64
	open     *openPull
	leftover []isb.ReadMessage // messages read, not yet returned (held): the rest of frames, or of a batch fetched ahead
	scratch  []isb.Message     // reused to decode
	largest  int               // the largest buf a Read was given: only Reads that large fetch ahead
	answered bool              // the last pull settled brought all it asked for: the stream has a backlog

	mu          sync.Mutex
	heldBatches []*heldBatch // the batches with a message held (read, not yet acked or nacked)
	closed      bool

	stop      context.CancelFunc
	wg        sync.WaitGroup // the in-progress loop and the settling of pulls given up on
	closeOnce sync.Once
}

var (
	_ isb.Reader = (*Consumer)(nil)
	_ isb.Nacker = (*Consumer)(nil)
	_ isb.Closer = (*Consumer)(nil)
)

// New returns a Consumer of the durable pull consumer named consumer on
// stream, over nc, which stays the caller's: close the Consumer before it.
// It checks nothing with the server (a consumer that does not exist shows in
// Read's errors, matching [ErrGone]). Close the Consumer to stop its
// goroutine and hand back what it holds.
func New(nc *nats.Conn, stream, consumer string, opts Options) (*Consumer, error) {
	if opts.Decode == nil {
		return nil, errors.New("jsconsumer: Options.Decode is nil")
	}
	if opts.AckWait <= 0 {
		opts.AckWait = DefaultAckWait
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	ctx, stop := context.WithCancel(context.Background())
	c := &Consumer{
		nc:          nc,
		next:        "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + consumer,
		decode:      opts.Decode,
		readTimeout: max(opts.ReadTimeout, time.Millisecond),
		ackWait:     opts.AckWait,
		frameSize:   max(1, opts.FrameSize),
		fetchAhead:  opts.FetchAhead,
		confirmAcks: opts.ConfirmAcks,
		log:         opts.Logger,
		inbox:       nc.NewInbox(),
		stop:        stop,
	}
	var err error
	if c.sub, err = nc.SubscribeSync(c.inbox + ".*"); err != nil {
		stop()
		return nil, ConnErr(err)
	}
	// A pull never asks for more than a Read's buffer holds, and one more
	// is fetched ahead at most; the subscription must hold what they bring
	// without dropping any.
	if err := c.sub.SetPendingLimits(-1, -1); err != nil {
		stop()
		_ = c.sub.Unsubscribe()
		return nil, err
	}
	c.wg.Add(1)
	go c.inProgressLoop(ctx)
	return c, nil
}

// inProgressLoop sends an in-progress ack for every held message every third
// of AckWait until ctx is done. A batch fetched ahead and not yet taken by a
// Read is received first, and held.
func (c *Consumer) inProgressLoop(ctx context.Context) {
	defer c.wg.Done()
	t := time.NewTicker(max(c.ackWait/3, 10*time.Millisecond))
	defer t.Stop()
	var replies []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c.pullMu.TryLock() { // else a Read is taking it
			if c.open != nil && c.open.ahead {
				c.settle(context.Background(), nil, 0, nil, true)
			}
			c.pullMu.Unlock()
		}
		replies = c.heldReplies(replies[:0])
		failed := 0
		for _, reply := range replies {
			if err := c.nc.Publish(reply, progressBody); err != nil {
				failed++
			}
		}
		clear(replies)
		if failed > 0 {
			c.log.Warn("cannot send in-progress acks; the messages may be delivered again", zap.Int("messages", failed))
		}
	}
}

func (c *Consumer) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close stops the in-progress acks, waits for the Consumer's goroutines, and
// hands back every message read (or fetched ahead) and not yet acked, with
// the whole JetStream message it came in, so that it is delivered again at
// once rather than after AckWait: close a Consumer once its messages are
// acked or given up. It waits, a second at most, until the server has the
// hand-backs. Calls after Close fail with [ErrClosed]. Close is safe to call
// twice.
func (c *Consumer) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.stop()
		c.wg.Wait()
		c.pullMu.Lock() // no Read is pulling
		defer c.pullMu.Unlock()
		if c.open != nil {
			c.settle(context.Background(), nil, 0, nil, false) // within maxPullWait
		}
		// Whatever is still held will not be acked through this Consumer:
		// hand it back, so that it need not wait for AckWait.
		held := c.releaseAll()
		for _, h := range held {
			_ = c.nc.Publish(h.reply, h.body())
		}
		if len(held) > 0 {
			if err := c.nc.FlushTimeout(time.Second); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				c.log.Debug("cannot hand back the messages not acked; they are delivered again after AckWait", zap.Error(err))
			}
		}
		c.leftover = nil
		_ = c.sub.Unsubscribe()
	})
	return nil
}
