package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// SinkConfig configures a [Sink].
type SinkConfig struct {
	Client ClientConfig
	// Topic is the topic written to.
	Topic string
	// SetKey makes a message's keys, joined with ":" as Numaflow joins them,
	// the record's key, so that messages with the same keys go to the same
	// partition. Without it records have no key and are spread over the
	// partitions.
	SetKey bool
}

// defaultDeliveryTimeout is Numaflow's message.timeout.ms.
const defaultDeliveryTimeout = 5 * time.Second

// Sink writes messages to a topic with an idempotent producer that waits for
// all in-sync replicas (unless acks or enable.idempotence say otherwise). It
// is an [isb.Writer], safe for concurrent use.
//
// Each record has the message's headers, and, as Numaflow's sink writes them,
// the header __key_len with the number of keys and __key_0, __key_1... with
// the keys.
type Sink struct {
	cl     *kgo.Client
	watch  *connWatch
	topic  string
	setKey bool

	mu     sync.RWMutex
	closed bool
}

var (
	_ isb.Writer = (*Sink)(nil)
	_ isb.Closer = (*Sink)(nil)
)

// NewSink returns a sink to cfg.Topic. It does not wait for the brokers.
func NewSink(cfg SinkConfig) (*Sink, error) {
	if strings.TrimSpace(cfg.Topic) == "" {
		return nil, configErr(RoleSink, "topic", "", "is required")
	}
	if err := cfg.Client.Properties.Check(RoleSink); err != nil {
		return nil, err
	}
	opts, watch, err := cfg.Client.options(RoleSink)
	if err != nil {
		return nil, err
	}
	opts = append(opts, producerOptions(cfg.Client.Properties)...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, configErr(RoleSink, "client", "", "cannot be made: "+err.Error())
	}
	return &Sink{cl: cl, watch: watch, topic: cfg.Topic, setKey: cfg.SetKey}, nil
}

// producerOptions maps the producer properties to options.
func producerOptions(p Properties) []kgo.Opt {
	opts := []kgo.Opt{kgo.RecordDeliveryTimeout(p.millisOf("message.timeout.ms", defaultDeliveryTimeout))}
	codec := kgo.NoCompression()
	switch v, _ := p.get("compression.type"); strings.ToLower(v) {
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	switch acks, _ := p.get("acks"); strings.ToLower(acks) {
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	if v, _ := p.get("enable.idempotence"); strings.EqualFold(v, "false") {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if v, ok := p.get("linger.ms"); ok {
		ms, _ := strconv.ParseFloat(v, 64)
		opts = append(opts, kgo.ProducerLinger(time.Duration(ms*float64(time.Millisecond))))
	}
	if _, ok := p.get("message.max.bytes"); ok {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(p.int("message.max.bytes", 0))))
	} else if _, ok := p.get("batch.size"); ok {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(p.int("batch.size", 0))))
	}
	if _, ok := p.get("request.timeout.ms"); ok {
		opts = append(opts, kgo.ProduceRequestTimeout(p.millisOf("request.timeout.ms", 0)))
	}
	return opts
}

// Write produces msgs as one batch and waits for every record's outcome:
// errs[i] is nil when msgs[i] was written, else why not (a record larger
// than message.max.bytes or the topic's max.message.bytes, a topic that does
// not exist, the delivery timeout or ctx ending first). As the broker refuses
// a whole batch for one record too large, the records of such a batch are
// written again one at a time, so that only the large one fails. Write returns
// an error only when the whole batch failed for one cause: ctx done or the
// sink closed.
func (s *Sink) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	if len(msgs) == 0 {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	recs := make([]kgo.Record, len(msgs))
	ptrs := make([]*kgo.Record, len(msgs))
	for i := range msgs {
		s.record(&recs[i], &msgs[i])
		ptrs[i] = &recs[i]
	}
	clear(errs[:len(msgs)])
	failed := s.produce(ctx, ptrs, errs)
	if tooLarge := batchTooLarge(errs[:len(msgs)]); len(tooLarge) > 1 {
		failed -= len(tooLarge) - s.writeAlone(ctx, recs, tooLarge, errs)
	}
	if failed == len(msgs) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kafka sink: writing to topic %q: %w", s.topic, err)
		}
		if errors.Is(errs[0], kgo.ErrClientClosed) {
			return ErrClosed
		}
	}
	return nil
}

// produce produces recs as one batch, sets errs[i] to the error of recs[i],
// and returns how many failed.
func (s *Sink) produce(ctx context.Context, recs []*kgo.Record, errs []error) int {
	failed := 0
	var index map[*kgo.Record]int
	for _, res := range s.cl.ProduceSync(ctx, recs...) {
		if res.Err == nil {
			continue
		}
		if index == nil {
			index = make(map[*kgo.Record]int, len(recs))
			for i, r := range recs {
				index[r] = i
			}
		}
		errs[index[res.Record]] = s.writeErr(res.Err)
		failed++
	}
	return failed
}

// writeErr is the error of a record not written, with the last failure to
// connect when there is one.
func (s *Sink) writeErr(err error) error {
	if last := s.watch.last(); last != nil {
		return fmt.Errorf("kafka sink: writing to topic %q: %w; %w", s.topic, err, last)
	}
	return fmt.Errorf("kafka sink: writing to topic %q: %w", s.topic, err)
}

// batchTooLarge returns the indexes of the records the broker refused as too
// large. The broker refuses a whole batch for one record too large, so that
// these are the records batched with it.
func batchTooLarge(errs []error) []int {
	var out []int
	for i, err := range errs {
		if errors.Is(err, kerr.MessageTooLarge) {
			out = append(out, i)
		}
	}
	return out
}

// writeAlone writes the records recs[i] of idx again, one at a time, so that
// a record too large fails alone, and returns how many still failed.
func (s *Sink) writeAlone(ctx context.Context, recs []kgo.Record, idx []int, errs []error) int {
	failed := 0
	for _, i := range idx {
		r := &kgo.Record{Topic: recs[i].Topic, Key: recs[i].Key, Value: recs[i].Value, Headers: recs[i].Headers}
		errs[i] = nil
		if err := s.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			errs[i] = s.writeErr(err)
			failed++
		}
	}
	return failed
}

// record fills r with m: its value, headers (with Numaflow's __key_len and
// __key_<i>), and, when SetKey, its keys joined with ":" as the key. Like
// Numaflow's, the record's timestamp is when it is produced.
func (s *Sink) record(r *kgo.Record, m *isb.Message) {
	r.Topic = s.topic
	r.Value = m.Value
	if s.setKey && len(m.Keys) > 0 {
		r.Key = []byte(strings.Join(m.Keys, ":"))
	}
	r.Headers = make([]kgo.RecordHeader, 0, len(m.Headers)+1+len(m.Keys))
	for k, v := range m.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: "__key_len", Value: []byte(strconv.Itoa(len(m.Keys)))})
	for i, k := range m.Keys {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "__key_" + strconv.Itoa(i), Value: []byte(k)})
	}
}

// Ping reports whether a broker answers (with the TLS and SASL configured).
func (s *Sink) Ping(ctx context.Context) error { return ping(ctx, s.cl, s.watch) }

// Close waits for the writes in progress and closes the connections. Write
// returns ErrClosed afterwards. Close is safe to call twice.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.cl.Close()
	}
	return nil
}
