package sideinputs

import (
	"context"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketName is the JetStream key-value bucket of a pipeline's side inputs.
func BucketName(pipeline string) string { return pipeline + "-side-inputs" }

// KV is a [Store] in a JetStream key-value bucket, a key per side input, for
// the processes of a pipeline across processes: the manager's puts, the
// vertices' watch. It is safe for concurrent use and holds no goroutine; the
// connection is the caller's.
type KV struct {
	kv jetstream.KeyValue
}

var _ Store = (*KV)(nil)

// OpenKV creates the bucket, or opens it when it exists.
func OpenKV(ctx context.Context, js jetstream.JetStream, bucket string) (*KV, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "side inputs: the latest value of each",
		History:     1,
	})
	if err != nil {
		return nil, fmt.Errorf("side inputs: open bucket %s: %w", bucket, err)
	}
	return &KV{kv: kv}, nil
}

// Put sets name's value in the bucket.
func (s *KV) Put(ctx context.Context, name string, value []byte) error {
	if _, err := s.kv.Put(ctx, name, value); err != nil {
		return fmt.Errorf("side inputs: put %s in bucket %s: %w", name, s.kv.Bucket(), err)
	}
	return nil
}

// Watch calls fn with the value in the bucket of each of names, then with
// every value put, until ctx ends or the watch stops.
func (s *KV) Watch(ctx context.Context, names []string, fn func(name string, value []byte)) error {
	w, err := s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("side inputs: watch bucket %s: %w", s.kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("side inputs: watch bucket %s: the watch stopped", s.kv.Bucket())
			case e == nil: // the values in the bucket at start are all delivered
			case slices.Contains(names, e.Key()):
				fn(e.Key(), e.Value())
			}
		}
	}
}
