package kafka

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// connWatch keeps the last failure to connect to a broker (to dial, to shake
// hands over TLS, or to authenticate), until a connection succeeds: the
// client retries these by itself and reports none of them, so that without it
// a source with a wrong password reads nothing and says nothing.
type connWatch struct {
	role Role
	sasl *SASL

	mu   sync.Mutex
	err  error
	seen bool // err was returned by take
}

var _ kgo.HookBrokerConnect = (*connWatch)(nil)

// OnBrokerConnect records the outcome of a connection attempt.
func (w *connWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.err = nil
		return
	}
	w.err, w.seen = w.explain(net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))), err), false
}

// explain names the broker and, when the broker closed the connection of a
// client with SASL, what to check.
func (w *connWatch) explain(addr string, err error) error {
	e := fmt.Errorf("kafka %s: connecting to broker %s: %w", w.role, addr, err)
	if w.sasl != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		e = fmt.Errorf("%w (the broker closed the connection: is SASL authentication failing? check the mechanism %s, user %q and password)",
			e, w.sasl.Mechanism, w.sasl.User)
	}
	return e
}

// last returns the last connection failure, if no connection succeeded since.
func (w *connWatch) last() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// take returns the last connection failure once.
func (w *connWatch) take() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen {
		return nil
	}
	w.seen = true
	return w.err
}
