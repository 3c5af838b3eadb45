package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
)

// SubjectPrefix starts the subject of every buffer's stream: the buffer
// "p-v-0" is the stream "p-v-0" bound to the subject "sluice.p-v-0".
const SubjectPrefix = "sluice."

// BufferSpec describes one buffer (one partition of a vertex's input).
type BufferSpec struct {
	// Name is the buffer's name, used as is for its stream and its durable
	// consumer, e.g. "mypipe-myvertex-0". It must not be empty nor contain
	// '.', '*', '>', '/', '\' or whitespace.
	Name string
	// MaxLength is Numaflow's bufferMaxLength: the most messages the buffer
	// holds, read or not, until they are acked. Writes beyond it fail.
	MaxLength int
	// UsageLimit is Numaflow's bufferUsageLimit in percent (1 to 100): the
	// buffer counts as full for writers once it holds MaxLength*UsageLimit/100
	// messages; at 100 only once it holds MaxLength.
	UsageLimit int
	// Ordered is set for the buffer of a vertex with ordered processing: its
	// consumer has one message in flight at a time (MaxAckPending 1), so
	// that no message is delivered before the one ahead of it is acked, a
	// message nacked or left unacked by a reader that died included.
	Ordered bool
}

func (s BufferSpec) validate() error {
	if err := validateName(s.Name); err != nil {
		return err
	}
	if s.MaxLength < 1 {
		return fmt.Errorf("%w: buffer %s: maxLength (%d) < 1", ErrInvalidConfig, s.Name, s.MaxLength)
	}
	if s.UsageLimit < 1 || s.UsageLimit > 100 {
		return fmt.Errorf("%w: buffer %s: usageLimit (%d) not in 1..100", ErrInvalidConfig, s.Name, s.UsageLimit)
	}
	return nil
}

// validateName checks that name can be a stream name and a subject token.
func validateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	for _, r := range name {
		if strings.ContainsRune(".*>/\\", r) || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("%w %q: must not contain %q", ErrInvalidName, name, r)
		}
	}
	return nil
}

func subject(name string) string { return SubjectPrefix + name }

// streamConfig is a buffer's stream: a work queue (a message is deleted once
// acked) that refuses new messages beyond MaxLength.
func (c *Conn) streamConfig(spec BufferSpec) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        spec.Name,
		Description: "sluice inter-step buffer",
		Subjects:    []string{subject(spec.Name)},
		Retention:   jetstream.WorkQueuePolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     int64(spec.MaxLength),
		Duplicates:  c.cfg.DuplicateWindow,
		Storage:     c.cfg.Storage.jetstream(),
		Replicas:    1,
	}
}

// consumerConfig is a buffer's durable pull consumer, shared by all readers
// of the buffer. MaxAckPending is MaxLength so that it never limits reads,
// or 1 for an ordered buffer.
func (c *Conn) consumerConfig(spec BufferSpec) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       spec.Name,
		Description:   "sluice inter-step buffer readers",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.cfg.AckWait,
		MaxAckPending: maxAckPending(spec),
		MaxDeliver:    -1,
	}
}

func maxAckPending(spec BufferSpec) int {
	if spec.Ordered {
		return 1
	}
	return spec.MaxLength
}

// createAttempts bounds CreateBuffer's retries when another process creates
// the same stream at the same moment.
const createAttempts = 3

// CreateBuffer creates the buffer's stream and durable consumer, or updates
// them to spec and the Conn's Config when they exist. It is idempotent and
// may run in several processes at once. Changing the storage of an existing
// buffer is refused by the server.
func (c *Conn) CreateBuffer(ctx context.Context, spec BufferSpec) error {
	if err := spec.validate(); err != nil {
		return err
	}
	scfg := c.streamConfig(spec)
	var err error
	for range createAttempts {
		// CreateOrUpdateStream updates, then creates when the stream is
		// missing; a concurrent creator with another config makes the
		// create fail with "name already in use", and the update of the
		// next attempt then succeeds.
		_, err = c.js.CreateOrUpdateStream(ctx, scfg)
		if err == nil || !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("jetstream: create buffer %s: stream: %w", spec.Name, err)
	}
	if _, err := c.js.CreateOrUpdateConsumer(ctx, spec.Name, c.consumerConfig(spec)); err != nil {
		return fmt.Errorf("jetstream: create buffer %s: consumer: %w", spec.Name, err)
	}
	return nil
}

// DeleteBuffer deletes the buffer's stream, its messages and its consumer.
// Deleting a buffer that does not exist is not an error.
func (c *Conn) DeleteBuffer(ctx context.Context, name string) error {
	if err := validateName(name); err != nil {
		return err
	}
	err := c.js.DeleteStream(ctx, name)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("jetstream: delete buffer %s: %w", name, err)
	}
	return nil
}

// BufferInfo is a snapshot of a buffer's counts.
type BufferInfo struct {
	// Messages is how many messages the stream holds: Pending + AckPending.
	Messages uint64
	// Pending is how many messages no reader has been given yet.
	Pending uint64
	// AckPending is how many messages readers have been given and not yet
	// acked (including those nacked with a delay not yet passed).
	AckPending int
	// Redelivered is how many of the AckPending messages have been given
	// more than once.
	Redelivered int
	// LastOffset is the stream sequence of the last message stored, and
	// AckFloor the one at or before which every message is acked.
	LastOffset, AckFloor int64
}

// Empty reports whether the buffer holds no message, none pending or being
// read.
func (b BufferInfo) Empty() bool {
	return b.Messages == 0 && b.Pending == 0 && b.AckPending == 0 && b.Redelivered == 0
}

// BufferInfo returns the buffer's counts from the server, for tests and
// operators. A missing buffer gives an error matching [ErrBufferNotFound].
func (c *Conn) BufferInfo(ctx context.Context, name string) (BufferInfo, error) {
	if err := validateName(name); err != nil {
		return BufferInfo{}, err
	}
	s, err := c.js.Stream(ctx, name)
	if err != nil {
		return BufferInfo{}, bufferErr("info", name, err)
	}
	cons, err := s.Consumer(ctx, name)
	if err != nil {
		return BufferInfo{}, bufferErr("info", name, err)
	}
	si, ci := s.CachedInfo(), cons.CachedInfo()
	return BufferInfo{
		Messages:    si.State.Msgs,
		Pending:     ci.NumPending,
		AckPending:  ci.NumAckPending,
		Redelivered: ci.NumRedelivered,
		LastOffset:  int64(si.State.LastSeq),
		AckFloor:    int64(ci.AckFloor.Stream),
	}, nil
}

// bufferErr wraps err from an operation on buffer name, marking a missing
// stream or consumer with ErrBufferNotFound.
func bufferErr(op, name string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jsconsumer.ErrGone) {
		return fmt.Errorf("jetstream: %s buffer %s: %w: %w", op, name, ErrBufferNotFound, err)
	}
	return fmt.Errorf("jetstream: %s buffer %s: %w", op, name, connErr(err))
}
