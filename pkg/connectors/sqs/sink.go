package sqs

import (
	"context"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/sqsclient"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// The headers an SQS sink sets a message's send options from, as
// Numaflow's: the same keys in the message's "sqs" user metadata win over
// its headers.
const (
	HeaderDelaySeconds    = "DelaySeconds"
	HeaderGroupID         = "MessageGroupId"
	HeaderDeduplicationID = "MessageDeduplicationId"
)

// SinkConfig configures a [Sink] (Numaflow's sink.sqs).
type SinkConfig struct {
	// Queue is the queue's client configuration; Queue.Field names the
	// sink's YAML block in errors.
	Queue  sqsclient.Config
	Logger *zap.Logger
}

// Sink is a sink that sends messages to an SQS queue, 10 to a call
// (SendMessageBatch). A message's Value is the SQS message's body;
// DelaySeconds, MessageGroupId and MessageDeduplicationId come from its
// headers or its "sqs" user metadata, as in Numaflow. A message whose value
// is not UTF-8 text, which SQS cannot carry, is rejected
// ([isb.ErrRejected]), as is one SQS refuses for its content (a sender
// fault); other failures, of one entry or of a whole call, are errors the
// forwarder retries. Errors name the sink's YAML field. A Sink is safe for
// concurrent use.
type Sink struct {
	q *sqsclient.Queue
}

var _ isb.Writer = (*Sink)(nil)

// NewSink makes the sink's client. It does not call SQS: the queue is looked
// up on the first Write.
func NewSink(ctx context.Context, cfg SinkConfig) (*Sink, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cfg.Queue.Logger = cfg.Logger
	q, err := sqsclient.New(ctx, cfg.Queue)
	if err != nil {
		return nil, err
	}
	return &Sink{q: q}, nil
}

// Write sends msgs, 10 to a SendMessageBatch, and records each one's fate
// in errs; see [Sink]. A call that fails marks its messages and those after
// it with the error.
func (s *Sink) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	clear(errs[:len(msgs)])
	url, err := s.q.URL(ctx)
	if err != nil {
		fill(errs[:len(msgs)], s.q.Explain(err))
		return nil
	}
	entries := make([]types.SendMessageBatchRequestEntry, 0, sqsclient.MaxBatch)
	index := make([]int, 0, sqsclient.MaxBatch) // entry -> message
	for start := 0; start < len(msgs); start += sqsclient.MaxBatch {
		end := min(start+sqsclient.MaxBatch, len(msgs))
		entries, index = entries[:0], index[:0]
		for i := start; i < end; i++ {
			e, err := sqsEntry(strconv.Itoa(len(entries)), &msgs[i])
			if err != nil {
				errs[i] = err
				continue
			}
			entries = append(entries, e)
			index = append(index, i)
		}
		if len(entries) == 0 {
			continue
		}
		out, err := s.q.API.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			e := fmt.Errorf("sqs sink: %w", s.q.Explain(err))
			for _, i := range index {
				errs[i] = e
			}
			fill(errs[end:len(msgs)], e)
			return nil
		}
		noAnswer := fmt.Errorf("sqs sink: queue %q did not answer for the message", s.q.Name())
		for _, i := range index {
			errs[i] = noAnswer
		}
		for _, ok := range out.Successful {
			if k, err := strconv.Atoi(aws.ToString(ok.Id)); err == nil && k >= 0 && k < len(index) {
				errs[index[k]] = nil
			}
		}
		for _, f := range out.Failed {
			k, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || k < 0 || k >= len(index) {
				continue
			}
			e := fmt.Errorf("sqs sink: queue %q refused the message (%s): %s", s.q.Name(), aws.ToString(f.Code), aws.ToString(f.Message))
			if f.SenderFault {
				e = fmt.Errorf("%w: %w", isb.ErrRejected, e)
			}
			errs[index[k]] = e
		}
	}
	return nil
}

func fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}

// sqsEntry is m as the batch entry id.
func sqsEntry(id string, m *isb.Message) (types.SendMessageBatchRequestEntry, error) {
	e := types.SendMessageBatchRequestEntry{Id: aws.String(id)}
	if !utf8.Valid(m.Value) {
		return e, fmt.Errorf("%w: sqs sink: message %s: its value is not UTF-8 text, which an SQS message body must be", isb.ErrRejected, m.ID)
	}
	e.MessageBody = aws.String(string(m.Value))
	opt := func(k string) (string, bool) {
		if v, ok := m.Metadata[MetadataKey][k]; ok && utf8.Valid(v) {
			return string(v), true
		}
		v, ok := m.Headers[k]
		return v, ok
	}
	if v, ok := opt(HeaderDelaySeconds); ok {
		// As in Numaflow, a delay that is not a whole number of seconds
		// from 0 to 900 is ignored: the message is sent without one.
		if d, err := strconv.ParseInt(v, 10, 32); err == nil && d >= 0 && d <= 900 {
			e.DelaySeconds = int32(d)
		}
	}
	if v, ok := opt(HeaderGroupID); ok {
		e.MessageGroupId = aws.String(v)
	}
	if v, ok := opt(HeaderDeduplicationID); ok {
		e.MessageDeduplicationId = aws.String(v)
	}
	return e, nil
}
