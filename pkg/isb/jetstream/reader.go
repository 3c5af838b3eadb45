package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// Reader reads one buffer through its durable consumer. It implements
// [isb.Reader], [isb.Naker] and [isb.Closer] and is safe for concurrent use.
// Readers of the same buffer, in one process or many, share the consumer:
// each message goes to one of them.
//
// Read returns at most len(buf) messages. It first takes what is there
// without waiting; when that is nothing it waits up to the read timeout (or
// until ctx is done) for one message, then takes what else is there without
// waiting. At low load a message is returned as soon as it arrives; at high
// load a Read is one round trip, or none: a Read whose pull the server
// answered in full (a backlog), with a buf as large as any the Reader was
// given, asks at once for the next batch of that size (it fetches ahead),
// which is on its way while the caller processes this one. So a caller whose reads are trimmed, as by
// a rate limiter's grant, takes from the buffer at most one batch more than
// it was granted, and a caller reading full batches holds at most one batch
// ahead. The wait is made of pull requests of at most a second: when ctx is
// done during one, Read returns at once, and a message the server still
// delivers to that request is naked (handed back) rather than left until
// AckWait.
//
// Until a message read (or fetched ahead) is acked or naked, the Reader
// tells the server every third of the consumer's AckWait that it is still
// in progress, so that a slow batch is not delivered again to another
// reader. A message neither acked nor naked when the Reader is closed is
// handed back; if its process dies, it is delivered again once AckWait has
// passed.
type Reader struct {
	name        string
	cons        jetstream.Consumer
	nc          *nats.Conn
	conn        *Conn
	readTimeout time.Duration
	ackWait     time.Duration
	log         *zap.Logger
	next        string // the consumer's pull subject

	// Pulls: each asks for messages with the reply subject <inbox>.<pull>,
	// and sub receives every message and status the server sends to them.
	inbox     string
	sub       *nats.Subscription
	pullMu    sync.Mutex // one Read pulls at a time; guards pulls, open, leftover, frame and largest
	pulls     uint64
	open      *openPull
	frameSize int               // the frames expected: a pull asks for room/frameSize of them
	leftover  []isb.ReadMessage // messages read, not yet returned (held): the rest of frames, or of a batch fetched ahead
	frame     []isb.Message     // reused to decode a frame
	largest   int               // the largest buf a Read was given: only Reads that large fetch ahead
	answered  bool              // the last pull settled brought all it asked for: the buffer has a backlog

	mu     sync.Mutex
	live   []*heldBatch // the batches with a message held (read, not yet acked or naked)
	closed bool

	stop      context.CancelFunc
	wg        sync.WaitGroup // the in-progress loop
	closeOnce sync.Once
}

// heldMsg is a JetStream message read: a message, whose isb.ReadMessage has
// it as Handle, or a frame, whose messages each have a *member. Its ack or
// nak goes to its reply subject once every message in it is acked or naked.
type heldMsg struct {
	reply string
	batch *heldBatch
	// Guarded by Reader.mu:
	held  bool          // read, and not yet acked nor naked
	left  int           // its messages not yet acked nor naked
	naked bool          // one of them was naked: nak it all
	delay time.Duration // the longest delay they were naked with
}

// heldBatch is the heldMsgs of one pull, allocated together. It is in
// Reader.live while one of them is held.
type heldBatch struct {
	msgs []heldMsg // never grows beyond its capacity: handles point into it
	// Guarded by Reader.mu:
	held int // how many of msgs are held
	pos  int // its index in Reader.live, while held > 0
}

// member is the Handle of a message read from a frame.
type member struct {
	h    *heldMsg
	done bool // acked or naked (guarded by Reader.mu)
}

var (
	_ isb.Reader = (*Reader)(nil)
	_ isb.Naker  = (*Reader)(nil)
	_ isb.Closer = (*Reader)(nil)
)

// maxPullWait bounds one pull request of a waiting Read: a Read the caller
// gives up on still holds a pull open on the server for up to this long.
const maxPullWait = time.Second

// What acks, naks, in-progress acks and terminations send to a message's
// reply subject.
var (
	ackBody      = []byte("+ACK")
	nakBody      = []byte("-NAK")
	progressBody = []byte("+WPI")
	termBody     = []byte("+TERM")
)

// Reader returns a reader of the buffer name (created with CreateBuffer)
// whose reads wait at most readTimeout (at least 1 ms) for a message. It
// fails with an error matching [ErrBufferNotFound] when the buffer does not
// exist. Close the Reader to stop its in-progress goroutine.
func (c *Conn) Reader(name string, readTimeout time.Duration) (*Reader, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	cons, err := c.js.Consumer(ctx, name, name)
	if err != nil {
		return nil, bufferErr("read", name, err)
	}
	ackWait := cons.CachedInfo().Config.AckWait
	if ackWait <= 0 {
		ackWait = DefaultAckWait
	}
	ictx, stop := context.WithCancel(context.Background())
	r := &Reader{
		name:        name,
		cons:        cons,
		nc:          c.nc,
		conn:        c,
		readTimeout: max(readTimeout, time.Millisecond),
		ackWait:     ackWait,
		log:         c.log.With(zap.String("buffer", name)),
		next:        "$JS.API.CONSUMER.MSG.NEXT." + name + "." + name,
		frameSize:   max(1, c.cfg.FrameSize),
		inbox:       c.nc.NewInbox(),
		stop:        stop,
	}
	if r.sub, err = c.nc.SubscribeSync(r.inbox + ".*"); err != nil {
		stop()
		return nil, bufferErr("read", name, err)
	}
	// A pull never asks for more than a Read's buffer holds, and one more
	// is fetched ahead at most; the subscription must hold what they bring
	// without dropping any.
	if err := r.sub.SetPendingLimits(-1, -1); err != nil {
		stop()
		r.sub.Unsubscribe()
		return nil, bufferErr("read", name, err)
	}
	r.wg.Add(1)
	go r.inProgressLoop(ictx)
	return r, nil
}

// Read reads at most len(buf) messages into buf; see [Reader]. Each message's
// Handle is the Reader's own; its Value, and its strings (ID, keys, headers),
// alias the message's data, which nothing writes to. A message whose body
// cannot be decoded is terminated (the server drops it) and reported in an
// error matching [ErrDecode], next to the messages read.
func (r *Reader) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if r.isClosed() {
		return 0, fmt.Errorf("jetstream: read buffer %s: %w", r.name, ErrClosed)
	}
	if len(buf) == 0 {
		return 0, nil
	}
	r.pullMu.Lock()
	defer func() {
		if r.open != nil && !r.open.ahead {
			r.settleLater()
		}
		r.pullMu.Unlock()
	}()
	fullSize := len(buf) >= r.largest
	r.largest = max(r.largest, len(buf))
	n := copy(buf, r.leftover)
	clear(r.leftover[copy(r.leftover, r.leftover[n:]):])
	r.leftover = r.leftover[:len(r.leftover)-n]
	if n == len(buf) {
		return n, nil
	}
	m, err := r.pull(ctx, buf[n:], 0)
	n += m
	if n == 0 && err == nil {
		// Nothing there: wait for one message, for the read timeout at
		// most, in pulls of at most maxPullWait; then take what else is
		// there.
		deadline := time.Now().Add(r.readTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		for n == 0 {
			wait := min(time.Until(deadline), maxPullWait)
			if wait <= 0 || ctx.Err() != nil {
				return 0, nil
			}
			if n, err = r.pull(ctx, buf[:1], wait); err != nil {
				return n, err
			}
		}
		m, err = r.pull(ctx, buf[n:], 0)
		n += m
	}
	if r.answered && err == nil && fullSize && r.open == nil {
		r.fetchAhead(len(buf))
	}
	return n, err
}

// pull asks the server for up to len(buf) messages, without waiting (wait 0)
// or waiting up to wait for them, and puts them into buf. It returns once the
// server has answered the pull in full, or ctx is done; a pull left open then
// is settled at the start of the next.
//
// Pulls are one at a time: the server's messages carry no mark of the pull
// they answer, so every message received belongs to the one open pull. A
// pull is over once it has its batch, or at the status the server sends to
// its own reply subject (no more messages, or its expiry). A batch fetched
// ahead is such an open pull, taken here first.
func (r *Reader) pull(ctx context.Context, buf []isb.ReadMessage, wait time.Duration) (int, error) {
	n := 0
	var errs []error
	if r.open != nil {
		// A pull given up on, or fetched ahead, may still deliver: what it
		// brings is read here, or kept for the next Read when buf is full.
		n, errs = r.settle(context.Background(), buf, n, errs, true)
	}
	if n == len(buf) {
		return n, errors.Join(errs...)
	}
	p, err := r.request(len(buf)-n, wait)
	if err != nil {
		return n, errors.Join(append(errs, err)...)
	}
	r.open = p
	n, errs = r.settle(ctx, buf, n, errs, true)
	return n, errors.Join(errs...)
}

// request sends a pull request for room messages (frames: as many as the
// room holds when full, at least one), without waiting (wait 0) or waiting
// up to wait for them, and returns it, to be settled.
func (r *Reader) request(room int, wait time.Duration) (*openPull, error) {
	r.pulls++
	batch := room
	if r.frameSize > 1 {
		// Frames: the rest of the last one waits in leftover for the next
		// Read.
		batch = max(1, batch/r.frameSize)
	}
	p := &openPull{reply: r.inbox + "." + strconv.FormatUint(r.pulls, 10), left: batch, waits: wait > 0,
		until: time.Now().Add(wait + time.Second), // the server answers within wait
		held:  &heldBatch{msgs: make([]heldMsg, 0, batch)}, keys: keyArena{hint: room}}
	req := `{"batch":` + strconv.Itoa(p.left)
	if wait > 0 {
		req += `,"expires":` + strconv.FormatInt(int64(wait), 10)
	} else {
		req += `,"no_wait":true`
	}
	if err := r.nc.PublishRequest(r.next, p.reply, []byte(req+"}")); err != nil {
		return nil, r.readErr(connErr(err))
	}
	return p, nil
}

// fetchAhead asks for the next batch of size messages, to be taken by the
// next Read (or, when that is slow to come, by the in-progress loop). A
// request that cannot be sent is left to the next Read to make. r.pullMu is
// held and no pull is open.
func (r *Reader) fetchAhead(size int) {
	p, err := r.request(size, 0)
	if err != nil {
		return
	}
	p.ahead = true
	r.open = p
}

// settleLater settles, in the background, the pull a Read gave up on, handing
// back what it still delivers, so that those messages need not wait for
// AckWait. r.pullMu is held; the goroutine waits for it.
func (r *Reader) settleLater() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed { // Close waits for r.wg: add to it no more
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.pullMu.Lock()
		defer r.pullMu.Unlock()
		if r.open != nil && !r.open.ahead {
			r.settle(context.Background(), nil, 0, nil, false)
		}
	}()
}

// openPull is a pull the server may still be answering.
type openPull struct {
	reply string
	waits bool      // it has an expiry: the server may hold it open
	ahead bool      // fetched ahead: kept open for the next Read
	left  int       // messages it may still bring
	until time.Time // when it is over at the latest
	held  *heldBatch
	keys  keyArena // the keys of its messages
}

// settle receives the answers to the open pull, putting its messages into
// buf from n on, until the pull is over or ctx is done. Messages beyond buf
// are kept in leftover (keep) or handed back.
func (r *Reader) settle(ctx context.Context, buf []isb.ReadMessage, n int, errs []error, keep bool) (int, []error) {
	p := r.open
	if p.ahead {
		// Asked for without waiting: its answer came at once, or is
		// coming now.
		p.until = time.Now().Add(time.Second)
	}
	for p.left > 0 {
		d := time.Until(p.until)
		if d <= 0 {
			break
		}
		var msg *nats.Msg
		var err error
		if !p.waits || ctx.Done() == nil {
			// The server answers a pull without wait at once: ctx need not
			// be watched.
			msg, err = r.sub.NextMsg(d)
		} else {
			mctx, cancel := context.WithTimeout(ctx, d)
			msg, err = r.sub.NextMsgWithContext(mctx)
			cancel()
		}
		if err != nil {
			if ctx.Err() != nil {
				return n, errs // still open: settled by the next pull
			}
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
				errs = append(errs, r.readErr(connErr(err)))
			}
			break
		}
		if len(msg.Data) == 0 && len(msg.Header) > 0 {
			if status := msg.Header.Get("Status"); status != "" {
				if msg.Subject != p.reply || status == "100" {
					continue // the end of an earlier pull, or a heartbeat
				}
				if err := r.statusErr(status, msg.Header.Get("Description")); err != nil {
					errs = append(errs, err)
				}
				break // the pull is over
			}
		}
		p.left--
		if n == len(buf) && !keep {
			r.late(msg)
			continue
		}
		var err2 error
		if n, err2 = r.put(msg, p, buf, n); err2 != nil {
			errs = append(errs, err2)
		}
	}
	r.open = nil
	r.answered = p.left == 0
	return n, errs
}

// statusErr is what the status that ends a pull means: nothing for no more
// messages (404) or its expiry (408), the connection going down for the
// server shutting down, else a missing buffer.
func (r *Reader) statusErr(status, description string) error {
	switch {
	case status == "404" || status == "408":
		return nil
	case status == "409" && description == "Server Shutdown":
		return fmt.Errorf("jetstream: read buffer %s: %w: %s %s", r.name, ErrNotConnected, status, description)
	}
	return fmt.Errorf("jetstream: read buffer %s: %w: %s %s", r.name, ErrBufferNotFound, status, description)
}

// late hands back a message delivered to a pull that is over.
func (r *Reader) late(msg *nats.Msg) {
	if strings.HasPrefix(msg.Reply, "$JS.ACK.") {
		_ = r.nc.Publish(msg.Reply, nakBody)
	}
}

// put decodes msg, delivered to pull p, into buf[n] and holds it, returning
// the new count; a frame's messages fill buf and the rest go to leftover. A
// message that cannot be decoded is terminated instead.
func (r *Reader) put(msg *nats.Msg, p *openPull, buf []isb.ReadMessage, n int) (int, error) {
	var err error
	frame := r.frame[:0]
	c := msg.Header.Get(frameHeader)
	isFrame := c != ""
	if isFrame {
		count, cerr := strconv.Atoi(c)
		if cerr != nil || count < 1 || count > MaxFrameSize {
			err = fmt.Errorf("frame of %q messages", c)
		} else {
			frame, err = decodeFrame(msg.Data, count, frame, &p.keys)
		}
	} else {
		frame = append(frame, isb.Message{})
		err = decodeMessage(msg.Data, &frame[0], &p.keys)
	}
	if err != nil {
		clear(frame)
		r.frame = frame[:0]
		seq := streamSeq(msg.Reply)
		err = fmt.Errorf("%w: buffer %s, stream sequence %d: %w", ErrDecode, r.name, seq, err)
		r.log.Error("dropping a message that cannot be decoded", zap.Error(err))
		if termErr := r.nc.Publish(msg.Reply, termBody); termErr != nil {
			r.log.Warn("cannot terminate the undecodable message", zap.Uint64("seq", seq), zap.Error(termErr))
		}
		return n, err
	}
	if len(p.held.msgs) == cap(p.held.msgs) {
		// More than the pull asked for, which the server never sends.
		p.held = &heldBatch{msgs: make([]heldMsg, 0, 8)}
	}
	r.mu.Lock() // the in-progress loop reads the batch
	p.held.msgs = append(p.held.msgs, heldMsg{reply: msg.Reply, batch: p.held, left: len(frame)})
	h := &p.held.msgs[len(p.held.msgs)-1]
	r.hold(h)
	r.mu.Unlock()
	if !isFrame {
		n = r.give(buf, n, isb.ReadMessage{Message: frame[0], Handle: h})
	} else {
		members := make([]member, len(frame))
		for i := range frame {
			members[i].h = h
			n = r.give(buf, n, isb.ReadMessage{Message: frame[i], Handle: &members[i]})
		}
	}
	clear(frame)
	r.frame = frame[:0]
	return n, nil
}

// give puts rm into buf[n] when there is room, else into leftover, and
// returns the new count.
func (r *Reader) give(buf []isb.ReadMessage, n int, rm isb.ReadMessage) int {
	if n < len(buf) {
		buf[n] = rm
		return n + 1
	}
	r.leftover = append(r.leftover, rm)
	return n
}

// hold marks h held. r.mu is held.
func (r *Reader) hold(h *heldMsg) {
	h.held = true
	b := h.batch
	if b.held == 0 {
		b.pos = len(r.live)
		r.live = append(r.live, b)
	}
	b.held++
}

// release marks h no longer held. r.mu is held.
func (r *Reader) release(h *heldMsg) {
	h.held = false
	b := h.batch
	if b.held--; b.held > 0 {
		return
	}
	last := len(r.live) - 1
	r.live[b.pos] = r.live[last]
	r.live[b.pos].pos = b.pos
	r.live[last] = nil
	r.live = r.live[:last]
}

// streamSeq is the stream sequence in a message's ack subject:
// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>.
func streamSeq(reply string) uint64 {
	tokens := strings.Split(reply, ".")
	if len(tokens) < 9 {
		return 0
	}
	seq, _ := strconv.ParseUint(tokens[len(tokens)-4], 10, 64)
	return seq
}

func (r *Reader) readErr(err error) error {
	return bufferErr("read", r.name, err)
}

// Ack acks msgs and waits until the server has received the acks, so that
// nothing acked before a disconnect is delivered again. It fails when an ack
// cannot be sent or the server does not confirm receipt; acking the same
// messages again is then safe. A frame is acked once all of its messages are
// (or naked, when one of them was).
func (r *Reader) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	done, err := r.resolve(msgs, false, 0)
	if err != nil {
		return fmt.Errorf("jetstream: ack buffer %s: %w", r.name, err)
	}
	for _, h := range done {
		if err := r.nc.Publish(h.reply, h.body()); err != nil {
			r.unresolve(done)
			return fmt.Errorf("jetstream: ack buffer %s: %w", r.name, connErr(err))
		}
	}
	if err := r.conn.flush(ctx); err != nil {
		r.unresolve(done)
		return fmt.Errorf("jetstream: ack buffer %s: waiting for the server: %w", r.name, err)
	}
	return nil
}

// Nak hands msgs back to be delivered again after delay (0: at once). A
// message already acked or naked is left as it is. A frame is delivered again
// whole, once all of its messages are acked or naked: its acked messages
// too.
func (r *Reader) Nak(_ context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	done, err := r.resolve(msgs, true, delay)
	for _, h := range done {
		if perr := r.nc.Publish(h.reply, h.body()); perr != nil {
			return fmt.Errorf("jetstream: nak buffer %s: %w", r.name, connErr(perr))
		}
	}
	if err != nil {
		return fmt.Errorf("jetstream: nak buffer %s: %w", r.name, err)
	}
	return nil
}

// body is what ends h: an ack, or a nak with its delay.
func (h *heldMsg) body() []byte {
	switch {
	case !h.naked:
		return ackBody
	case h.delay > 0:
		return []byte(`-NAK {"delay":` + strconv.FormatInt(int64(h.delay), 10) + `}`)
	default:
		return nakBody
	}
}

// resolve marks msgs acked (or naked with delay) and returns the JetStream
// messages they complete, no longer held: their acks or naks are to be sent.
func (r *Reader) resolve(msgs []isb.ReadMessage, nak bool, delay time.Duration) ([]*heldMsg, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	done := make([]*heldMsg, 0, len(msgs))
	var bad error
	for i := range msgs {
		var h *heldMsg
		switch hd := msgs[i].Handle.(type) {
		case *heldMsg:
			h = hd
			if !h.held {
				if !nak {
					done = append(done, h) // acked before, by an Ack that failed later: again
				}
				continue
			}
			h.left = 0
		case *member:
			h = hd.h
			if !hd.done {
				hd.done = true
				h.left--
			} else if nak || h.naked || h.left > 0 {
				continue
			} else if !h.held {
				done = append(done, h) // the frame was acked before, by an Ack that failed later: again
				continue
			}
		default:
			bad = fmt.Errorf("message %q was not read from this package", msgs[i].ID)
			continue
		}
		if nak {
			h.naked, h.delay = true, max(h.delay, delay)
		}
		if h.left <= 0 && h.held {
			r.release(h)
			done = append(done, h)
		}
	}
	return done, bad
}

// unresolve holds again messages whose acks could not be sent, so that they
// are kept in progress until acked again.
func (r *Reader) unresolve(hs []*heldMsg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range hs {
		if !h.naked && !h.held {
			r.hold(h)
		}
	}
}

// inProgressLoop sends an in-progress ack for every held message every third
// of AckWait until ctx is done. A batch fetched ahead and not yet taken by a
// Read is received first, and held.
func (r *Reader) inProgressLoop(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(max(r.ackWait/3, 10*time.Millisecond))
	defer t.Stop()
	var replies []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.pullMu.TryLock() { // else a Read is taking it
			if r.open != nil && r.open.ahead {
				r.settle(context.Background(), nil, 0, nil, true)
			}
			r.pullMu.Unlock()
		}
		replies = r.heldReplies(replies[:0])
		failed := 0
		for _, reply := range replies {
			if err := r.nc.Publish(reply, progressBody); err != nil {
				failed++
			}
		}
		clear(replies)
		if failed > 0 {
			r.log.Warn("cannot send in-progress acks; the messages may be delivered again", zap.Int("messages", failed))
		}
	}
}

// heldReplies appends the reply subjects of the held messages to replies.
func (r *Reader) heldReplies(replies []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.live {
		for i := range b.msgs {
			if b.msgs[i].held {
				replies = append(replies, b.msgs[i].reply)
			}
		}
	}
	return replies
}

func (r *Reader) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Close stops the in-progress acks, waits for the Reader's goroutines, and
// hands back every message read and not yet acked (with the whole frame it
// came in), so that it is delivered again at once rather than after AckWait:
// close a Reader once its messages are acked or given up. Reads after Close
// fail with [ErrClosed]. Close is safe to call twice.
func (r *Reader) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.stop()
		r.wg.Wait()
		r.pullMu.Lock() // no Read is pulling
		if r.open != nil {
			r.settle(context.Background(), nil, 0, nil, false) // within maxPullWait
		}
		// Whatever is still held will not be acked by this reader: hand it
		// back, so that it need not wait for AckWait.
		r.mu.Lock()
		var held []*heldMsg
		for _, b := range r.live {
			for i := range b.msgs {
				if h := &b.msgs[i]; h.held {
					h.held, h.naked = false, true
					held = append(held, h)
				}
			}
			b.held = 0
		}
		clear(r.live)
		r.live = nil
		r.mu.Unlock()
		for _, h := range held {
			_ = r.nc.Publish(h.reply, h.body())
		}
		r.leftover = nil
		r.sub.Unsubscribe()
		r.pullMu.Unlock()
	})
	return nil
}
