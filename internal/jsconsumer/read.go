package jsconsumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// maxPullWait bounds one pull request of a waiting Read: a Read the caller
// gives up on still holds a pull open on the server for up to this long.
const maxPullWait = time.Second

// Read reads at most len(buf) messages into buf and returns how many; see
// the package doc for how. Each message's Handle is the Consumer's own. A
// message that cannot be decoded is terminated (the server drops it) and
// reported in an error matching [ErrDecode], next to the messages read.
// While the connection is down, a Read that has to ask the server fails at
// once with an error matching [ErrNotConnected]; after Close it fails with
// [ErrClosed].
func (c *Consumer) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if c.isClosed() {
		return 0, ErrClosed
	}
	if len(buf) == 0 {
		return 0, nil
	}
	c.pullMu.Lock()
	defer func() {
		if c.open != nil && !c.open.ahead {
			c.settleLater()
		}
		c.pullMu.Unlock()
	}()
	fullSize := len(buf) >= c.largest
	c.largest = max(c.largest, len(buf))
	n := copy(buf, c.leftover)
	clear(c.leftover[copy(c.leftover, c.leftover[n:]):])
	c.leftover = c.leftover[:len(c.leftover)-n]
	if n == len(buf) {
		return n, nil
	}
	m, err := c.pull(ctx, buf[n:], 0)
	n += m
	if n == 0 && err == nil {
		// Nothing there: wait for one message, for the read timeout at
		// most, in pulls of at most maxPullWait; then take what else is
		// there.
		deadline := time.Now().Add(c.readTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		for n == 0 {
			wait := min(time.Until(deadline), maxPullWait)
			if wait <= 0 || ctx.Err() != nil {
				return 0, nil
			}
			if n, err = c.pull(ctx, buf[:1], wait); err != nil {
				return n, err
			}
		}
		m, err = c.pull(ctx, buf[n:], 0)
		n += m
	}
	if c.fetchAhead && c.answered && err == nil && fullSize && c.open == nil {
		c.fetchAheadOf(len(buf))
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
func (c *Consumer) pull(ctx context.Context, buf []isb.ReadMessage, wait time.Duration) (int, error) {
	n := 0
	var errs []error
	if c.open != nil {
		// A pull given up on, or fetched ahead, may still deliver: what it
		// brings is read here, or kept for the next Read when buf is full.
		n, errs = c.settle(context.Background(), buf, n, errs, true)
	}
	if n == len(buf) {
		return n, errors.Join(errs...)
	}
	p, err := c.request(len(buf)-n, wait)
	if err != nil {
		return n, errors.Join(append(errs, err)...)
	}
	c.open = p
	n, errs = c.settle(ctx, buf, n, errs, true)
	return n, errors.Join(errs...)
}

// request sends a pull request for room messages (as many JetStream
// messages as the room holds when they are full frames, at least one),
// without waiting (wait 0) or waiting up to wait for them, and returns it,
// to be settled.
func (c *Consumer) request(room int, wait time.Duration) (*openPull, error) {
	if !c.nc.IsConnected() {
		return nil, fmt.Errorf("%w: pull: the connection is %v", ErrNotConnected, c.nc.Status())
	}
	c.pulls++
	batch := max(1, room/c.frameSize) // the rest of the last frame waits in leftover for the next Read
	p := &openPull{reply: c.inbox + "." + strconv.FormatUint(c.pulls, 10), left: batch, waits: wait > 0,
		until: time.Now().Add(wait + time.Second), // the server answers within wait
		held:  &heldBatch{msgs: make([]heldMsg, 0, batch)}, keys: Keys{hint: room}}
	req := `{"batch":` + strconv.Itoa(p.left)
	if wait > 0 {
		req += `,"expires":` + strconv.FormatInt(int64(wait), 10)
	} else {
		req += `,"no_wait":true`
	}
	if err := c.nc.PublishRequest(c.next, p.reply, []byte(req+"}")); err != nil {
		return nil, ConnErr(err)
	}
	return p, nil
}

// fetchAheadOf asks for the next batch of size messages, to be taken by the
// next Read (or, when that is slow to come, by the in-progress loop). A
// request that cannot be sent is left to the next Read to make. c.pullMu is
// held and no pull is open.
func (c *Consumer) fetchAheadOf(size int) {
	p, err := c.request(size, 0)
	if err != nil {
		return
	}
	p.ahead = true
	c.open = p
}

// settleLater settles, in the background, the pull a Read gave up on, handing
// back what it still delivers, so that those messages need not wait for
// AckWait. c.pullMu is held; the goroutine waits for it.
func (c *Consumer) settleLater() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed { // Close waits for c.wg: add to it no more
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.pullMu.Lock()
		defer c.pullMu.Unlock()
		if c.open != nil && !c.open.ahead {
			c.settle(context.Background(), nil, 0, nil, false)
		}
	}()
}

// openPull is a pull the server may still be answering.
type openPull struct {
	reply string
	waits bool      // it has an expiry: the server may hold it open
	ahead bool      // fetched ahead: kept open for the next Read
	left  int       // JetStream messages it may still bring
	until time.Time // when it is over at the latest
	held  *heldBatch
	keys  Keys // the keys of its messages
}

// settle receives the answers to the open pull, putting its messages into
// buf from n on, until the pull is over or ctx is done. Messages beyond buf
// are kept in leftover (keep) or handed back.
func (c *Consumer) settle(ctx context.Context, buf []isb.ReadMessage, n int, errs []error, keep bool) (int, []error) {
	p := c.open
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
			msg, err = c.sub.NextMsg(d)
		} else {
			mctx, cancel := context.WithTimeout(ctx, d)
			msg, err = c.sub.NextMsgWithContext(mctx)
			cancel()
		}
		if err != nil {
			if ctx.Err() != nil {
				return n, errs // still open: settled by the next pull
			}
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
				errs = append(errs, ConnErr(err))
			}
			break
		}
		if len(msg.Data) == 0 && len(msg.Header) > 0 {
			if status := msg.Header.Get("Status"); status != "" {
				if msg.Subject != p.reply || status == "100" {
					continue // the end of an earlier pull, or a heartbeat
				}
				if err := statusErr(status, msg.Header.Get("Description")); err != nil {
					errs = append(errs, err)
				}
				break // the pull is over
			}
		}
		p.left--
		if n == len(buf) && !keep {
			c.late(msg)
			continue
		}
		var err2 error
		if n, err2 = c.put(msg, p, buf, n); err2 != nil {
			errs = append(errs, err2)
		}
	}
	c.open = nil
	c.answered = p.left == 0
	return n, errs
}

// statusErr is what the status that ends a pull means: nothing for no more
// messages (404) or its expiry (408), the connection going down for the
// server shutting down, else a stream or consumer that is gone.
func statusErr(status, description string) error {
	switch {
	case status == "404" || status == "408":
		return nil
	case status == "409" && description == "Server Shutdown":
		return fmt.Errorf("%w: %s %s", ErrNotConnected, status, description)
	}
	return fmt.Errorf("%w: %s %s", ErrGone, status, description)
}

// late hands back a message delivered to a pull that is over.
func (c *Consumer) late(msg *nats.Msg) {
	if strings.HasPrefix(msg.Reply, "$JS.ACK.") {
		if err := c.nc.Publish(msg.Reply, nakBody); err != nil {
			c.log.Debug("cannot hand back a late message; it is delivered again after AckWait", zap.Error(err))
		}
	}
}

// put decodes msg, delivered to pull p, into buf[n] and holds it, returning
// the new count; a frame's messages fill buf and the rest go to leftover. A
// message that cannot be decoded is terminated instead.
func (c *Consumer) put(msg *nats.Msg, p *openPull, buf []isb.ReadMessage, n int) (int, error) {
	msgs, err := c.decode(msg, c.scratch[:0], &p.keys)
	if err == nil && len(msgs) == 0 {
		err = errors.New("it carries no message")
	}
	if err != nil {
		clear(msgs)
		c.scratch = msgs[:0]
		return n, c.drop(msg, err)
	}
	if len(p.held.msgs) == cap(p.held.msgs) {
		// More than the pull asked for, which the server never sends.
		p.held = &heldBatch{msgs: make([]heldMsg, 0, 8)}
	}
	c.mu.Lock() // the in-progress loop reads the batch
	p.held.msgs = append(p.held.msgs, heldMsg{reply: msg.Reply, seq: streamSeq(msg.Reply), batch: p.held, left: len(msgs)})
	h := &p.held.msgs[len(p.held.msgs)-1]
	c.hold(h)
	c.mu.Unlock()
	if len(msgs) == 1 {
		n = c.give(buf, n, isb.ReadMessage{Message: msgs[0], Handle: h})
	} else {
		members := make([]member, len(msgs))
		for i := range msgs {
			members[i].h = h
			n = c.give(buf, n, isb.ReadMessage{Message: msgs[i], Handle: &members[i]})
		}
	}
	clear(msgs)
	c.scratch = msgs[:0]
	return n, nil
}

// drop terminates msg, which cannot be decoded, and returns why.
func (c *Consumer) drop(msg *nats.Msg, cause error) error {
	var seq uint64
	if meta, err := msg.Metadata(); err == nil {
		seq = meta.Sequence.Stream
	}
	err := fmt.Errorf("%w: stream sequence %d: %w", ErrDecode, seq, cause)
	c.log.Error("dropping a message that cannot be decoded", zap.Error(err))
	if strings.HasPrefix(msg.Reply, "$JS.ACK.") {
		if termErr := c.nc.Publish(msg.Reply, termBody); termErr != nil {
			c.log.Warn("cannot terminate the undecodable message", zap.Uint64("seq", seq), zap.Error(termErr))
		}
	}
	return err
}

// give puts rm into buf[n] when there is room, else into leftover, and
// returns the new count.
func (c *Consumer) give(buf []isb.ReadMessage, n int, rm isb.ReadMessage) int {
	if n < len(buf) {
		buf[n] = rm
		return n + 1
	}
	c.leftover = append(c.leftover, rm)
	return n
}
