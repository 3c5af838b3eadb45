package source

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
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
	// DeliverPolicy is where a consumer the source creates starts; the zero
	// value is all.
	DeliverPolicy DeliverFrom
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
	// 60s, at least 100ms); an existing consumer named by Consumer keeps its
	// own.
	AckWait time.Duration
	Logger  *zap.Logger
}

// jsAPITimeout bounds a JetStream API call made without a caller's deadline.
const jsAPITimeout = 5 * time.Second

// JetStream is a source that reads a JetStream stream through a durable pull
// consumer, at least once. Replicas that read through the same consumer
// share its messages: each message goes to one of them.
//
// Read asks the server for at most len(buf) messages and never more. It
// first takes what is there without waiting; when that is nothing it waits
// up to the read timeout (or until ctx is done) for one message, then takes
// what else is there without waiting. A message the server still delivers to
// a wait given up on is handed back at once. While the connection is down,
// Read fails at once with an error matching [ErrNATSNotConnected]; nats.go
// reconnects by itself.
//
// Delivery is at least once. Ack acks messages once they are written and
// waits until the server has confirmed every ack (double acks, confirmed in
// bulk), so nothing acked is delivered again; Nack hands messages back to be
// delivered again after a delay. Until a message is acked or nacked the source
// tells the server every third of the consumer's AckWait that it is still in
// progress, as Numaflow does; a message neither acked nor nacked when the
// source is closed is handed back, and one held by a process that died is
// delivered again once AckWait has passed.
//
// A message's Value is its data, its Headers its NATS headers (the first
// value of each), its EventTime the time the stream stored it and its ID its
// stream sequence; like Numaflow's, it has no keys. A JetStream is safe for
// concurrent use.
type JetStream struct {
	cfg  JetStreamConfig
	name string // the consumer's
	log  *zap.Logger
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer // for Pending
	c    *jsconsumer.Consumer
}

var (
	_ isb.Reader        = (*JetStream)(nil)
	_ isb.Nacker        = (*JetStream)(nil)
	_ isb.OptionsNacker = (*JetStream)(nil)
	_ isb.Closer        = (*JetStream)(nil)
)

// NewJetStream connects to the server and binds to the consumer (creating it
// if need be; see [JetStreamConfig]). ctx bounds the consumer's lookup and
// creation. Its errors name the field at fault and never hold a secret; one
// that matches [ErrNATSAuth] means the server refused the credentials.
func NewJetStream(ctx context.Context, cfg JetStreamConfig) (*JetStream, error) {
	cfg, name, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	j := &JetStream{cfg: cfg, name: name}
	j.log = cfg.Logger.With(zap.String("stream", cfg.Stream), zap.String("consumer", name))
	// No reconnect buffer: a pull or an ack made while disconnected fails at
	// once instead of being sent later with no one waiting for it.
	j.nc, err = natsConn{kind: "jetstream", url: cfg.URL, tls: cfg.TLS, auth: cfg.Auth, log: j.log}.connect(nats.ReconnectBufSize(-1))
	if err != nil {
		return nil, err
	}
	var ackWait time.Duration
	if j.js, err = jetstream.New(j.nc); err == nil {
		actx, cancel := context.WithTimeout(ctx, jsAPITimeout)
		ackWait, err = j.bindConsumer(actx)
		cancel()
	}
	if err == nil {
		j.c, err = jsconsumer.New(j.nc, cfg.Stream, name, jsconsumer.Options{
			Decode:      decodeJetStream,
			ReadTimeout: cfg.ReadTimeout,
			AckWait:     ackWait,
			ConfirmAcks: true,
			Logger:      j.log,
		})
	}
	if err != nil {
		j.nc.Close()
		return nil, err
	}
	return j, nil
}

// validate checks cfg and returns it with defaults applied, and the name of
// its consumer.
func (cfg JetStreamConfig) validate() (JetStreamConfig, string, error) {
	if strings.TrimSpace(cfg.Stream) == "" {
		return cfg, "", fmt.Errorf("%w: stream is empty", ErrNATSConfig)
	}
	name, err := cfg.consumerName()
	if err != nil {
		return cfg, "", err
	}
	if err := cfg.DeliverPolicy.Validate(); err != nil {
		return cfg, "", fmt.Errorf("%w: deliverPolicy: %w", ErrNATSConfig, err)
	}
	switch {
	case cfg.AckWait < 0 || cfg.AckWait > 0 && cfg.AckWait < jsconsumer.MinAckWait:
		return cfg, "", fmt.Errorf("%w: ackWait (%v) must be at least %v", ErrNATSConfig, cfg.AckWait, jsconsumer.MinAckWait)
	case cfg.AckWait == 0:
		cfg.AckWait = jsconsumer.DefaultAckWait
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = defaultNATSReadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return cfg, name, nil
}

// decodeJetStream is the source's [jsconsumer.DecodeFunc]: a message as the
// stream has it. One without JetStream metadata, which the server never
// sends to a pull, is dropped.
func decodeJetStream(msg *nats.Msg, out []isb.Message, _ *jsconsumer.Keys) ([]isb.Message, error) {
	meta, err := msg.Metadata()
	if err != nil {
		return out, fmt.Errorf("no JetStream metadata: %w", err)
	}
	return append(out, isb.Message{
		ID:        strconv.FormatUint(meta.Sequence.Stream, 10),
		Value:     msg.Data,
		EventTime: meta.Timestamp,
		Headers:   natsHeaders(msg.Header),
	}), nil
}

// Consumer returns the name of the consumer the source reads through.
func (j *JetStream) Consumer() string { return j.name }

// Read reads at most len(buf) messages into buf; see [JetStream]. Each
// message's Value aliases the message's data. Reads after Close fail with
// [ErrNATSClosed].
func (j *JetStream) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	n, err := j.c.Read(ctx, buf)
	if err != nil {
		err = j.err("read", err)
	}
	return n, err
}

// Ack acks msgs and waits until the server has confirmed every ack, for
// 5 s at most when ctx has no earlier deadline. It fails when an ack
// cannot be sent or is not confirmed; acking the same messages again is then
// safe, and until then they are kept in progress.
func (j *JetStream) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	if err := j.c.Ack(ctx, msgs); err != nil {
		return j.err("ack", err)
	}
	return nil
}

// Nack hands msgs back to be delivered again no sooner than delay from now
// (0: at once), and waits until the server has received the NAKs. A message
// already acked or nacked is left as it is.
func (j *JetStream) Nack(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	if err := j.c.Nack(ctx, msgs, delay); err != nil {
		return j.err("nack", err)
	}
	return nil
}

// NackOptions hands msgs back as Nack does, after opts.Delay, but for those
// delivered opts.MaxDeliveries times already (when it is set), which the
// server drops. It implements [isb.OptionsNacker].
func (j *JetStream) NackOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	if err := j.c.NackMax(ctx, msgs, opts.Delay, opts.MaxDeliveries); err != nil {
		return j.err("nack", err)
	}
	return nil
}

// Pending returns, as Numaflow does, the consumer's messages not yet
// delivered (NumPending) plus those delivered and not yet acked
// (NumAckPending: being processed by a replica, or waiting to be delivered
// again).
func (j *JetStream) Pending(ctx context.Context) (int64, error) {
	if !j.nc.IsConnected() {
		return isb.PendingUnknown, j.err("pending", ErrNATSNotConnected)
	}
	ctx, cancel := context.WithTimeout(ctx, jsAPITimeout)
	defer cancel()
	info, err := j.cons.Info(ctx)
	if err != nil {
		return isb.PendingUnknown, j.err("pending", jsconsumer.ConnErr(err))
	}
	return int64(info.NumPending) + int64(info.NumAckPending), nil
}

// Close stops the in-progress acks, hands back every message read and not
// yet acked, so that it is delivered again at once rather than after
// AckWait, and closes the connection: close the source once its messages are
// acked or given up. Reads after Close fail with [ErrNATSClosed]. Close is
// safe to call twice.
func (j *JetStream) Close() error {
	_ = j.c.Close()
	j.nc.Close()
	return nil
}

// err wraps err of op with the stream and consumer.
func (j *JetStream) err(op string, err error) error {
	if errors.Is(err, jsconsumer.ErrClosed) {
		err = ErrNATSClosed
	}
	return fmt.Errorf("jetstream source: %s stream %q consumer %q: %w", op, j.cfg.Stream, j.name, err)
}
