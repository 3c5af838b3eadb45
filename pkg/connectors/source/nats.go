package source

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// NATSConfig configures a [NATS] source.
type NATSConfig struct {
	// URL is the server's address: nats://host:port, tls://host:port, or, as
	// Numaflow accepts, a bare host ("nats", port 4222) or host:port; several
	// may be given separated by commas.
	URL     string
	Subject string
	// Queue is the queue group shared by the replicas: each message goes to
	// one of them. Without it every replica gets every message.
	Queue string
	// TLS, when not nil, makes the connection use TLS with this configuration.
	TLS  *tls.Config
	Auth NATSAuth
	// ReadTimeout is the longest a Read waits for a message (default 1s).
	ReadTimeout time.Duration
	// Buffer is how many messages received and not yet read are held
	// (default DefaultNATSBuffer). A message received while it is full is
	// dropped and counted (see [NATS.Dropped]).
	Buffer int
	Logger *zap.Logger
}

// DefaultNATSBuffer is the Buffer of a NATSConfig that gives none.
const DefaultNATSBuffer = 10000

// natsDropWarnEvery is the least time between two warnings about dropped
// messages.
const natsDropWarnEvery = 10 * time.Second

// NATS is a source that subscribes to a core NATS subject (a queue
// subscription when a queue group is given) and holds the messages it
// receives, up to its Buffer, until they are read.
//
// Delivery is at most once, as with Numaflow's NATS source: core NATS keeps
// nothing for a subscriber, so a message received while the buffer is full is
// dropped (counted by Dropped, with a warning at most every 10 s), messages
// published while the connection is down are never received, and messages
// held or read and not yet written when the process stops are lost. Ack does
// nothing, and NATS is no [isb.Nacker]: a nacked message is delivered again by
// the forwarder itself.
//
// A message's Value is the NATS payload and its Headers the NATS headers (the
// first value of each; Numaflow's NATS source passes none); like Numaflow's,
// it has no keys. Its EventTime is when
// it was received and its ID is unique (a random prefix of the source and a
// counter). Read is safe for concurrent use.
type NATS struct {
	cfg    NATSConfig
	log    *zap.Logger
	nc     *nats.Conn
	sub    *nats.Subscription
	held   chan isb.ReadMessage
	prefix string // of message ids: unique to this source

	seq       atomic.Uint64
	dropped   atomic.Uint64
	warn      rateGate
	closed    chan struct{}
	closeOnce sync.Once
}

var (
	_ isb.Reader = (*NATS)(nil)
	_ isb.Closer = (*NATS)(nil)
)

// NewNATS connects to the server and subscribes to cfg.Subject. Its errors
// name the field at fault and never hold a secret; one that matches
// [ErrNATSAuth] means the server refused the credentials.
func NewNATS(cfg NATSConfig) (*NATS, error) {
	if strings.TrimSpace(cfg.Subject) == "" {
		return nil, fmt.Errorf("%w: subject is empty", ErrNATSConfig)
	}
	if cfg.Buffer < 0 {
		return nil, fmt.Errorf("%w: buffer (%d) < 0", ErrNATSConfig, cfg.Buffer)
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = DefaultNATSBuffer
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = defaultNATSReadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	n := &NATS{cfg: cfg, held: make(chan isb.ReadMessage, cfg.Buffer), prefix: natsIDPrefix(),
		closed: make(chan struct{}), warn: rateGate{every: natsDropWarnEvery}}
	n.log = cfg.Logger.With(zap.String("subject", cfg.Subject))
	nc, err := natsConn{kind: "nats", url: cfg.URL, tls: cfg.TLS, auth: cfg.Auth, log: n.log}.connect()
	if err != nil {
		return nil, err
	}
	n.nc = nc
	if cfg.Queue != "" {
		n.sub, err = nc.QueueSubscribe(cfg.Subject, cfg.Queue, n.receive)
	} else {
		n.sub, err = nc.Subscribe(cfg.Subject, n.receive)
	}
	if err == nil {
		// The subscription is known to the server before NewNATS returns.
		err = nc.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats source: subscribe to subject %q (queue %q): %w", cfg.Subject, cfg.Queue, err)
	}
	return n, nil
}

// natsIDPrefix returns a random prefix for the ids of one source's messages.
func natsIDPrefix() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "-"
}

// receive holds msg, or drops and counts it when the buffer is full. nats.go
// calls it from the subscription's one delivery goroutine.
func (n *NATS) receive(msg *nats.Msg) {
	rm := isb.ReadMessage{Message: isb.Message{
		ID:        n.prefix + strconv.FormatUint(n.seq.Add(1), 10),
		Value:     msg.Data,
		EventTime: time.Now(),
		Headers:   natsHeaders(msg.Header),
	}}
	select {
	case n.held <- rm:
		return
	default:
	}
	n.dropped.Add(1)
	if n.warn.allow(time.Now()) {
		n.log.Warn("the buffer of received messages is full: dropping messages (core NATS is at most once); "+
			"the vertex reads slower than the subject receives",
			zap.Int("buffer", n.cfg.Buffer), zap.Uint64("dropped", n.Dropped()))
	}
}

// Read fills buf with at most len(buf) held messages. When none is held it
// waits for one up to the read timeout, or until ctx is done, and returns 0
// and no error if none comes. After Close it returns [ErrNATSClosed].
func (n *NATS) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	var first isb.ReadMessage
	select {
	case first = <-n.held:
	case <-n.closed:
		return 0, fmt.Errorf("nats source: read subject %q: %w", n.cfg.Subject, ErrNATSClosed)
	default:
		t := time.NewTimer(n.cfg.ReadTimeout)
		defer t.Stop()
		select {
		case first = <-n.held:
		case <-t.C:
			return 0, nil
		case <-ctx.Done():
			return 0, nil
		case <-n.closed:
			return 0, fmt.Errorf("nats source: read subject %q: %w", n.cfg.Subject, ErrNATSClosed)
		}
	}
	buf[0] = first
	for i := 1; i < len(buf); i++ {
		select {
		case buf[i] = <-n.held:
		default:
			return i, nil
		}
	}
	return len(buf), nil
}

// Ack does nothing: core NATS has no acknowledgements.
func (n *NATS) Ack(context.Context, []isb.ReadMessage) error { return nil }

// OwnPending reports that Pending counts what this replica holds: each
// replica of a vertex tells its part.
func (n *NATS) OwnPending() bool { return true }

// Pending returns how many messages are held, received and not yet read.
func (n *NATS) Pending(context.Context) (int64, error) {
	return int64(len(n.held)), nil
}

// Dropped returns how many messages were dropped because the buffer was full,
// and, should nats.go's own queue before it ever overflow, the messages
// nats.go dropped.
func (n *NATS) Dropped() uint64 {
	d := n.dropped.Load()
	if lost, err := n.sub.Dropped(); err == nil && lost > 0 {
		d += uint64(lost)
	}
	return d
}

// Close unsubscribes and closes the connection. The messages still held are
// lost (at most once). Close is safe to call twice.
func (n *NATS) Close() error {
	n.closeOnce.Do(func() {
		close(n.closed)
		if err := n.sub.Unsubscribe(); err != nil && n.nc.IsConnected() {
			n.log.Warn("unsubscribe failed", zap.Error(err))
		}
		n.nc.Close()
	})
	return nil
}

// rateGate lets an event through at most once per every.
type rateGate struct {
	every time.Duration
	last  atomic.Int64 // unix nanoseconds of the last event let through; 0: none
}

// allow reports whether an event at now may pass, and records it if so.
func (g *rateGate) allow(now time.Time) bool {
	last := g.last.Load()
	if last != 0 && now.UnixNano()-last < int64(g.every) {
		return false
	}
	return g.last.CompareAndSwap(last, now.UnixNano())
}
