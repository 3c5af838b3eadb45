package source

import (
	"context"
	"crypto/tls"
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

// JetStreamConfig configures a [JetStream] source.
type JetStreamConfig struct {
	// URL is the server's address, as in [NATSConfig].
	URL    string
	Stream string
	// Consumer is the durable pull consumer to read through. Like Numaflow,
	// the source creates it (with DeliverPolicy, FilterSubjects and AckWait)
	// when it does not exist, and uses an existing one as it is. "" reads
	// through the source's own durable, OwnConsumerName(DurableName, Stream).
	Consumer string
	// DurableName names the source's own durable when Consumer is "":
	// <pipeline>-<vertex>, or the MonoVertex's name.
	DurableName string
	// DeliverPolicy is where a consumer the source creates starts; see
	// [ParseDeliverPolicy] (default "all").
	DeliverPolicy string
	// FilterSubjects are the subjects of the stream a consumer the source
	// creates delivers (default: all). More than one needs nats-server 2.10.
	FilterSubjects []string
	// TLS, when not nil, makes the connection use TLS with this configuration.
	TLS  *tls.Config
	Auth NATSAuth
	// ReadTimeout is the longest a Read waits for a message (default 1s).
	ReadTimeout time.Duration
	// AckWait is how long a message read and not acked waits before it is
	// delivered again, for a consumer the source creates or its own (default
	// DefaultJetStreamAckWait); an existing consumer named by Consumer keeps
	// its own.
	AckWait time.Duration
	Logger  *zap.Logger
}

// DefaultJetStreamAckWait is the AckWait of a JetStreamConfig that gives none.
const DefaultJetStreamAckWait = 60 * time.Second

const (
	// jsAPITimeout bounds a JetStream API call or an ack made without a
	// caller's deadline.
	jsAPITimeout = 5 * time.Second
	// jsMinAckWait is the shortest AckWait accepted: in-progress acks go
	// out every third of it.
	jsMinAckWait = 100 * time.Millisecond
)

// What acks, naks and in-progress acks send to a message's reply subject.
var (
	jsAck      = []byte("+ACK")
	jsNak      = []byte("-NAK")
	jsProgress = []byte("+WPI")
)

// JetStream is a source that reads a JetStream stream through a durable pull
// consumer. Replicas that read through the same consumer share its messages:
// each message goes to one of them.
//
// Read asks the server for at most len(buf) messages and never more. It
// first takes what is there without waiting; when that is nothing it waits
// up to the read timeout (or until ctx is done) for one message, then takes
// what else is there without waiting. A message the server still delivers to
// a wait given up on is handed back at once. While the connection is down,
// Read fails at once with an error matching [ErrNATSNotConnected]; nats.go
// reconnects by itself, and a wait cut by a disconnect ends at the read
// timeout.
//
// Delivery is at least once. Ack acks messages once they are written and
// waits until the server has confirmed every ack (double acks, confirmed in
// bulk), so nothing acked is delivered again; Nak hands messages back to be
// delivered again after a delay. Until a message is acked or naked the source
// tells the server every third of the consumer's AckWait that it is still in
// progress, as Numaflow does; a message neither acked nor naked when the
// source is closed is handed back, and one held by a process that died is
// delivered again once AckWait has passed.
//
// A message's Value is its data, its Headers its NATS headers (the first
// value of each), its EventTime the time the stream stored it and its ID its
// stream sequence; like Numaflow's, it has no keys. A JetStream is safe for
// concurrent use.
type JetStream struct {
	cfg         JetStreamConfig
	name        string // the consumer's
	log         *zap.Logger
	nc          *nats.Conn
	js          jetstream.JetStream
	cons        jetstream.Consumer
	ackWait     time.Duration
	readTimeout time.Duration

	mu     sync.Mutex
	held   map[*jsHeld]struct{} // read, not yet acked nor naked
	closed bool

	stop      context.CancelFunc
	wg        sync.WaitGroup // the in-progress loop and the drains of waits given up on
	closeOnce sync.Once
}

// jsHeld is the Handle of a message read: where its ack goes.
type jsHeld struct {
	reply string
	seq   uint64
}

var (
	_ isb.Reader = (*JetStream)(nil)
	_ isb.Naker  = (*JetStream)(nil)
	_ isb.Closer = (*JetStream)(nil)
)

// NewJetStream connects to the server and binds to the consumer (creating it
// if need be; see [JetStreamConfig]). ctx bounds the consumer's lookup and
// creation. Its errors name the field at fault and never hold a secret; one
// that matches [ErrNATSAuth] means the server refused the credentials.
func NewJetStream(ctx context.Context, cfg JetStreamConfig) (*JetStream, error) {
	cfg, dp, name, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	j := &JetStream{cfg: cfg, name: name, readTimeout: cfg.ReadTimeout, held: map[*jsHeld]struct{}{}}
	j.log = cfg.Logger.With(zap.String("stream", cfg.Stream), zap.String("consumer", name))
	// No reconnect buffer: a pull or an ack made while disconnected fails at
	// once instead of being sent later with no one waiting for it.
	j.nc, err = natsConn{kind: "jetstream", url: cfg.URL, tls: cfg.TLS, auth: cfg.Auth, log: j.log}.connect(nats.ReconnectBufSize(-1))
	if err != nil {
		return nil, err
	}
	if j.js, err = jetstream.New(j.nc); err == nil {
		actx, cancel := context.WithTimeout(ctx, jsAPITimeout)
		err = j.bindConsumer(actx, dp)
		cancel()
	}
	if err != nil {
		j.nc.Close()
		return nil, err
	}
	ictx, stop := context.WithCancel(context.Background())
	j.stop = stop
	j.wg.Add(1)
	go j.inProgressLoop(ictx)
	return j, nil
}

// validate checks cfg and returns it with defaults applied, its deliver
// policy and the name of its consumer.
func (cfg JetStreamConfig) validate() (JetStreamConfig, DeliverPolicy, string, error) {
	if strings.TrimSpace(cfg.Stream) == "" {
		return cfg, DeliverPolicy{}, "", fmt.Errorf("%w: stream is empty", ErrNATSConfig)
	}
	name, err := cfg.consumerName()
	if err != nil {
		return cfg, DeliverPolicy{}, "", err
	}
	dp, err := ParseDeliverPolicy(cfg.DeliverPolicy)
	if err != nil {
		return cfg, DeliverPolicy{}, "", err
	}
	switch {
	case cfg.AckWait < 0 || cfg.AckWait > 0 && cfg.AckWait < jsMinAckWait:
		return cfg, DeliverPolicy{}, "", fmt.Errorf("%w: ackWait (%v) must be at least %v", ErrNATSConfig, cfg.AckWait, jsMinAckWait)
	case cfg.AckWait == 0:
		cfg.AckWait = DefaultJetStreamAckWait
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = defaultNATSReadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return cfg, dp, name, nil
}

// Consumer returns the name of the consumer the source reads through.
func (j *JetStream) Consumer() string { return j.name }

// Read reads at most len(buf) messages into buf; see [JetStream]. Each
// message's Value aliases the message's data.
func (j *JetStream) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if j.isClosed() {
		return 0, j.err("read", ErrNATSClosed)
	}
	if len(buf) == 0 {
		return 0, nil
	}
	if !j.nc.IsConnected() {
		return 0, j.err("read", ErrNATSNotConnected)
	}
	n, err := j.fetchNoWait(buf)
	if n > 0 || err != nil {
		return n, err
	}
	if n, err = j.wait(ctx, buf[:1]); n == 0 || err != nil || len(buf) == 1 {
		return n, err
	}
	m, err := j.fetchNoWait(buf[1:])
	return 1 + m, err
}

// fetchNoWait takes at most len(buf) messages the consumer has now.
func (j *JetStream) fetchNoWait(buf []isb.ReadMessage) (int, error) {
	batch, err := j.cons.FetchNoWait(len(buf))
	if err != nil {
		return 0, j.err("read", natsConnErr(err))
	}
	n := 0
	for msg := range batch.Messages() {
		if n == len(buf) { // the server sends at most the batch asked for
			j.handBack(msg)
			continue
		}
		if j.put(msg, &buf[n]) {
			n++
		}
	}
	if err := batch.Error(); err != nil {
		return n, j.err("read", natsConnErr(err))
	}
	return n, nil
}

// wait waits for one message, up to the read timeout or until ctx is done,
// and puts it in buf[0]. A wait given up on is drained in the background:
// what the server still delivers to it is handed back.
func (j *JetStream) wait(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	d := j.readTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	if d < time.Millisecond || ctx.Err() != nil {
		return 0, nil
	}
	batch, err := j.cons.Fetch(1, jetstream.FetchMaxWait(d))
	if err != nil {
		return 0, j.err("read", natsConnErr(err))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case msg, ok := <-batch.Messages():
		if !ok {
			if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
				return 0, j.err("read", natsConnErr(err))
			}
			return 0, nil
		}
		if j.put(msg, &buf[0]) {
			return 1, nil
		}
		return 0, nil
	case <-t.C:
	case <-ctx.Done():
	}
	j.drain(batch)
	return 0, nil
}

// drain hands back, in the background, the messages a fetch given up on
// still brings; nats.go ends the fetch a second after its expiry at the
// latest.
func (j *JetStream) drain(batch jetstream.MessageBatch) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed { // Close waits for j.wg: add to it no more
		return
	}
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		for msg := range batch.Messages() {
			j.handBack(msg)
		}
	}()
}

// handBack naks a message that will not be returned by Read.
func (j *JetStream) handBack(msg jetstream.Msg) {
	if err := j.nc.Publish(msg.Reply(), jsNak); err != nil {
		j.log.Debug("cannot hand back a late message; it is delivered again after AckWait", zap.Error(err))
	}
}

// put turns msg into rm and holds it. A message without JetStream metadata
// (which the server never sends to a pull) is skipped.
func (j *JetStream) put(msg jetstream.Msg, rm *isb.ReadMessage) bool {
	meta, err := msg.Metadata()
	if err != nil {
		j.log.Warn("skipping a message without JetStream metadata", zap.String("reply", msg.Reply()), zap.Error(err))
		return false
	}
	h := &jsHeld{reply: msg.Reply(), seq: meta.Sequence.Stream}
	*rm = isb.ReadMessage{Message: isb.Message{
		ID:        strconv.FormatUint(meta.Sequence.Stream, 10),
		Value:     msg.Data(),
		EventTime: meta.Timestamp,
		Headers:   natsHeaders(msg.Headers()),
	}, Handle: h}
	j.mu.Lock()
	j.held[h] = struct{}{}
	j.mu.Unlock()
	return true
}

// err wraps err of op with the stream and consumer.
func (j *JetStream) err(op string, err error) error {
	return fmt.Errorf("jetstream source: %s stream %q consumer %q: %w", op, j.cfg.Stream, j.name, err)
}

func (j *JetStream) isClosed() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.closed
}
