package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
)

// jetStreamISB is the buffers of a pipeline on NATS JetStream
// (spec.isb.jetstream). Every buffer a vertex reads or writes is created, if
// missing, before it is used, so vertices may start in any order.
type jetStreamISB struct {
	conn    *jetstream.Conn
	mu      sync.Mutex
	created map[string]bool
}

// connectRetry is the pause between attempts to reach a NATS server that is
// not up yet.
const connectRetry = time.Second

// newJetStreamISB connects to the pipeline's JetStream server, retrying until
// ctx ends while the server cannot be reached. Credentials the server refuses,
// or a config without spec.isb.jetstream, are usage errors.
func newJetStreamISB(ctx context.Context, p *config.Pipeline, log *zap.Logger) (*jetStreamISB, error) {
	cfg, err := jetStreamConfig(p, log)
	if err != nil {
		return nil, err
	}
	for logged := false; ; {
		conn, err := jetstream.Connect(ctx, cfg)
		switch {
		case err == nil:
			return &jetStreamISB{conn: conn, created: map[string]bool{}}, nil
		case errors.Is(err, jetstream.ErrAuth) || errors.Is(err, jetstream.ErrInvalidConfig):
			return nil, usagef("spec.isb.jetstream: %v", err)
		case ctx.Err() != nil:
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

// jetStreamConfig reads spec.isb.jetstream, with its secrets.
func jetStreamConfig(p *config.Pipeline, log *zap.Logger) (jetstream.Config, error) {
	if p.Spec.ISB == nil || p.Spec.ISB.JetStream == nil {
		return jetstream.Config{}, usagef("spec.isb.jetstream: required to run pipeline %q on JetStream (set its url, nats://host:port); "+
			"without --vertex and --isb, vertex run runs the whole pipeline in one process on in-memory buffers", p.Metadata.Name)
	}
	js := p.Spec.ISB.JetStream
	cfg := jetstream.Config{URL: js.URL, Name: "sluice-" + p.Metadata.Name, AckWait: js.GetAckWait(),
		DuplicateWindow: js.GetDuplicates(), FrameSize: js.GetFrameSize(), Logger: log.Named("jetstream")}
	if js.GetStorage() == config.MemoryStorage {
		cfg.Storage = jetstream.MemoryStorage
	}
	var err error
	for _, s := range []struct {
		sel  *config.SecretKeySelector
		path string
		dst  *string
	}{{js.User, "spec.isb.jetstream.user", &cfg.User}, {js.Password, "spec.isb.jetstream.password", &cfg.Password},
		{js.Token, "spec.isb.jetstream.token", &cfg.Token}} {
		if s.sel != nil {
			if *s.dst, err = readSecretField(s.sel, s.path); err != nil {
				return cfg, err
			}
		}
	}
	if cfg.TLS, err = readTLS(js.TLS, "spec.isb.jetstream.tls"); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// ensure creates buffer b unless this process has already.
func (j *jetStreamISB) ensure(ctx context.Context, b bufferSpec) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.created[b.name] {
		return nil
	}
	if err := j.conn.CreateBuffer(ctx, jetstream.BufferSpec{Name: b.name, MaxLength: b.maxLength, UsageLimit: b.usageLimit}); err != nil {
		return err
	}
	j.created[b.name] = true
	return nil
}

func (j *jetStreamISB) reader(ctx context.Context, b bufferSpec, readTimeout time.Duration) (isb.Reader, func() error, error) {
	if err := j.ensure(ctx, b); err != nil {
		return nil, nil, err
	}
	r, err := j.conn.Reader(b.name, readTimeout)
	if err != nil {
		return nil, nil, err
	}
	return r, r.Close, nil
}

func (j *jetStreamISB) writer(ctx context.Context, b bufferSpec, from string, maxLength, usageLimit int) (isb.Writer, func() error, error) {
	if err := j.ensure(ctx, b); err != nil {
		return nil, nil, err
	}
	w := j.conn.Writer(jetstream.BufferSpec{Name: b.name, MaxLength: maxLength, UsageLimit: usageLimit}, from)
	return w, w.Close, nil
}

func (j *jetStreamISB) close() error { return j.conn.Close() }

// resetJetStreamBuffers deletes and creates again every buffer of p: they are
// empty afterwards.
func resetJetStreamBuffers(ctx context.Context, p *config.Pipeline, log *zap.Logger) error {
	j, err := newJetStreamISB(ctx, p, log)
	if err != nil {
		return err
	}
	defer j.close()
	for _, b := range (graph{p}).allBuffers() {
		if err := j.conn.DeleteBuffer(ctx, b.name); err != nil {
			return err
		}
		if err := j.ensure(ctx, b); err != nil {
			return err
		}
	}
	return nil
}
