package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
	"github.com/sluiceflow/sluice/pkg/secret"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// jetStreamPath is where a pipeline's JetStream settings sit in its YAML.
const jetStreamPath = "spec.isb.jetstream"

// JetStream is the buffers of a pipeline on NATS JetStream
// (spec.isb.jetstream). Every buffer a vertex reads or writes is created, if
// missing, before it is used, so vertices may start in any order.
type JetStream struct {
	conn    *jetstream.Conn
	mu      sync.Mutex
	created map[string]bool
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
	cfg, err := JetStreamConfig(p, log)
	if err != nil {
		return nil, err
	}
	for logged := false; ; {
		conn, err := ConnectJetStream(ctx, cfg)
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

// ConnectJetStream connects once to the server of cfg; credentials the server
// refuses are a [*config.FieldError] naming spec.isb.jetstream.
func ConnectJetStream(ctx context.Context, cfg jetstream.Config) (*jetstream.Conn, error) {
	conn, err := jetstream.Connect(ctx, cfg)
	if errors.Is(err, jetstream.ErrAuth) || errors.Is(err, jetstream.ErrInvalidConfig) {
		return nil, &config.FieldError{Path: jetStreamPath, Err: err}
	}
	return conn, err
}

// JetStreamConfig reads spec.isb.jetstream, with its secrets.
func JetStreamConfig(p *config.Pipeline, log *zap.Logger) (jetstream.Config, error) {
	if p.Spec.ISB == nil || p.Spec.ISB.JetStream == nil {
		return jetstream.Config{}, &config.FieldError{Path: jetStreamPath,
			Err: fmt.Errorf("required to run pipeline %q on JetStream (set its url, nats://host:port)", p.Metadata.Name)}
	}
	js := p.Spec.ISB.JetStream
	cfg := jetstream.Config{URL: js.URL, Name: "sluice-" + p.Metadata.Name, AckWait: js.GetAckWait(),
		DuplicateWindow: js.GetDuplicates(), FrameSize: js.GetFrameSize(), Storage: vertexconfig.Storage(js),
		Logger: log.Named("jetstream")}
	var err error
	for _, s := range []struct {
		sel   *config.SecretKeySelector
		field string
		dst   *string
	}{{js.User, "user", &cfg.User}, {js.Password, "password", &cfg.Password}, {js.Token, "token", &cfg.Token}} {
		if s.sel != nil {
			if *s.dst, err = secret.Read(s.sel, jetStreamPath+"."+s.field); err != nil {
				return cfg, err
			}
		}
	}
	if cfg.TLS, err = secret.TLS(js.TLS, jetStreamPath+".tls"); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// JetStreamSpec is b as a JetStream buffer.
func (b BufferSpec) JetStreamSpec() jetstream.BufferSpec {
	return jetstream.BufferSpec{Name: b.Name, MaxLength: b.MaxLength, UsageLimit: b.UsageLimit}
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

// Writer implements [Buffers]: a [*jetstream.Writer].
func (j *JetStream) Writer(ctx context.Context, b BufferSpec, from string, maxLength, usageLimit int) (isb.Writer, error) {
	if err := j.ensure(ctx, b); err != nil {
		return nil, err
	}
	return j.conn.Writer(jetstream.BufferSpec{Name: b.Name, MaxLength: maxLength, UsageLimit: usageLimit}, from), nil
}

// Close implements [Buffers]: it closes the connection.
func (j *JetStream) Close() error { return j.conn.Close() }

// Reset deletes and creates again every buffer of g: they are empty afterwards.
func (j *JetStream) Reset(ctx context.Context, g Graph) error {
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
