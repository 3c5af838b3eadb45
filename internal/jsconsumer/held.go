package jsconsumer

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// heldMsg is a JetStream message read: one message, whose isb.ReadMessage
// has it as Handle, or a frame, whose messages each have a *member. Its ack
// or NAK goes to its reply subject once every message in it is acked or
// nacked.
type heldMsg struct {
	reply string
	seq   uint64 // its stream sequence, from reply
	batch *heldBatch
	// Guarded by Consumer.mu:
	held   bool          // read, and not yet acked nor nacked
	nacked bool          // one of them was nacked: NAK it all
	term   bool          // nacked past its deliveries: terminate it
	left   int           // its messages not yet acked nor nacked
	delay  time.Duration // the longest delay they were nacked with
}

// heldBatch is the heldMsgs of one pull, allocated together. It is in
// Consumer.heldBatches while one of them is held.
type heldBatch struct {
	msgs []heldMsg // never grows beyond its capacity: handles point into it
	// Guarded by Consumer.mu:
	held int // how many of msgs are held
	pos  int // its index in Consumer.heldBatches, while held > 0
}

// member is the Handle of a message read from a frame.
type member struct {
	h    *heldMsg
	done bool // acked or nacked (guarded by Consumer.mu)
}

// What an ack, a NAK, an in-progress ack and a termination send to a
// message's reply subject.
var (
	ackBody      = []byte("+ACK")
	nakBody      = []byte("-NAK")
	progressBody = []byte("+WPI")
	termBody     = []byte("+TERM")
)

// body is what ends h: an ack, or a NAK with its delay.
func (h *heldMsg) body() []byte {
	switch {
	case h.term:
		return termBody
	case !h.nacked:
		return ackBody
	case h.delay > 0:
		return []byte(`-NAK {"delay":` + strconv.FormatInt(int64(h.delay), 10) + `}`)
	default:
		return nakBody
	}
}

// hold marks h held. c.mu is held.
func (c *Consumer) hold(h *heldMsg) {
	h.held = true
	b := h.batch
	if b.held == 0 {
		b.pos = len(c.heldBatches)
		c.heldBatches = append(c.heldBatches, b)
	}
	b.held++
}

// release marks h no longer held. c.mu is held.
func (c *Consumer) release(h *heldMsg) {
	h.held = false
	b := h.batch
	if b.held--; b.held > 0 {
		return
	}
	last := len(c.heldBatches) - 1
	c.heldBatches[b.pos] = c.heldBatches[last]
	c.heldBatches[b.pos].pos = b.pos
	c.heldBatches[last] = nil
	c.heldBatches = c.heldBatches[:last]
}

// resolve marks msgs acked (or nacked with delay) and returns the JetStream
// messages they complete, no longer held: their acks or NAKs are to be sent.
// A message acked before, by an Ack that failed later, is returned again by
// an ack (with what ended it: a NAK, if it was nacked); a nack leaves alone
// what is no longer held (acked, or nacked and perhaps delivered again
// already, when a second NAK would have the server deliver it once more).
func (c *Consumer) resolve(msgs []isb.ReadMessage, nack bool, delay time.Duration) ([]*heldMsg, error) {
	return c.resolveMax(msgs, nack, delay, 0)
}

// resolveMax is resolve, a nack terminating the messages delivered
// maxDeliveries times already (0: none).
func (c *Consumer) resolveMax(msgs []isb.ReadMessage, nack bool, delay time.Duration, maxDeliveries uint32) ([]*heldMsg, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	done := make([]*heldMsg, 0, len(msgs))
	var bad error
	for i := range msgs {
		var h *heldMsg
		switch hd := msgs[i].Handle.(type) {
		case *heldMsg:
			h = hd
			if !h.held {
				if !nack {
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
			} else if nack || h.nacked || h.left > 0 {
				continue
			} else if !h.held {
				done = append(done, h) // the frame was acked before, by an Ack that failed later: again
				continue
			}
		default:
			bad = fmt.Errorf("message %q was not read by this consumer", msgs[i].ID)
			continue
		}
		if nack {
			h.nacked, h.delay = true, max(h.delay, delay)
			if maxDeliveries > 0 && deliveries(h.reply) >= uint64(maxDeliveries) {
				h.term = true
			}
		}
		if h.left <= 0 && h.held {
			c.release(h)
			done = append(done, h)
		}
	}
	return done, bad
}

// unresolve holds again messages whose acks could not be sent or were not
// confirmed, so that they are kept in progress until acked again.
func (c *Consumer) unresolve(hs []*heldMsg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for _, h := range hs {
		if !h.nacked && !h.held {
			c.hold(h)
		}
	}
}

// heldReplies appends the reply subjects of the held messages to replies.
func (c *Consumer) heldReplies(replies []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.heldBatches {
		for i := range b.msgs {
			if b.msgs[i].held {
				replies = append(replies, b.msgs[i].reply)
			}
		}
	}
	return replies
}

// releaseAll marks every held message nacked and no longer held, and returns
// them, to be handed back.
func (c *Consumer) releaseAll() []*heldMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	var held []*heldMsg
	for _, b := range c.heldBatches {
		for i := range b.msgs {
			if h := &b.msgs[i]; h.held {
				h.held, h.nacked = false, true
				held = append(held, h)
			}
		}
		b.held = 0
	}
	clear(c.heldBatches)
	c.heldBatches = nil
	return held
}
