package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
	"github.com/sluiceflow/sluice/pkg/watermark"
	"github.com/sluiceflow/sluice/pkg/watermark/jsstore"
)

// JetStream is the buffers of a pipeline on NATS JetStream
// (spec.isb.jetstream). Every buffer a vertex reads or writes is created, if
// missing, before it is used, so vertices may start in any order.
type JetStream struct {
	conn    *jetstream.Conn
	mu      sync.Mutex
	created map[string]bool
	marks   map[string]*jsstore.Store
}

var _ Buffers = (*JetStream)(nil)

// connectRetry is the pause between attempts to reach a NATS server that is
// not up yet.
const connectRetry = time.Second

// OpenJetStream connects to the pipeline's JetStream server, retrying until
// ctx ends while the server cannot be reached. Credentials the server refuses,
// or a pipeline without spec.isb.jetstream, are a [*config.FieldError].
func OpenJetStream(ctx context.Context, p *config.Pipeline, log *zap.Logger) (*JetStream, error) {
	if log == nil {
		log = zap.NewNop()
	}
	cfg, err := vertexconfig.JetStreamConfig(p, log)
	if err != nil {
		return nil, err
	}
	for logged := false; ; {
		conn, err := vertexconfig.ConnectJetStream(ctx, cfg)
		var fe *config.FieldError
		switch {
		case err == nil:
			return &JetStream{conn: conn, created: map[string]bool{}}, nil
		case errors.As(err, &fe) || ctx.Err() != nil:
			return nil, err
		}
		if !logged {
			log.Warn("JetStream not reachable; retrying", zap.Error(err), zap.Duration("every", connectRetry))
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(connectRetry):
		}
	}
}

// JetStreamSpec is b as a JetStream buffer.
func (b BufferSpec) JetStreamSpec() jetstream.BufferSpec {
	return jetstream.BufferSpec{Name: b.Name, MaxLength: b.MaxLength, UsageLimit: b.UsageLimit, Ordered: b.Ordered}
}

// ensure creates buffer b unless this connection has already.
func (j *JetStream) ensure(ctx context.Context, b BufferSpec) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.created[b.Name] {
		return nil
	}
	if err := j.conn.CreateBuffer(ctx, b.JetStreamSpec()); err != nil {
		return err
	}
	j.created[b.Name] = true
	return nil
}

// Reader implements [Buffers]: a [*jetstream.Reader], which hands back the
// messages it holds when it is closed.
func (j *JetStream) Reader(ctx context.Context, b BufferSpec, readTimeout time.Duration) (isb.Reader, error) {
	if err := j.ensure(ctx, b); err != nil {
		return nil, err
	}
	return j.conn.Reader(b.Name, readTimeout)
}

// Writer implements [Buffers]: a [*jetstream.Writer], whose LastOffset
// starts at the buffer's last offset.
func (j *JetStream) Writer(ctx context.Context, b BufferSpec, from string, maxLength, usageLimit int) (isb.Writer, error) {
	if err := j.ensure(ctx, b); err != nil {
		return nil, err
	}
	w := j.conn.Writer(jetstream.BufferSpec{Name: b.Name, MaxLength: maxLength, UsageLimit: usageLimit}, from)
	// What the processor wrote before a restart is behind the watermarks it
	// publishes from now on.
	info, err := j.conn.BufferInfo(ctx, b.Name)
	if err != nil {
		w.Close()
		return nil, err
	}
	w.RaiseLastOffset(info.LastOffset)
	return w, nil
}

// Marks implements [Buffers]: the JetStream key-value bucket called name,
// created if missing.
func (j *JetStream) Marks(ctx context.Context, name string) (watermark.Store, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s := j.marks[name]; s != nil {
		return s, nil
	}
	s, err := jsstore.Open(ctx, j.conn.JetStream(), jsstore.Config{Bucket: name})
	if err != nil {
		return nil, fmt.Errorf("watermark bucket %s: %w", name, err)
	}
	if j.marks == nil {
		j.marks = map[string]*jsstore.Store{}
	}
	j.marks[name] = s
	return s, nil
}

// Close implements [Buffers]: it closes the connection.
func (j *JetStream) Close() error { return j.conn.Close() }

// Reset deletes and creates again every buffer of g, and deletes its
// watermark buckets: they are empty afterwards.
func (j *JetStream) Reset(ctx context.Context, g Graph) error {
	for _, v := range g.Vertices() {
		if len(g.Inputs(v)) == 0 {
			continue
		}
		name := g.MarksName(v)
		if err := j.conn.JetStream().DeleteKeyValue(ctx, name); err != nil && !errors.Is(err, natsjs.ErrBucketNotFound) {
			return fmt.Errorf("watermark bucket %s: %w", name, err)
		}
		j.mu.Lock()
		delete(j.marks, name)
		j.mu.Unlock()
	}
	for _, b := range g.Buffers() {
		if err := j.conn.DeleteBuffer(ctx, b.Name); err != nil {
			return err
		}
		j.mu.Lock()
		delete(j.created, b.Name)
		j.mu.Unlock()
		if err := j.ensure(ctx, b); err != nil {
			return err
		}
	}
	return nil
}
