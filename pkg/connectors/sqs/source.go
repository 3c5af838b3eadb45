package sqs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/sqsclient"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// MetadataKey is the user-metadata group an SQS message's message
// attributes are in, as in Numaflow. The sink reads a message's send options
// from the same group.
const MetadataKey = "sqs"

// SourceConfig configures a [Source] (Numaflow's source.sqs).
type SourceConfig struct {
	// Queue is the queue's client configuration; Queue.Field names the
	// source's YAML block in errors.
	Queue sqsclient.Config
	// MaxMessages is the most messages one ReceiveMessage asks for, 1 to 10
	// (0: 10).
	MaxMessages int32
	// VisibilityTimeout, when set, is how long a message received stays
	// hidden from other receives (whole seconds; nil: the queue's own).
	VisibilityTimeout *int32
	// WaitTime, when set, bounds a receive's long poll (0 to 20 s; nil: the
	// read timeout's, up to 20 s). 0 polls short.
	WaitTime *int32
	// AttributeNames are the system attributes a message comes with, as
	// headers (default All); MessageAttributeNames the message attributes,
	// as user metadata (default All).
	AttributeNames        []string
	MessageAttributeNames []string
	// ReadTimeout is the longest a Read waits for a message (default 1s).
	ReadTimeout time.Duration
	Logger      *zap.Logger
}

// Source is a source that reads an SQS queue, at least once. Replicas that
// read the same queue share its messages, as SQS's consumers do.
//
// Read receives at most len(buf) messages and never more: it asks for up
// to MaxMessages at a time, waiting (long polling) on the first receive only
// and taking what else is there without waiting, until buf is full or the
// queue has no more. A message's ID is its SQS message ID, its single key
// too (as in Numaflow), its EventTime the time SQS got it (SentTimestamp),
// its Headers its system attributes and its Metadata[MetadataKey] its
// message attributes' string values.
//
// Ack deletes messages (DeleteMessageBatch) once they are written; Nack
// makes them visible again after the delay (ChangeMessageVisibility, in
// whole seconds rounded up, as Numaflow 1.8.2 does). A message neither acked
// nor nacked is received again once its visibility timeout has passed, also
// when the vertex stops or dies: nothing is deleted before it is written.
//
// When SQS cannot be reached, the queue does not exist or the credentials
// are refused, Read returns the error (naming the YAML field) once, then
// reads nothing while it retries with backoff, and reads again when the
// cause has passed. A Source is safe for concurrent use.
type Source struct {
	cfg SourceConfig
	q   *sqsclient.Queue
}

var (
	_ isb.Reader = (*Source)(nil)
	_ isb.Nacker = (*Source)(nil)
)

// sqsMaxWait is SQS's longest long poll (seconds).
const sqsMaxWait = 20

// defaultReadTimeout is an SQS source's read timeout when none is given.
const defaultReadTimeout = time.Second

// NewSource makes the source's client. It does not call SQS: the queue is
// looked up on the first Read.
func NewSource(ctx context.Context, cfg SourceConfig) (*Source, error) {
	if cfg.MaxMessages <= 0 || cfg.MaxMessages > sqsclient.MaxBatch {
		cfg.MaxMessages = sqsclient.MaxBatch
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = defaultReadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if len(cfg.AttributeNames) == 0 {
		cfg.AttributeNames = []string{"All"}
	}
	if len(cfg.MessageAttributeNames) == 0 {
		cfg.MessageAttributeNames = []string{"All"}
	}
	cfg.Queue.Logger = cfg.Logger
	q, err := sqsclient.New(ctx, cfg.Queue)
	if err != nil {
		return nil, err
	}
	return &Source{cfg: cfg, q: q}, nil
}

// Read reads at most len(buf) messages into buf; see [Source].
func (s *Source) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	if !s.q.Wait(ctx, s.cfg.ReadTimeout) {
		return 0, nil
	}
	url, err := s.q.URL(ctx)
	if err != nil {
		return 0, s.q.Failed(ctx, err)
	}
	n := 0
	wait := s.waitSeconds()
	for n < len(buf) {
		ask := min(int32(len(buf)-n), s.cfg.MaxMessages)
		in := &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: ask,
			WaitTimeSeconds: wait, MessageAttributeNames: s.cfg.MessageAttributeNames}
		for _, a := range s.cfg.AttributeNames {
			in.MessageSystemAttributeNames = append(in.MessageSystemAttributeNames, types.MessageSystemAttributeName(a))
		}
		if v := s.cfg.VisibilityTimeout; v != nil {
			in.VisibilityTimeout = *v
		}
		out, err := s.q.API.ReceiveMessage(ctx, in)
		if err != nil {
			if n > 0 && ctx.Err() == nil {
				break // keep what was received; the next Read sees the failure
			}
			return n, s.q.Failed(ctx, err)
		}
		s.q.Succeeded()
		for i := range out.Messages {
			buf[n] = isb.ReadMessage{Message: decode(&out.Messages[i]), Handle: aws.ToString(out.Messages[i].ReceiptHandle)}
			n++
		}
		if int32(len(out.Messages)) < ask {
			break
		}
		wait = 0 // take what else is there without waiting
	}
	return n, nil
}

// waitSeconds is the long poll of a Read's first receive.
func (s *Source) waitSeconds() int32 {
	w := int32(min(math.Ceil(s.cfg.ReadTimeout.Seconds()), sqsMaxWait))
	if v := s.cfg.WaitTime; v != nil {
		w = min(w, *v)
	}
	return w
}

// decode is m as a message.
func decode(m *types.Message) isb.Message {
	id := aws.ToString(m.MessageId)
	out := isb.Message{ID: id, Keys: []string{id}, Value: []byte(aws.ToString(m.Body)), EventTime: time.Now()}
	if len(m.Attributes) > 0 {
		out.Headers = make(map[string]string, len(m.Attributes))
		for k, v := range m.Attributes {
			out.Headers[k] = v
		}
		if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
			out.EventTime = time.UnixMilli(ms)
		}
	}
	if len(m.MessageAttributes) > 0 {
		group := make(map[string][]byte, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			if v.StringValue != nil {
				group[k] = []byte(*v.StringValue)
			}
		}
		out.Metadata = isb.Metadata{MetadataKey: group}
	}
	return out
}

// Ack deletes msgs from the queue, 10 at a time (DeleteMessageBatch). It
// fails when any is not deleted, naming them; acking them again is then
// safe.
func (s *Source) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	url, err := s.q.URL(ctx)
	if err != nil {
		return s.q.Explain(err)
	}
	var failed []string
	for start := 0; start < len(msgs); start += sqsclient.MaxBatch {
		chunk := msgs[start:min(start+sqsclient.MaxBatch, len(msgs))]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(chunk[i].Handle.(string))}
		}
		out, err := s.q.API.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return fmt.Errorf("sqs source: ack (delete) %d messages: %w", len(msgs)-start, s.q.Explain(err))
		}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			if i >= 0 && i < len(chunk) {
				failed = append(failed, fmt.Sprintf("%s (%s: %s)", chunk[i].ID, aws.ToString(f.Code), aws.ToString(f.Message)))
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("sqs source: ack (delete) queue %q: %d not deleted: %s", s.q.Name(), len(failed), strings.Join(failed, ", "))
	}
	return nil
}

// sqsMaxVisibility is SQS's longest visibility timeout (12 hours).
const sqsMaxVisibility = 43200

// Nack makes msgs visible again no sooner than delay from now, rounded up
// to whole seconds (ChangeMessageVisibility, one message at a time, as
// Numaflow does). A message whose handle is no longer valid (already
// deleted, or received again by another reader) is left as it is.
func (s *Source) Nack(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	url, err := s.q.URL(ctx)
	if err != nil {
		return s.q.Explain(err)
	}
	secs := int32(min(math.Ceil(max(delay, 0).Seconds()), sqsMaxVisibility))
	var errs []error
	for i := range msgs {
		_, err := s.q.API.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
			ReceiptHandle: aws.String(msgs[i].Handle.(string)), VisibilityTimeout: secs})
		var gone *types.ReceiptHandleIsInvalid
		var notInFlight *types.MessageNotInflight
		if err != nil && !errors.As(err, &gone) && !errors.As(err, &notInFlight) {
			errs = append(errs, fmt.Errorf("message %s: %w", msgs[i].ID, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("sqs source: nack queue %q: %w", s.q.Name(), errors.Join(errs...))
	}
	return nil
}

// Pending returns the queue's ApproximateNumberOfMessages, as Numaflow
// does: messages visible and waiting to be received. While the queue is in
// backoff it returns isb.PendingUnknown without asking.
func (s *Source) Pending(ctx context.Context) (int64, error) {
	if !s.q.Wait(ctx, 0) {
		return isb.PendingUnknown, nil
	}
	url, err := s.q.URL(ctx)
	if err != nil {
		return isb.PendingUnknown, s.q.Explain(err)
	}
	out, err := s.q.API.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		return isb.PendingUnknown, s.q.Explain(err)
	}
	n, err := strconv.ParseInt(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)], 10, 64)
	if err != nil {
		return isb.PendingUnknown, fmt.Errorf("sqs source: queue %q: ApproximateNumberOfMessages: %w", s.q.Name(), err)
	}
	return n, nil
}
