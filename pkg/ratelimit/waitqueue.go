package ratelimit

import "sync/atomic"

// waitQueue is the callers of a [Limiter] waiting for tokens, in arrival
// order: Acquire queues a caller that finds none, and tokens that come while
// it waits (an epoch's, a pacing slice's, those of a pause that ends, tokens
// deposited or borrowed) go to the first in the queue first, so that no
// caller starves another. l.mu guards it; n, the queue's length, is also read
// without l.mu, by a deposit that serves the queue only when a caller waits.
type waitQueue struct {
	n    atomic.Int32 // len(list), readable without l.mu
	list []*waiter
}

// waiter is one caller in the queue, waiting for up to n tokens.
type waiter struct {
	n  int64
	ch chan waitResult // buffered; receives exactly once
}

type waitResult struct {
	grant Grant
	err   error
}

// len returns the number of callers waiting. l.mu is held.
func (q *waitQueue) len() int { return len(q.list) }

// push queues a caller that waits for up to k tokens. l.mu is held.
func (q *waitQueue) push(k int64) *waiter {
	w := &waiter{n: k, ch: make(chan waitResult, 1)}
	q.list = append(q.list, w)
	q.n.Store(int32(len(q.list)))
	return w
}

// remove takes w, whose wait was cut short, out of the queue, and reports
// whether it was still there: false when it was served or failed first,
// and its result is in its channel. l.mu is held.
func (q *waitQueue) remove(w *waiter) bool {
	for i, x := range q.list {
		if x == w {
			q.list = append(q.list[:i], q.list[i+1:]...)
			q.n.Store(int32(len(q.list)))
			return true
		}
	}
	return false
}

// serve grants st's tokens to the waiting callers in arrival order, while
// st has some. l.mu is held.
func (q *waitQueue) serve(st *epochState) {
	served := 0
	for _, w := range q.list {
		g := st.gather(w.n, noLane)
		if g == 0 {
			break
		}
		w.ch <- waitResult{grant: Grant{Tokens: int(g), epoch: st.epoch}}
		served++
	}
	q.dequeue(served)
}

// hand gives budget new tokens of st to the waiting callers first, in
// arrival order, and the rest to st's common counter. l.mu is held.
func (q *waitQueue) hand(st *epochState, budget int64) {
	served := 0
	for _, w := range q.list {
		g := min(w.n, budget)
		if g == 0 {
			break
		}
		budget -= g
		w.ch <- waitResult{grant: Grant{Tokens: int(g), epoch: st.epoch}}
		served++
	}
	q.dequeue(served)
	st.common().Add(budget)
}

// fail ends every wait with err and empties the queue. l.mu is held.
func (q *waitQueue) fail(err error) {
	for _, w := range q.list {
		w.ch <- waitResult{err: err}
	}
	q.list = nil
	q.n.Store(0)
}

// dequeue removes the first n waiters, which have been served. l.mu is held.
func (q *waitQueue) dequeue(n int) {
	if n > 0 {
		clear(q.list[:n])
		q.list = q.list[n:]
		q.n.Store(int32(len(q.list)))
	}
}
