package jsstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/pkg/watermark"
)

var (
	// ErrMalformed is matched by the error of a read that met a key or value
	// this package did not write.
	ErrMalformed = errors.New("jsstore: malformed entry")
	// ErrNoBucket is returned by [Open] given a Config without a Bucket.
	ErrNoBucket = errors.New("jsstore: Config.Bucket is empty")
)

// valueSize is the size of a value: the watermark and the heartbeat in ms,
// and the offset.
const valueSize = 24

var _ watermark.Store = (*Store)(nil)

// Config is the bucket a [Store] opens.
type Config struct {
	// Bucket names the key-value bucket, e.g. the pipeline and edge
	// "p1-in-out_WM"; required.
	Bucket string
	// Storage is where the server keeps the bucket: file (the default), so
	// that entries outlive a server restart, or memory.
	Storage jetstream.StorageType
	// Replicas is the number of copies in a cluster; 1 when zero.
	Replicas int
	// TTL, when more than zero, removes an entry that has not been put for
	// that long, so the keys of processors gone for good disappear; it must
	// be much longer than the heartbeat interval. Zero keeps entries until a
	// publisher's Close deletes them.
	TTL time.Duration
}

// Store is a [watermark.Store] in a JetStream key-value bucket. It is safe
// for concurrent use; it holds no goroutine and needs no Close (the
// connection is the caller's).
type Store struct {
	kv jetstream.KeyValue
}

// Open creates the bucket cfg names, or updates it to cfg when it exists, and
// returns the store in it.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, ErrNoBucket
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "watermarks: the latest entry of each processor and partition",
		History:     1,
		TTL:         cfg.TTL,
		Storage:     cfg.Storage,
		Replicas:    max(cfg.Replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("jsstore: open bucket %s: %w", cfg.Bucket, err)
	}
	return &Store{kv: kv}, nil
}

// Put stores e under the key of its processor and partition.
func (s *Store) Put(ctx context.Context, e watermark.Entry) error {
	if !watermark.ValidProcessor(e.Processor) {
		return fmt.Errorf("%w: %q", watermark.ErrInvalidProcessor, e.Processor)
	}
	if _, err := s.kv.Put(ctx, key(e.Processor, e.Partition), encode(e)); err != nil {
		return fmt.Errorf("jsstore: put %s: %w", key(e.Processor, e.Partition), err)
	}
	return nil
}

// Entries returns the latest entry of every key of the bucket.
func (s *Store) Entries(ctx context.Context) ([]watermark.Entry, error) {
	w, err := s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("jsstore: read bucket %s: %w", s.kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	latest := map[string]watermark.Entry{} // a key put during the read comes twice: the later wins
	for {
		select {
		case kve, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("jsstore: read bucket %s: watcher stopped", s.kv.Bucket())
			}
			if kve == nil { // every latest value delivered
				out := make([]watermark.Entry, 0, len(latest))
				for _, e := range latest {
					out = append(out, e)
				}
				return out, nil
			}
			e, err := decode(kve.Key(), kve.Value())
			if err != nil {
				return nil, err
			}
			latest[kve.Key()] = e
		case <-ctx.Done():
			return nil, fmt.Errorf("jsstore: read bucket %s: %w", s.kv.Bucket(), ctx.Err())
		}
	}
}

// Delete deletes every key of processor.
func (s *Store) Delete(ctx context.Context, processor string) error {
	if !watermark.ValidProcessor(processor) {
		return fmt.Errorf("%w: %q", watermark.ErrInvalidProcessor, processor)
	}
	kl, err := s.kv.ListKeysFiltered(ctx, processor+".*")
	if err != nil {
		return fmt.Errorf("jsstore: list keys of %s: %w", processor, err)
	}
	defer func() { _ = kl.Stop() }()
	var keys []string
	for k := range kl.Keys() {
		keys = append(keys, k)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jsstore: list keys of %s: %w", processor, err)
	}
	for _, k := range keys {
		if err := s.kv.Delete(ctx, k); err != nil {
			return fmt.Errorf("jsstore: delete %s: %w", k, err)
		}
	}
	return nil
}

func key(processor string, partition int32) string {
	return processor + "." + strconv.FormatInt(int64(partition), 10)
}

func encode(e watermark.Entry) []byte {
	b := make([]byte, valueSize)
	binary.BigEndian.PutUint64(b[:8], uint64(e.Watermark.UnixMilli()))
	binary.BigEndian.PutUint64(b[8:16], uint64(e.Heartbeat.UnixMilli()))
	binary.BigEndian.PutUint64(b[16:], uint64(e.Offset))
	return b
}

func decode(k string, v []byte) (watermark.Entry, error) {
	i := strings.LastIndexByte(k, '.')
	if i <= 0 {
		return watermark.Entry{}, fmt.Errorf("%w: key %q has no partition", ErrMalformed, k)
	}
	part, err := strconv.ParseInt(k[i+1:], 10, 32)
	if err != nil || !watermark.ValidProcessor(k[:i]) {
		return watermark.Entry{}, fmt.Errorf("%w: key %q is not processor.partition", ErrMalformed, k)
	}
	if len(v) != valueSize {
		return watermark.Entry{}, fmt.Errorf("%w: key %q: value of %d bytes, want %d", ErrMalformed, k, len(v), valueSize)
	}
	return watermark.Entry{
		Processor: k[:i],
		Partition: int32(part),
		Watermark: time.UnixMilli(int64(binary.BigEndian.Uint64(v[:8]))).UTC(),
		Heartbeat: time.UnixMilli(int64(binary.BigEndian.Uint64(v[8:16]))).UTC(),
		Offset:    int64(binary.BigEndian.Uint64(v[16:])),
	}, nil
}
